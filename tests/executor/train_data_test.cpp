// Host tests of the training runner's token sources (lcm/executor/train/data.hpp): the
// indexed dataset's byte layout against Megatron's format (written and hand-built), windows
// and epochs, determinism, state / restore, every bad-file case; the synthetic and copy
// sources.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "lcm/executor/error.hpp"
#include "lcm/executor/train/data.hpp"

namespace lcm::exec::train {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<unsigned char>;

class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() /
            ("lcm_train_data_" + std::to_string(::getpid()) + "_" + info->test_suite_name() + "_" + info->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string prefix(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

Bytes read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), {});
}
void write_bytes(const fs::path& p, const Bytes& b) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}
template <class T>
T get(const Bytes& b, size_t offset) {
  T v;
  std::memcpy(&v, b.data() + offset, sizeof(T));
  return v;
}
template <class T>
void put(Bytes& b, size_t offset, T v) {
  std::memcpy(b.data() + offset, &v, sizeof(T));
}
template <class T>
void append(Bytes& b, T v) {
  unsigned char raw[sizeof(T)];
  std::memcpy(raw, &v, sizeof(T));
  b.insert(b.end(), raw, raw + sizeof(T));
}

struct Batch {
  std::vector<int32_t> tokens, labels;
  bool operator==(const Batch&) const = default;
};
Batch next(TokenSource& s, int64_t batch, int64_t seq) {
  Batch b{std::vector<int32_t>(static_cast<size_t>(batch * seq)),
          std::vector<int32_t>(static_cast<size_t>(batch * seq))};
  s.next(batch, seq, b.tokens.data(), b.labels.data());
  return b;
}

std::string usage_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no UsageError)";
}

// Two documents, each ending in the end-of-document token 0, as preprocess_data.py --append-eod writes them.
const std::vector<std::vector<int64_t>> kTwoDocs = {{1, 2, 3, 0}, {4, 5, 0}};

TEST(IndexedDataset, WriterProducesMegatronsLayoutFieldByField) {
  TempDir dir;
  const std::string p = dir.prefix("two");
  write_indexed_dataset(p, kTwoDocs, IndexedDtype::kUint16);
  const Bytes idx = read_bytes(p + ".idx");
  ASSERT_EQ(idx.size(), 34u + 4 * 2 + 8 * 2 + 8 * 3);
  EXPECT_EQ(std::memcmp(idx.data(), "MMIDIDX\0\0", 9), 0);
  EXPECT_EQ(get<uint64_t>(idx, 9), 1u);  // version
  EXPECT_EQ(idx[17], 8);  // DType.uint16
  EXPECT_EQ(get<uint64_t>(idx, 18), 2u);  // sequence count
  EXPECT_EQ(get<uint64_t>(idx, 26), 3u);  // document count: the indices 0, 1, 2
  EXPECT_EQ(get<int32_t>(idx, 34), 4);  // sequence lengths
  EXPECT_EQ(get<int32_t>(idx, 38), 3);
  EXPECT_EQ(get<int64_t>(idx, 42), 0);  // sequence pointers, in bytes
  EXPECT_EQ(get<int64_t>(idx, 50), 8);
  EXPECT_EQ(get<int64_t>(idx, 58), 0);  // document indices
  EXPECT_EQ(get<int64_t>(idx, 66), 1);
  EXPECT_EQ(get<int64_t>(idx, 74), 2);
  EXPECT_EQ(read_bytes(p + ".bin"), (Bytes{1, 0, 2, 0, 3, 0, 0, 0, 4, 0, 5, 0, 0, 0}));
}

// The index a sentence-splitting preprocess_data.py run writes: document 0 is sequences 0 and
// 1, document 1 is sequence 2; int32 tokens.
Bytes hand_built_index() {
  Bytes b = {'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0};
  append<uint64_t>(b, 1);
  append<uint8_t>(b, 4);
  append<uint64_t>(b, 3);
  append<uint64_t>(b, 3);
  for (int32_t len : {2, 2, 4}) append(b, len);
  for (int64_t ptr : {0, 8, 16}) append(b, ptr);
  for (int64_t d : {0, 2, 3}) append(b, d);
  return b;
}
Bytes hand_built_bin() {
  Bytes b;
  for (int32_t t : {10, 11, 12, 0, 13, 14, 15, 0}) append(b, t);
  return b;
}

TEST(IndexedDataset, ReadsAHandBuiltIndexWithDocumentsOfSeveralSequences) {
  TempDir dir;
  const std::string p = dir.prefix("hand");
  write_bytes(p + ".idx", hand_built_index());
  write_bytes(p + ".bin", hand_built_bin());
  auto src = make_token_source(p, 100, 7);
  EXPECT_EQ(
      src->describe(),
      "indexed dataset " + p + ": 2 documents, 8 tokens (int32), windows of seq + 1 tokens shuffled per epoch, seed 7");
  const Batch b = next(*src, 1, 7);  // (8 - 1) / 7 = 1 window: all the tokens, the end-of-document tokens kept
  EXPECT_EQ(b.tokens, (std::vector<int32_t>{10, 11, 12, 0, 13, 14, 15}));
  EXPECT_EQ(b.labels, (std::vector<int32_t>{11, 12, 0, 13, 14, 15, 0}));
}

TEST(IndexedDataset, RoundTripsEveryIntegerDtype) {
  TempDir dir;
  const std::vector<std::pair<IndexedDtype, int64_t>> cases = {
      {IndexedDtype::kUint8, 250},     {IndexedDtype::kInt8, 120},         {IndexedDtype::kInt16, 30000},
      {IndexedDtype::kInt32, 2000000}, {IndexedDtype::kInt64, 2000000000}, {IndexedDtype::kUint16, 65000}};
  for (const auto& [dtype, big] : cases) {
    const std::string p = dir.prefix("dt" + std::to_string(static_cast<int>(dtype)));
    write_indexed_dataset(p, {{big, 1, 0}, {2, big - 1, 0}}, dtype);
    auto src = make_token_source(p, big + 1, 1);
    const Batch b = next(*src, 1, 5);
    EXPECT_EQ(b.tokens, (std::vector<int32_t>{static_cast<int32_t>(big), 1, 0, 2, static_cast<int32_t>(big - 1)}));
    EXPECT_EQ(b.labels, (std::vector<int32_t>{1, 0, 2, static_cast<int32_t>(big - 1), 0}));
  }
}

// 41 tokens whose values are their positions, seq 8: windows start at 0, 8, 16, 24, 32 (the
// last one's final label is token 40); every epoch visits each once, in a seeded order.
TEST(IndexedDataset, EveryEpochVisitsEachWindowOnceInAShuffledOrder) {
  TempDir dir;
  const std::string p = dir.prefix("pos");
  std::vector<std::vector<int64_t>> docs(3);
  for (int64_t t = 0; t <= 40; ++t) docs[t < 10 ? 0 : t < 30 ? 1 : 2].push_back(t);
  write_indexed_dataset(p, docs, IndexedDtype::kInt32);
  auto src = make_token_source(p, 41, 99);
  std::set<std::vector<int32_t>> orders;
  for (int epoch = 0; epoch < 6; ++epoch) {
    std::vector<int32_t> starts;
    for (int w = 0; w < 5; ++w) {
      const Batch b = next(*src, 1, 8);
      for (int i = 0; i < 8; ++i) {
        ASSERT_EQ(b.tokens[i], b.tokens[0] + i);
        ASSERT_EQ(b.labels[i], b.tokens[0] + i + 1);
      }
      starts.push_back(b.tokens[0]);
    }
    std::vector<int32_t> sorted = starts;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, (std::vector<int32_t>{0, 8, 16, 24, 32})) << "epoch " << epoch;
    orders.insert(starts);
  }
  EXPECT_GT(orders.size(), 1u) << "six epochs in one order: the per-epoch shuffle does not depend on the epoch";
  EXPECT_EQ(src->state()["epoch"], 5);  // the next epoch starts with the next window
  EXPECT_EQ(src->state()["window"], 5);
}

TEST(IndexedDataset, SameSeedSameBatchesAndARestoredSourceContinuesExactly) {
  TempDir dir;
  const std::string p = dir.prefix("det");
  std::vector<std::vector<int64_t>> docs;
  for (int d = 0; d < 7; ++d) {
    docs.emplace_back();
    for (int i = 0; i < 5 + 3 * d; ++i) docs.back().push_back((d * 31 + i * 7) % 50);
    docs.back().push_back(0);
  }
  write_indexed_dataset(p, docs, IndexedDtype::kUint16);
  auto a = make_token_source(p, 50, 5), b = make_token_source(p, 50, 5), c = make_token_source(p, 50, 6);
  bool differs = false;
  for (int k = 0; k < 12; ++k) {  // 2 * 12 windows of 5 + 1: several epochs of the 20 windows
    const Batch x = next(*a, 2, 5);
    EXPECT_EQ(x, next(*b, 2, 5));
    differs |= !(x == next(*c, 2, 5));
  }
  EXPECT_TRUE(differs) << "seeds 5 and 6 gave the same windows";
  // Interrupt after 12 batches, save the state as text, restore it in a new source.
  auto resumed = make_token_source(p, 50, 5);
  resumed->restore(nlohmann::json::parse(a->state().dump()));
  for (int k = 0; k < 9; ++k) EXPECT_EQ(next(*a, 2, 5), next(*resumed, 2, 5)) << "batch " << k;
}

TEST(SyntheticTokens, UniformInRangeLabelsAreTheNextTokensAndRestoreContinues) {
  auto s = make_token_source("synthetic", 1000, 3);
  const Batch b = next(*s, 50, 2000);
  double sum = 0;
  for (size_t i = 0; i < b.tokens.size(); ++i) {
    ASSERT_GE(b.tokens[i], 0);
    ASSERT_LT(b.tokens[i], 1000);
    if (i % 2000 != 1999) {
      ASSERT_EQ(b.labels[i], b.tokens[i + 1]);
    }
    sum += b.tokens[i];
  }
  // Uniform on 0..999: mean 499.5, standard deviation of the mean 288.7 / sqrt(100000) = 0.91.
  EXPECT_NEAR(sum / static_cast<double>(b.tokens.size()), 499.5, 5.0);
  auto r = make_token_source("synthetic", 1000, 3);
  r->restore(s->state());
  EXPECT_EQ(next(*s, 2, 64), next(*r, 2, 64));
  auto other = make_token_source("synthetic", 1000, 4);
  EXPECT_NE(next(*other, 1, 64).tokens, next(*make_token_source("synthetic", 1000, 3), 1, 64).tokens);
}

TEST(CopyTask, SecondHalfCopiesTheFirstAndOnlyItCarriesLabels) {
  for (const int64_t seq : {9, 10}) {  // L = 4 both times; seq 10 ends in one pad token
    auto s = make_token_source("copy", 32000, 11);
    const Batch b = next(*s, 3, seq);
    const int64_t len = 4;
    for (int64_t r = 0; r < 3; ++r) {
      const int32_t* t = b.tokens.data() + r * seq;
      const int32_t* l = b.labels.data() + r * seq;
      EXPECT_EQ(t[len], 31999);
      for (int64_t k = 0; k < len; ++k) {
        EXPECT_LT(t[k], 512);
        EXPECT_EQ(t[len + 1 + k], t[k]);
      }
      for (int64_t i = 0; i < seq; ++i) {
        if (i >= len && i < 2 * len) {
          EXPECT_EQ(l[i], t[i + 1]);
          EXPECT_EQ(l[i], t[i - len]);  // what a model that copies predicts: the loss can reach 0
        } else {
          EXPECT_EQ(l[i], -1) << "seq " << seq << " position " << i;
        }
      }
    }
    EXPECT_NE(std::vector<int32_t>(b.tokens.begin(), b.tokens.begin() + len),
              std::vector<int32_t>(b.tokens.begin() + seq, b.tokens.begin() + seq + len));
  }
  auto small = make_token_source("copy", 5, 1);  // symbols 0..3, separator 4
  const Batch b = next(*small, 4, 7);
  for (size_t i = 0; i < b.tokens.size(); ++i) EXPECT_LE(b.tokens[i], 4);
  EXPECT_NE(usage_error([&] { next(*small, 1, 2); }).find("at least 3"), std::string::npos);
  EXPECT_NE(usage_error([] { make_token_source("copy", 1, 1); }).find("at least 2 tokens"), std::string::npos);
  auto a = make_token_source("copy", 100, 2);
  next(*a, 5, 9);
  auto resumed = make_token_source("copy", 100, 2);
  resumed->restore(a->state());
  EXPECT_EQ(next(*a, 2, 9), next(*resumed, 2, 9));
}

TEST(TokenSource, RestoreRejectsAnotherSourcesStateAndBadSpecsAreOneLiners) {
  auto copy = make_token_source("copy", 100, 2);
  auto syn = make_token_source("synthetic", 100, 2);
  EXPECT_NE(usage_error([&] {
              syn->restore(copy->state());
            }).find("written by the 'copy' source, this run reads 'synthetic'"),
            std::string::npos);
  EXPECT_NE(usage_error([&] { make_token_source("synthetic", 100, 3)->restore(syn->state()); }).find("seed 2"),
            std::string::npos);
  EXPECT_NE(usage_error([] { make_token_source("synthetic", 0, 1); }).find("vocabulary size 0"), std::string::npos);
  TempDir dir;
  const std::string p = dir.prefix("none");
  EXPECT_EQ(usage_error([&] { make_token_source(p, 100, 1); }), "--data " + p + ": not synthetic or copy, and " + p +
                                                                    ".idx does not exist (an indexed dataset is "
                                                                    "PREFIX.bin + PREFIX.idx)");
}

// Each bad file: write a good dataset, break one field, expect the message naming the file,
// the field and what was expected.
TEST(IndexedDataset, BadFilesGiveOneLineUsageErrors) {
  TempDir dir;
  const std::string p = dir.prefix("bad");
  const auto fresh = [&] { write_indexed_dataset(p, kTwoDocs, IndexedDtype::kUint16); };
  const auto open_error = [&](const std::function<void(Bytes&)>& edit, const std::string& file = ".idx") {
    fresh();
    Bytes b = read_bytes(p + file);
    edit(b);
    write_bytes(p + file, b);
    return usage_error([&] { make_token_source(p, 100, 1); });
  };
  const std::string idx = p + ".idx: ", bin = p + ".bin: ";
  EXPECT_EQ(open_error([](Bytes& b) { b.erase(b.begin() + 20, b.end()); }),
            idx + "truncated: the header needs 34 bytes, the file has 20");
  EXPECT_EQ(open_error([](Bytes& b) { b[0] = 'X'; }),
            idx + "bad magic: expected \"MMIDIDX\\0\\0\" (a Megatron indexed dataset index)");
  EXPECT_EQ(open_error([](Bytes& b) { put<uint64_t>(b, 9, 2); }), idx + "version: expected 1, found 2");
  EXPECT_EQ(open_error([](Bytes& b) { b[17] = 7; }),
            idx +
                "dtype code 7 (float32): expected an integer token type (1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, "
                "8 uint16)");
  EXPECT_NE(open_error([](Bytes& b) { b[17] = 9; }).find("dtype code 9: expected an integer"), std::string::npos);
  EXPECT_EQ(open_error([](Bytes& b) { b.erase(b.end() - 4, b.end()); }),
            idx + "truncated: 2 sequences and 3 document indices need 82 bytes, the file has 78");
  EXPECT_EQ(open_error([](Bytes& b) { put<uint64_t>(b, 18, uint64_t{1} << 62); }),
            idx +
                "truncated: 4611686018427387904 sequences and 3 document indices need 55340232221128654906 bytes, "
                "the file has 82");
  EXPECT_EQ(open_error([](Bytes& b) { put<uint64_t>(b, 26, 0); }),
            idx + "document count: expected at least 1 (the document indices start with 0), found 0");
  EXPECT_EQ(open_error([](Bytes& b) { put<int32_t>(b, 38, -3); }), idx + "sequence length 1: expected >= 0, found -3");
  EXPECT_EQ(
      open_error([](Bytes& b) { put<int64_t>(b, 50, 10); }),
      idx + "sequence pointer 1: expected 8 (sequences back to back, as Megatron's builder writes them), found 10");
  EXPECT_EQ(open_error([](Bytes& b) { put<int64_t>(b, 58, 1); }), idx + "document index 0: expected 0, found 1");
  EXPECT_EQ(open_error([](Bytes& b) { put<int64_t>(b, 74, 5); }),
            idx + "document index 2: expected a value in [1, 2], found 5");
  EXPECT_EQ(open_error([](Bytes& b) { put<int64_t>(b, 74, 1); }),
            idx + "document index 2: expected the sequence count 2, found 1");
  EXPECT_EQ(open_error([](Bytes& b) { b.erase(b.begin() + 12, b.end()); }, ".bin"),
            bin + "truncated: the index describes 14 bytes of tokens, the file has 12");
  fs::remove(p + ".bin");
  EXPECT_NE(usage_error([&] { make_token_source(p, 100, 1); }).find(p + ".bin does not exist"), std::string::npos);

  // Token ids are checked as the windows are read.
  fresh();
  auto small_vocab = make_token_source(p, 5, 1);  // token 5 at position 5 is outside [0, 5)
  EXPECT_EQ(usage_error([&] { next(*small_vocab, 1, 6); }),
            bin + "token 5 at token position 5: expected a token id in [0, 5) (the model's vocabulary)");
  write_indexed_dataset(p, {{3, -1, 0}}, IndexedDtype::kInt16);
  auto negative = make_token_source(p, 100, 1);
  EXPECT_EQ(usage_error([&] { next(*negative, 1, 2); }),
            bin + "token -1 at token position 1: expected a token id in [0, 100) (the model's vocabulary)");
  auto short_data = make_token_source(p, 100, 1);
  EXPECT_EQ(usage_error([&] { next(*short_data, 1, 3); }),
            p + ": 3 tokens, fewer than one window of 4 (sequence length + 1)");
  EXPECT_NE(usage_error([&] { write_indexed_dataset(p, {{300}}, IndexedDtype::kUint8); }).find("does not fit uint8"),
            std::string::npos);
}

}  // namespace
}  // namespace lcm::exec::train
