// lcm's caps on the sizes of a scenario and of the CLI's list options: every size the model
// multiplies stays far from int64 / double overflow, and every loop the planner, trace and
// capacity commands run is bounded. Each cap is far above any published model (the largest
// bundled values are in parentheses). The loader reads every key against its cap, the
// validator checks them for scenarios built in code, and docs/scenario-format.md#caps lists
// them; a value above a cap is an input error naming the cap.
#pragma once

#include <cstdint>

namespace lcm::limits {

// ---- model ----
inline constexpr int64_t kNumLayers = 1024;              // (126, Llama 3.1 405B)
inline constexpr int64_t kHiddenSize = 262'144;          // (16384)
inline constexpr int64_t kFfnHiddenSize = 1'048'576;     // dense, expert and shared widths (53248)
inline constexpr int64_t kAttentionHeads = 16'384;       // also query groups (128)
inline constexpr int64_t kHeadDim = 65'536;              // kv_channels, MLA ranks and head dims (1536)
inline constexpr int64_t kVocabSize = 16'777'216;        // (256000); also make_vocab_size_divisible_by
inline constexpr int64_t kNumExperts = 16'384;           // also router groups (256)
inline constexpr int64_t kMtpLayers = 64;                // (1)
// ---- training ----
inline constexpr int64_t kSeqLength = 134'217'728;       // 128M tokens; also max_position_embeddings
inline constexpr int64_t kMicroBatchSize = 65'536;
inline constexpr int64_t kGlobalBatchSize = 16'777'216;
// ---- parallel / hardware ----
inline constexpr int64_t kNumGpus = 1'048'576;           // also every parallel size
// ---- CLI list options ----
inline constexpr int64_t kListEntries = 256;             // --seq, --cf entries; sweep points
inline constexpr int64_t kRoutingTokens = int64_t{1} << 40;  // capacity --tokens (T per routing group)
inline constexpr double kMonteCarloDraws = 2e9;          // capacity --method mc: samples * T * topk (~1 min)
inline constexpr double kExpertLoad = 1e15;              // one entry of capacity --loads
// lcm trace: layers x micro-batches shown (~70 events, ~13 KB each); the default scenario has 512.
inline constexpr int64_t kTraceLayerMicroBatches = 8'192;

}  // namespace lcm::limits
