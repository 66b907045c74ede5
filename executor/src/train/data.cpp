// Token sources of the training runner (data.hpp): synthetic, copy, and Megatron's indexed
// dataset (PATH.bin + PATH.idx), with its writer.
//
// The .idx layout (megatron/core/datasets/indexed_dataset.py, _IndexWriter), little-endian:
//   offset 0   9 bytes   magic "MMIDIDX\0\0"
//          9   u64       version, 1
//         17   u8        dtype code of the .bin tokens (DType: 1 uint8 ... 8 uint16)
//         18   u64       sequence count N
//         26   u64       document count D (= documents + 1: the document indices start with 0)
//         34   i32[N]    sequence lengths, in tokens
//              i64[N]    sequence pointers, byte offsets into the .bin
//              i64[D]    document indices: document d is sequences [idx[d], idx[d+1])
//              (i8[N]    sequence modes, multimodal datasets only; ignored here)
#include "lcm/executor/train/data.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cstring>
#include <fstream>
#include <limits>

#include "lcm/executor/error.hpp"

namespace lcm::exec::train {

static_assert(std::endian::native == std::endian::little, "the indexed dataset is little-endian");

TokenSource::~TokenSource() = default;

namespace {

constexpr char kMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
constexpr size_t kHeaderBytes = 34;
constexpr int64_t kCopySymbols = 512;
__extension__ typedef unsigned __int128 u128;

uint64_t splitmix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
uint64_t mix(uint64_t seed, uint64_t a, uint64_t b) { return splitmix(splitmix(splitmix(seed) ^ a) ^ b); }
// A value in [0, n) from 64 random bits (multiply-shift; the bias is below n / 2^64).
int64_t bounded(uint64_t bits, uint64_t n) { return static_cast<int64_t>((static_cast<u128>(bits) * n) >> 64); }

std::string decimal(u128 v) {
  std::string s;
  do {
    s.insert(s.begin(), static_cast<char>('0' + static_cast<int>(v % 10)));
    v /= 10;
  } while (v != 0);
  return s;
}

[[noreturn]] void bad(const std::filesystem::path& file, const std::string& what) {
  throw UsageError(file.string() + ": " + what);
}

void check_state_kind(const nlohmann::json& s, const std::string& kind, uint64_t seed, int64_t vocab) {
  if (!s.is_object() || s.value("source", "") != kind)
    throw UsageError("data state: written by the '" + (s.is_object() ? s.value("source", "?") : std::string("?")) +
                     "' source, this run reads '" + kind + "'");
  if (s.value("seed", uint64_t{0}) != seed || s.value("vocab", int64_t{0}) != vocab)
    throw UsageError("data state: written with seed " + s.value("seed", nlohmann::json()).dump() + " and vocab " +
                     s.value("vocab", nlohmann::json()).dump() + ", this run has seed " + std::to_string(seed) +
                     " and vocab " + std::to_string(vocab));
}

// ---- synthetic and copy: counter-based, the state is the number of sequences produced ----

class CounterSource : public TokenSource {
 public:
  CounterSource(std::string kind, int64_t vocab, uint64_t seed) : kind_(std::move(kind)), vocab_(vocab), seed_(seed) {}
  void next(int64_t batch, int64_t seq, int32_t* tokens, int32_t* labels) override {
    for (int64_t b = 0; b < batch; ++b) fill(sequences_++, seq, tokens + b * seq, labels + b * seq);
  }
  nlohmann::json state() const override {
    return {{"source", kind_}, {"seed", seed_}, {"vocab", vocab_}, {"sequences", sequences_}};
  }
  void restore(const nlohmann::json& s) override {
    check_state_kind(s, kind_, seed_, vocab_);
    sequences_ = s.at("sequences").get<int64_t>();
  }

 protected:
  virtual void fill(int64_t n, int64_t seq, int32_t* tokens, int32_t* labels) const = 0;
  std::string kind_;
  int64_t vocab_;
  uint64_t seed_;
  int64_t sequences_ = 0;
};

class SyntheticSource final : public CounterSource {
 public:
  SyntheticSource(int64_t vocab, uint64_t seed) : CounterSource("synthetic", vocab, seed) {}
  std::string describe() const override {
    return "synthetic: uniform random tokens in [0, " + std::to_string(vocab_) + "), seed " + std::to_string(seed_);
  }

 private:
  int32_t token(int64_t n, int64_t i) const {
    return static_cast<int32_t>(
        bounded(mix(seed_, static_cast<uint64_t>(n), static_cast<uint64_t>(i)), static_cast<uint64_t>(vocab_)));
  }
  void fill(int64_t n, int64_t seq, int32_t* tokens, int32_t* labels) const override {
    for (int64_t i = 0; i < seq; ++i) tokens[i] = token(n, i);
    for (int64_t i = 0; i + 1 < seq; ++i) labels[i] = tokens[i + 1];
    if (seq > 0) labels[seq - 1] = token(n, seq);
  }
};

class CopySource final : public CounterSource {
 public:
  CopySource(int64_t vocab, uint64_t seed) : CounterSource("copy", vocab, seed) {
    if (vocab < 2)
      throw UsageError("--data copy: needs a vocabulary of at least 2 tokens, got " + std::to_string(vocab));
  }
  std::string describe() const override {
    return "copy: a random prefix of (seq - 1) / 2 tokens from " + std::to_string(symbols()) + " symbols, separator " +
           std::to_string(vocab_ - 1) + ", the prefix again; loss on the copy only; seed " + std::to_string(seed_);
  }

 private:
  int64_t symbols() const { return std::min(vocab_ - 1, kCopySymbols); }
  void fill(int64_t n, int64_t seq, int32_t* tokens, int32_t* labels) const override {
    if (seq < 3) throw UsageError("--data copy: needs a sequence length of at least 3, got " + std::to_string(seq));
    const int64_t len = (seq - 1) / 2;
    const auto sep = static_cast<int32_t>(vocab_ - 1);
    for (int64_t k = 0; k < len; ++k) {
      const auto t = static_cast<int32_t>(
          bounded(mix(seed_, static_cast<uint64_t>(n), static_cast<uint64_t>(k)), static_cast<uint64_t>(symbols())));
      tokens[k] = t;
      tokens[len + 1 + k] = t;
    }
    tokens[len] = sep;
    if (2 * len + 1 < seq) tokens[seq - 1] = sep;  // one pad token
    for (int64_t i = 0; i < seq; ++i) labels[i] = i >= len && i < 2 * len ? tokens[i + 1] : -1;
  }
};

// ---- Megatron's indexed dataset ----

struct DtypeInfo {
  int code;
  const char* name;
  size_t bytes;
};
constexpr DtypeInfo kDtypes[] = {{1, "uint8", 1}, {2, "int8", 1},    {3, "int16", 2},   {4, "int32", 4},
                                 {5, "int64", 8}, {6, "float64", 8}, {7, "float32", 4}, {8, "uint16", 2}};
const DtypeInfo* dtype_info(int code) {
  for (const DtypeInfo& d : kDtypes)
    if (d.code == code) return &d;
  return nullptr;
}
bool is_integer(int code) { return code != 6 && code != 7; }

template <class T>
int64_t load_as(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return static_cast<int64_t>(v);
}

int64_t load_token(const unsigned char* p, int code) {
  switch (code) {
    case 1: return load_as<uint8_t>(p);
    case 2: return load_as<int8_t>(p);
    case 3: return load_as<int16_t>(p);
    case 4: return load_as<int32_t>(p);
    case 5: return load_as<int64_t>(p);
    case 8: return load_as<uint16_t>(p);
    default: return -1;
  }
}

// A read-only memory map of a whole file.
class MappedFile {
 public:
  explicit MappedFile(const std::filesystem::path& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) bad(path, std::string("cannot open: ") + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      const int e = errno;
      ::close(fd);
      bad(path, std::string("cannot stat: ") + std::strerror(e));
    }
    size_ = static_cast<size_t>(st.st_size);
    if (size_ > 0) {
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        const int e = errno;
        ::close(fd);
        bad(path, std::string("cannot map: ") + std::strerror(e));
      }
      data_ = static_cast<const unsigned char*>(p);
    }
    ::close(fd);
  }
  ~MappedFile() {
    if (data_) ::munmap(const_cast<unsigned char*>(data_), size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const unsigned char* data() const { return data_; }
  size_t size() const { return size_; }
  template <class T>
  T at(size_t offset) const {
    T v;
    std::memcpy(&v, data_ + offset, sizeof(T));
    return v;
  }

 private:
  const unsigned char* data_ = nullptr;
  size_t size_ = 0;
};

// What the .idx says, checked against the format and against the .bin's size.
struct IndexSummary {
  int dtype_code = 0;
  int64_t sequences = 0, documents = 0, tokens = 0;
};

IndexSummary read_index(const std::filesystem::path& idx_path, size_t bin_bytes,
                        const std::filesystem::path& bin_path) {
  const MappedFile idx(idx_path);
  const size_t size = idx.size();
  if (size < kHeaderBytes)
    bad(idx_path,
        "truncated: the header needs " + std::to_string(kHeaderBytes) + " bytes, the file has " + std::to_string(size));
  if (std::memcmp(idx.data(), kMagic, sizeof kMagic) != 0)
    bad(idx_path, "bad magic: expected \"MMIDIDX\\0\\0\" (a Megatron indexed dataset index)");
  if (const auto version = idx.at<uint64_t>(9); version != 1)
    bad(idx_path, "version: expected 1, found " + std::to_string(version));
  IndexSummary s;
  s.dtype_code = idx.data()[17];
  const DtypeInfo* dt = dtype_info(s.dtype_code);
  if (!dt || !is_integer(s.dtype_code))
    bad(idx_path, "dtype code " + std::to_string(s.dtype_code) + (dt ? std::string(" (") + dt->name + ")" : "") +
                      ": expected an integer token type (1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, 8 uint16)");
  const auto n = idx.at<uint64_t>(18), d = idx.at<uint64_t>(26);
  const uint64_t room = size - kHeaderBytes;
  if (n > room / 12 || d > (room - n * 12) / 8)
    bad(idx_path, "truncated: " + std::to_string(n) + " sequences and " + std::to_string(d) +
                      " document indices need " + decimal(kHeaderBytes + u128{12} * n + u128{8} * d) +
                      " bytes, the file has " + std::to_string(size));
  if (d < 1) bad(idx_path, "document count: expected at least 1 (the document indices start with 0), found 0");
  const size_t lengths = kHeaderBytes, pointers = lengths + 4 * n, doc_idx = pointers + 8 * n;
  uint64_t offset = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const auto len = idx.at<int32_t>(lengths + 4 * i);
    if (len < 0)
      bad(idx_path, "sequence length " + std::to_string(i) + ": expected >= 0, found " + std::to_string(len));
    const auto ptr = idx.at<int64_t>(pointers + 8 * i);
    if (static_cast<uint64_t>(ptr) != offset)
      bad(idx_path, "sequence pointer " + std::to_string(i) + ": expected " + std::to_string(offset) +
                        " (sequences back to back, as Megatron's builder writes them), found " + std::to_string(ptr));
    offset += static_cast<uint64_t>(len) * dt->bytes;
    s.tokens += len;
  }
  int64_t prev = 0;
  for (uint64_t k = 0; k < d; ++k) {
    const auto v = idx.at<int64_t>(doc_idx + 8 * k);
    if ((k == 0 && v != 0) || v < prev || v > static_cast<int64_t>(n))
      bad(idx_path,
          "document index " + std::to_string(k) + ": expected " +
              (k == 0 ? std::string("0") : "a value in [" + std::to_string(prev) + ", " + std::to_string(n) + "]") +
              ", found " + std::to_string(v));
    prev = v;
  }
  if (prev != static_cast<int64_t>(n))
    bad(idx_path, "document index " + std::to_string(d - 1) + ": expected the sequence count " + std::to_string(n) +
                      ", found " + std::to_string(prev));
  if (bin_bytes < offset)
    bad(bin_path, "truncated: the index describes " + std::to_string(offset) + " bytes of tokens, the file has " +
                      std::to_string(bin_bytes));
  s.sequences = static_cast<int64_t>(n);
  s.documents = static_cast<int64_t>(d) - 1;
  return s;
}

class IndexedSource final : public TokenSource {
 public:
  IndexedSource(std::string prefix, int64_t vocab, uint64_t seed)
      : prefix_(std::move(prefix)), bin_path_(prefix_ + ".bin"), bin_(bin_path_), vocab_(vocab), seed_(seed) {
    index_ = read_index(prefix_ + ".idx", bin_.size(), bin_path_);
    item_ = dtype_info(index_.dtype_code)->bytes;
  }

  void next(int64_t batch, int64_t seq, int32_t* tokens, int32_t* labels) override {
    if (seq != seq_) {
      if (seq_ != 0 && (epoch_ > 0 || window_ > 0))
        throw UsageError(prefix_ + ": the data position was reached with sequence length " + std::to_string(seq_) +
                         ", this call asks for " + std::to_string(seq));
      seq_ = seq;
      order_.clear();
    }
    const int64_t windows = seq > 0 ? (index_.tokens - 1) / seq : 0;
    if (seq < 1 || windows < 1)
      throw UsageError(prefix_ + ": " + std::to_string(index_.tokens) + " tokens, fewer than one window of " +
                       std::to_string(seq + 1) + " (sequence length + 1)");
    for (int64_t b = 0; b < batch; ++b) {
      if (window_ == windows) {
        ++epoch_;
        window_ = 0;
        order_.clear();
      }
      if (order_.empty())
        order_ = permutation(windows, mix(seed_, 0x6c636d2d65706f63ull, static_cast<uint64_t>(epoch_)));
      const int64_t start = order_[static_cast<size_t>(window_++)] * seq;
      int32_t* t = tokens + b * seq;
      int32_t* l = labels + b * seq;
      for (int64_t i = 0; i <= seq; ++i) {
        const int64_t pos = start + i;
        const int64_t v = load_token(bin_.data() + static_cast<size_t>(pos) * item_, index_.dtype_code);
        if (v < 0 || v >= vocab_)
          bad(bin_path_, "token " + std::to_string(v) + " at token position " + std::to_string(pos) +
                             ": expected a token id in [0, " + std::to_string(vocab_) + ") (the model's vocabulary)");
        if (i < seq) t[i] = static_cast<int32_t>(v);
        if (i > 0) l[i - 1] = static_cast<int32_t>(v);
      }
    }
  }

  nlohmann::json state() const override {
    return {{"source", "indexed"}, {"path", prefix_}, {"tokens", index_.tokens}, {"seed", seed_},
            {"vocab", vocab_},     {"seq", seq_},     {"epoch", epoch_},         {"window", window_}};
  }
  void restore(const nlohmann::json& s) override {
    check_state_kind(s, "indexed", seed_, vocab_);
    if (s.at("tokens").get<int64_t>() != index_.tokens)
      throw UsageError("data state: written for a dataset of " + s.at("tokens").dump() + " tokens (" +
                       s.value("path", "?") + "), " + prefix_ + " has " + std::to_string(index_.tokens));
    seq_ = s.at("seq").get<int64_t>();
    epoch_ = s.at("epoch").get<int64_t>();
    window_ = s.at("window").get<int64_t>();
    order_.clear();
  }
  std::string describe() const override {
    return "indexed dataset " + prefix_ + ": " + std::to_string(index_.documents) + " documents, " +
           std::to_string(index_.tokens) + " tokens (" + dtype_info(index_.dtype_code)->name +
           "), windows of seq + 1 tokens shuffled per epoch, seed " + std::to_string(seed_);
  }

 private:
  // Fisher-Yates with a splitmix64 stream: the same order on every platform.
  static std::vector<int64_t> permutation(int64_t n, uint64_t key) {
    std::vector<int64_t> p(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) p[static_cast<size_t>(i)] = i;
    for (int64_t i = n - 1; i > 0; --i) {
      const int64_t j = bounded(splitmix(key + static_cast<uint64_t>(i)), static_cast<uint64_t>(i + 1));
      std::swap(p[static_cast<size_t>(i)], p[static_cast<size_t>(j)]);
    }
    return p;
  }

  std::string prefix_;
  std::filesystem::path bin_path_;
  MappedFile bin_;
  IndexSummary index_;
  size_t item_ = 0;
  int64_t vocab_;
  uint64_t seed_;
  int64_t seq_ = 0, epoch_ = 0, window_ = 0;
  std::vector<int64_t> order_;  // the current epoch's window order (rebuilt on demand)
};

}  // namespace

std::unique_ptr<TokenSource> make_token_source(const std::string& spec, int64_t vocab, uint64_t seed) {
  if (vocab < 1 || vocab > std::numeric_limits<int32_t>::max())
    throw UsageError("--data: vocabulary size " + std::to_string(vocab) + ": expected 1 .. 2^31 - 1");
  if (spec == "synthetic") return std::make_unique<SyntheticSource>(vocab, seed);
  if (spec == "copy") return std::make_unique<CopySource>(vocab, seed);
  if (spec.empty()) throw UsageError("--data: expected synthetic, copy or the prefix of an indexed dataset, got ''");
  const std::filesystem::path idx = spec + ".idx", bin = spec + ".bin";
  if (!std::filesystem::exists(idx) || !std::filesystem::exists(bin))
    throw UsageError("--data " + spec + ": not synthetic or copy, and " +
                     (std::filesystem::exists(idx) ? bin : idx).string() +
                     " does not exist (an indexed dataset is PREFIX.bin + PREFIX.idx)");
  return std::make_unique<IndexedSource>(spec, vocab, seed);
}

void write_indexed_dataset(const std::filesystem::path& prefix, const std::vector<std::vector<int64_t>>& documents,
                           IndexedDtype dtype) {
  const int code = static_cast<int>(dtype);
  const DtypeInfo* dt = dtype_info(code);
  if (!dt || !is_integer(code)) throw UsageError("write_indexed_dataset: integer dtypes only");
  const auto lo = [&]() -> int64_t {
    switch (code) {
      case 2: return INT8_MIN;
      case 3: return INT16_MIN;
      case 4: return INT32_MIN;
      case 5: return INT64_MIN;
      default: return 0;
    }
  }();
  const auto hi = [&]() -> int64_t {
    switch (code) {
      case 1: return UINT8_MAX;
      case 2: return INT8_MAX;
      case 3: return INT16_MAX;
      case 4: return INT32_MAX;
      case 8: return UINT16_MAX;
      default: return INT64_MAX;
    }
  }();
  const std::filesystem::path bin_path = prefix.string() + ".bin", idx_path = prefix.string() + ".idx";
  std::ofstream bin(bin_path, std::ios::binary | std::ios::trunc);
  std::vector<int32_t> lengths;
  std::vector<int64_t> pointers, doc_idx{0};
  int64_t offset = 0;
  for (const auto& doc : documents) {
    if (doc.size() > static_cast<size_t>(INT32_MAX))
      throw UsageError("write_indexed_dataset: a document longer than 2^31 - 1 tokens");
    for (const int64_t t : doc) {
      if (t < lo || t > hi)
        throw UsageError("write_indexed_dataset: token " + std::to_string(t) + " does not fit " + dt->name);
      bin.write(reinterpret_cast<const char*>(&t),
                static_cast<std::streamsize>(dt->bytes));  // little-endian: low bytes
    }
    lengths.push_back(static_cast<int32_t>(doc.size()));
    pointers.push_back(offset);
    offset += static_cast<int64_t>(doc.size() * dt->bytes);
    doc_idx.push_back(static_cast<int64_t>(lengths.size()));
  }
  bin.close();
  if (!bin) throw ExecError(bin_path.string() + ": write failed");
  std::ofstream idx(idx_path, std::ios::binary | std::ios::trunc);
  const uint64_t version = 1, n = lengths.size(), d = doc_idx.size();
  const auto u8 = static_cast<uint8_t>(code);
  idx.write(kMagic, sizeof kMagic);
  idx.write(reinterpret_cast<const char*>(&version), 8);
  idx.write(reinterpret_cast<const char*>(&u8), 1);
  idx.write(reinterpret_cast<const char*>(&n), 8);
  idx.write(reinterpret_cast<const char*>(&d), 8);
  idx.write(reinterpret_cast<const char*>(lengths.data()), static_cast<std::streamsize>(4 * n));
  idx.write(reinterpret_cast<const char*>(pointers.data()), static_cast<std::streamsize>(8 * n));
  idx.write(reinterpret_cast<const char*>(doc_idx.data()), static_cast<std::streamsize>(8 * d));
  idx.close();
  if (!idx) throw ExecError(idx_path.string() + ": write failed");
}

}  // namespace lcm::exec::train
