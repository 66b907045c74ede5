// Token sources of the training runner: what `lcm-exec train --data SPEC` feeds the model.
//
//   synthetic  uniform random tokens in [0, vocab), counter-based (token i of sequence n is a
//              hash of seed, n and i), so the state is a cursor; the loss stays near ln(vocab)
//   copy       a learnable task: each sequence is a random prefix of L = (seq - 1) / 2 tokens
//              from min(vocab - 1, 512) symbols, the separator vocab - 1, the prefix again
//              (and one pad token when seq is even); labels only on the copied half, -1
//              elsewhere, so a model that learns to copy drives its loss toward 0
//   PATH       Megatron's indexed dataset PATH.bin + PATH.idx (the MMIDIDX format of
//              megatron/core/datasets/indexed_dataset.py, memory-mapped): the documents
//              concatenated in file order (end-of-document tokens kept as they are in the
//              file), cut into windows of seq + 1 tokens that overlap by one token (window w
//              starts at token w * seq, as Megatron's GPTDataset samples do), the window order
//              shuffled by a seeded permutation per epoch. Simpler than GPTDataset's sample
//              index (no document shuffle, no blending), same tokens.
//
// Tokens and labels are int32 on the host, batch * seq each, row-major [batch][seq];
// labels[i] is the token after tokens[i], or -1 where no loss is taken.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lcm::exec::train {

class TokenSource {
 public:
  virtual ~TokenSource();
  // Fills batch * seq tokens and labels. Every call of one source must use the same seq.
  virtual void next(int64_t batch, int64_t seq, int32_t* tokens, int32_t* labels) = 0;
  virtual nlohmann::json state() const = 0;  // the position, for a checkpoint
  virtual void restore(const nlohmann::json& state) = 0;  // UsageError when it is another source's state
  virtual std::string describe() const = 0;  // one line for the run's log and summary
};

// spec: "synthetic", "copy" or the prefix of an indexed dataset. Bad specs and bad files
// throw UsageError naming the file, the field and what was expected. Token ids outside
// [0, vocab) are reported when next() reaches them.
std::unique_ptr<TokenSource> make_token_source(const std::string& spec, int64_t vocab, uint64_t seed);

// The dtype codes of Megatron's DType enum (indexed_dataset.py).
enum class IndexedDtype : uint8_t {
  kUint8 = 1,
  kInt8 = 2,
  kInt16 = 3,
  kInt32 = 4,
  kInt64 = 5,
  kFloat64 = 6,
  kFloat32 = 7,
  kUint16 = 8
};

// Writes PREFIX.bin and PREFIX.idx as Megatron's IndexedDatasetBuilder does with one sequence
// per document (add_document): the tokens as given (append the end-of-document token
// yourself, as preprocess_data.py --append-eod does). Integer dtypes only; a token that does
// not fit the dtype is a UsageError.
void write_indexed_dataset(const std::filesystem::path& prefix, const std::vector<std::vector<int64_t>>& documents,
                           IndexedDtype dtype);

}  // namespace lcm::exec::train
