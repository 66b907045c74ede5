// Megatron's custom pipeline layout (--pipeline-model-parallel-layout, Megatron-Core
// PipelineParallelLayerLayout): which layers each (virtual) pipeline stage holds.
//
// Text: stages separated by '|', one character per layer: E embedding, t transformer
// (decoder) layer, m MTP layer, L loss (final norm, output layer, loss); "(...)*n" and "x*n"
// repeat; commas are cosmetic. "Et|(tt|)*30mL" is DeepSeek-V3's on pp 8 x vp 4: stage 0
// holds the embedding and layer 0, stages 1-30 two layers each, stage 31 the MTP layer and
// the loss. Stage s runs on pipeline rank s % pp as its virtual stage s / pp, and the
// transformer layers are numbered in stage order (Megatron's flatten order).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace lcm {

// A layout expanded to one string per stage (stage index = virtual stage * pp + rank),
// each of the characters E, t, m, L. `error` is non-empty when the text is not a layout
// (Megatron's parse_str_to_list would raise); it does not check the layout against a
// model (validate.cpp does: counts, pp, placement).
struct ExpandedPipelineLayout {
  std::vector<std::string> stages;
  std::string error;
};
ExpandedPipelineLayout expand_pipeline_layout(std::string_view text);

// The layout in Megatron's syntax, runs of equal stages written "(s|)*n": parses back to
// the same stages (expand_pipeline_layout).
std::string pipeline_layout_text(const std::vector<std::string>& stages);

// Megatron's uneven pipeline with interleaving (--decoder-first/last-pipeline-num-layers
// with --num-virtual-stages-per-pipeline-rank vp) as a layout: each rank's transformer
// layers split evenly over its vp chunks, the embedding first on stage 0, the MTP layers and
// the loss last on the last stage. `first` / `last` 0 = not set. Empty when a rank's count
// is not divisible by vp or the middle layers do not split evenly (Megatron asserts).
std::vector<std::string> uneven_interleaved_layout(int num_layers, int pp, int vp, int first, int last, int mtp_layers);

// Transformer layers ('t') per pipeline rank (the sum over its virtual stages).
std::vector<int> layout_layers_per_rank(const std::vector<std::string>& stages, int pp);

}  // namespace lcm
