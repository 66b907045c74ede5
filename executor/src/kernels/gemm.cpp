// cuBLASLt GEMM runners (see gemm.hpp; the CPU checker is reference/gemm_check.cpp).
#include "lcm/executor/gemm.hpp"

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <exception>
#include <utility>
#include <vector>

#include "lcm/executor/error.hpp"
#include "lcm/executor/kernels.cuh"

namespace lcm::exec {

namespace {

size_t in_bytes(GemmDType t) { return t == GemmDType::kBf16 ? 2 : 1; }
kernels::ElemType in_type(GemmDType t) {
  return t == GemmDType::kBf16 ? kernels::ElemType::kBf16 : kernels::ElemType::kFp8E4M3;
}

int64_t padded_to_16_bytes(int64_t elems, size_t elem_bytes) {
  const int64_t per = static_cast<int64_t>(16 / elem_bytes);
  return (elems + per - 1) / per * per;
}

}  // namespace

int64_t GemmProblem::lda() const { return padded_to_16_bytes(k, in_bytes(dtype)); }
int64_t GemmProblem::ldb() const { return padded_to_16_bytes(dtype == GemmDType::kBf16 ? n : k, in_bytes(dtype)); }
int64_t GemmProblem::ldd() const { return padded_to_16_bytes(n, 2); }

double GemmProblem::set_bytes() const {
  const double e = static_cast<double>(in_bytes(dtype));
  const int64_t b_rows = dtype == GemmDType::kBf16 ? k : n;
  return e * static_cast<double>(m * lda() + b_rows * ldb()) + 2.0 * static_cast<double>(m * ldd());
}

GemmRunner::GemmRunner(cudaStream_t stream, int64_t workspace_bytes)
    : stream_(stream), workspace_bytes_(static_cast<size_t>(workspace_bytes)) {
  LCM_CUBLAS_CHECK(cublasLtCreate(&lt_));
  if (workspace_bytes_ > 0) LCM_CUDA_CHECK(cudaMalloc(&workspace_, workspace_bytes_));
  // Two scale scalars 256 bytes apart (each as aligned as a fresh allocation).
  LCM_CUDA_CHECK(cudaMalloc(&scales_, 128 * sizeof(float)));
  const float sw = kFp8ScaleB, sx = kFp8ScaleA;  // cuBLASLt's A is the weight, its B the activation
  LCM_CUDA_CHECK(cudaMemcpy(scales_, &sw, sizeof sw, cudaMemcpyHostToDevice));
  LCM_CUDA_CHECK(cudaMemcpy(scales_ + 64, &sx, sizeof sx, cudaMemcpyHostToDevice));
}

GemmRunner::~GemmRunner() {
  if (std::uncaught_exceptions() > 0) return;  // a hung GEMM would block cudaFree; the process is exiting
  release();
  if (scales_) cudaFree(scales_);
  if (workspace_) cudaFree(workspace_);
  if (lt_) cublasLtDestroy(lt_);
}

void GemmRunner::release() {
  for (Set& s : sets_) {
    cudaFree(s.a);
    cudaFree(s.b);
    cudaFree(s.d);
  }
  sets_.clear();
  if (block_scales_) cudaFree(block_scales_);
  block_scales_ = nullptr;
  if (op_) cublasLtMatmulDescDestroy(op_);
  if (la_) cublasLtMatrixLayoutDestroy(la_);
  if (lb_) cublasLtMatrixLayoutDestroy(lb_);
  if (lc_) cublasLtMatrixLayoutDestroy(lc_);
  op_ = nullptr;
  la_ = lb_ = lc_ = nullptr;
  algos_.clear();
  selected_ = 0;
}

void GemmRunner::setup(const GemmProblem& p, int sets, uint64_t seed, int max_algos) {
  release();
  p_ = p;
  seed_ = seed;
  const bool fp8 = p.dtype != GemmDType::kBf16;
  const bool block = p.dtype == GemmDType::kFp8Block;
  if (block && p.k % 128 != 0) {  // a scale block spans 128 elements of k
    unsupported_reason_ = "fp8_block needs K a multiple of 128";
    return;
  }
  const cudaDataType_t ab = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
  const uint64_t m = static_cast<uint64_t>(p.m), n = static_cast<uint64_t>(p.n), k = static_cast<uint64_t>(p.k);
  const uint64_t lda = static_cast<uint64_t>(p.lda()), ldb = static_cast<uint64_t>(p.ldb()),
                 ldd = static_cast<uint64_t>(p.ldd());

  // cuBLASLt is column-major: it computes D^T[n,m] = op(X)[n,k] * Y[k,m] with X the weight
  // operand and Y the activation (row-major [m,k] == column-major [k,m], ld = lda >= k).
  LCM_CUBLAS_CHECK(cublasLtMatmulDescCreate(&op_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = fp8 ? CUBLAS_OP_T : CUBLAS_OP_N, tb = CUBLAS_OP_N;
  LCM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  LCM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  if (block) {
    // One scale per 128x128 block of the weight (cuBLASLt's A) and per 1x128 block of each
    // activation row (its B), every one holding the per-tensor value, so the output (and
    // its check) is the per-tensor run's while the kernel reads and applies real block scales.
    // The activation's scales start at the next multiple of 32 floats (128 bytes) after the weight's.
    const int64_t kb = (p.k + 127) / 128;
    const size_t w_scales = static_cast<size_t>((p.n + 127) / 128 * kb);
    const size_t x_offset = (w_scales + 31) / 32 * 32;
    const size_t x_scales = static_cast<size_t>(((p.m + 3) / 4 * 4) * kb);
    std::vector<float> host(x_offset + x_scales, kFp8ScaleB);
    std::fill(host.begin() + static_cast<std::ptrdiff_t>(x_offset), host.end(), kFp8ScaleA);
    LCM_CUDA_CHECK(cudaMalloc(&block_scales_, host.size() * sizeof(float)));
    LCM_CUDA_CHECK(cudaMemcpy(block_scales_, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
    const float* sa = block_scales_;
    const float* sb = block_scales_ + x_offset;
    const int32_t mode_a = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F, mode_b = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    LCM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode_a, sizeof mode_a));
    LCM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode_b, sizeof mode_b));
    LCM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof sa));
    LCM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof sb));
  } else if (fp8) {
    const float* sa = scales_;
    const float* sb = scales_ + 64;
    LCM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof sa));
    LCM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof sb));
  }
  if (fp8) {
    // weight W row-major [n,k] == column-major [k,n], ld = ldb >= k, transposed by op T.
    LCM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la_, ab, k, n, static_cast<int64_t>(ldb)));
  } else {
    // B row-major [k,n] == column-major [n,k], ld = ldb >= n.
    LCM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la_, ab, n, k, static_cast<int64_t>(ldb)));
  }
  LCM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lb_, ab, k, m, static_cast<int64_t>(lda)));
  LCM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lc_, CUDA_R_16BF, n, m, static_cast<int64_t>(ldd)));

  cublasLtMatmulPreference_t pref = nullptr;
  LCM_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws = workspace_bytes_;
  LCM_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  std::vector<cublasLtMatmulHeuristicResult_t> res(static_cast<size_t>(std::max(1, max_algos)));
  int returned = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(lt_, op_, la_, lb_, lc_, lc_, pref,
                                                           static_cast<int>(res.size()), res.data(), &returned);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st == CUBLAS_STATUS_SUCCESS) {
    for (int i = 0; i < returned; ++i)
      if (res[static_cast<size_t>(i)].state == CUBLAS_STATUS_SUCCESS) algos_.push_back(res[static_cast<size_t>(i)]);
  }
  if (algos_.empty()) {  // a shape cuBLASLt cannot run is a skipped point, not a failed run
    unsupported_reason_ = std::string("cuBLASLt heuristic offers no algorithm (") +
                          (st == CUBLAS_STATUS_SUCCESS ? "none returned" : cublasLtGetStatusName(st)) + ")";
    return;
  }

  // Every element of a buffer, padding included, holds the input pattern of its storage
  // index, so the checker regenerates A[r, c] as element r x lda + c.
  const size_t e = in_bytes(p.dtype);
  const uint64_t a_elems = m * lda, b_elems = (fp8 ? n : k) * ldb, d_elems = m * ldd;
  sets_.resize(static_cast<size_t>(sets));
  for (int s = 0; s < sets; ++s) {
    Set& x = sets_[static_cast<size_t>(s)];
    LCM_CUDA_CHECK(cudaMalloc(&x.a, a_elems * e));
    LCM_CUDA_CHECK(cudaMalloc(&x.b, b_elems * e));
    LCM_CUDA_CHECK(cudaMalloc(&x.d, d_elems * 2));
    kernels::fill_uniform(x.a, in_type(p.dtype), a_elems, seed_a(s), stream_);
    kernels::fill_uniform(x.b, in_type(p.dtype), b_elems, seed_b(s), stream_);
  }
  c_null_ = fp8;
  validate_algos();
  for (Set& x : sets_)  // NaN: an output the timed loop leaves unwritten fails the check
    LCM_CUDA_CHECK(cudaMemsetAsync(x.d, 0xff, d_elems * 2, stream_));
  LCM_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

// Keeps the candidates cublasLtMatmul accepts (a heuristic answer is not a promise: e.g.
// fp8 with C aliasing D is refused at launch); if none, retries with the other C mode.
void GemmRunner::validate_algos() {
  std::vector<cublasLtMatmulHeuristicResult_t> ok;
  cublasStatus_t last = CUBLAS_STATUS_SUCCESS;
  for (int attempt = 0; attempt < 2 && ok.empty(); ++attempt) {
    if (attempt == 1) c_null_ = !c_null_;
    for (const auto& h : algos_) {
      const cublasStatus_t st = launch(0, h);
      if (st == CUBLAS_STATUS_SUCCESS) ok.push_back(h);
      else last = st;
    }
  }
  LCM_CUDA_CHECK(cudaStreamSynchronize(stream_));
  if (ok.empty()) {
    c_null_ = false;
    unsupported_reason_ = std::string("cublasLtMatmul refused every heuristic candidate: ") + cublasLtGetStatusName(last);
  }
  algos_ = std::move(ok);
}

cublasStatus_t GemmRunner::launch(int set, const cublasLtMatmulHeuristicResult_t& h) {
  const Set& x = sets_.at(static_cast<size_t>(set));
  const float alpha = 1.0f, beta = 0.0f;
  return cublasLtMatmul(lt_, op_, &alpha, x.b, la_, x.a, lb_, &beta, c_null_ ? nullptr : x.d, lc_, x.d, lc_, &h.algo,
                        workspace_, workspace_bytes_, stream_);
}

namespace {

// The split-K count and reduction scheme of a cuBLASLt algorithm (algo_json and reduction()).
std::pair<int32_t, uint32_t> split_k_of(const cublasLtMatmulAlgo_t& algo) {
  int32_t splitk = 1;
  uint32_t scheme = CUBLASLT_REDUCTION_SCHEME_NONE;
  size_t w = 0;
  cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof splitk, &w);
  cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme, sizeof scheme, &w);
  return {splitk, scheme};
}

}  // namespace

nlohmann::json GemmRunner::algo_json(int i) const {
  const cublasLtMatmulHeuristicResult_t& h = algos_.at(static_cast<size_t>(i));
  int32_t id = 0;
  uint32_t tile = 0, stages = 0;
  uint16_t cluster = 0;
  size_t w = 0;
  cublasLtMatmulAlgoConfigGetAttribute(&h.algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, &w);
  cublasLtMatmulAlgoConfigGetAttribute(&h.algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &w);
  cublasLtMatmulAlgoConfigGetAttribute(&h.algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof stages, &w);
  cublasLtMatmulAlgoConfigGetAttribute(&h.algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster, sizeof cluster, &w);
  const auto [splitk, scheme] = split_k_of(h.algo);
  const char* scheme_name = scheme == CUBLASLT_REDUCTION_SCHEME_INPLACE         ? "inplace"
                            : scheme == CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE ? "compute_type"
                            : scheme == CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE  ? "output_type"
                                                                               : "none";
  return {{"heuristic_index", i}, {"algo_id", id},   {"tile_id", tile},         {"stages_id", stages},
          {"splitk", splitk},     {"reduction_scheme", scheme_name}, {"cluster_shape_id", cluster},
          {"workspace_bytes", h.workspaceSize}, {"waves", h.wavesCount},
          {"c_matrix", c_null_ ? "none (beta = 0)" : "aliases D"}};
}

GemmReduction GemmRunner::reduction(int i) const {
  const auto [splitk, scheme] = split_k_of(algos_.at(static_cast<size_t>(i)).algo);
  return {.splitk = std::max(splitk, 1),
          .partials_in_output_type = splitk > 1 && (scheme & (CUBLASLT_REDUCTION_SCHEME_INPLACE |
                                                              CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE)) != 0};
}

void GemmRunner::enqueue(int set) { LCM_CUBLAS_CHECK(launch(set, algos_.at(static_cast<size_t>(selected_)))); }

Comparison GemmRunner::verify(int set, uint64_t sample_seed) {
  const Set& x = sets_.at(static_cast<size_t>(set));
  const SampleGrid g = sample_grid(p_, sample_seed);
  std::vector<int64_t> idx;
  idx.reserve(g.rows.size() * g.cols.size());
  for (int64_t r : g.rows)
    for (int64_t c : g.cols) idx.push_back(r * p_.ldd() + c);
  int64_t* d_idx = nullptr;
  float* d_out = nullptr;
  LCM_CUDA_CHECK(cudaMalloc(&d_idx, idx.size() * sizeof(int64_t)));
  LCM_CUDA_CHECK(cudaMalloc(&d_out, idx.size() * sizeof(float)));
  std::vector<float> got(idx.size());
  LCM_CUDA_CHECK(cudaMemcpyAsync(d_idx, idx.data(), idx.size() * sizeof(int64_t), cudaMemcpyHostToDevice, stream_));
  kernels::gather_bf16(x.d, d_idx, idx.size(), d_out, stream_);
  LCM_CUDA_CHECK(cudaMemcpyAsync(got.data(), d_out, got.size() * sizeof(float), cudaMemcpyDeviceToHost, stream_));
  LCM_CUDA_CHECK(cudaStreamSynchronize(stream_));
  cudaFree(d_idx);
  cudaFree(d_out);
  return check_gemm(p_, seed_a(set), seed_b(set), g, got, reduction(selected_));
}

void GemmRunner::corrupt_output(int set, int64_t row, int64_t col, float value) {
  const Set& x = sets_.at(static_cast<size_t>(set));
  const __nv_bfloat16 v = __float2bfloat16_rn(value);
  LCM_CUDA_CHECK(cudaStreamSynchronize(stream_));
  LCM_CUDA_CHECK(cudaMemcpy(static_cast<__nv_bfloat16*>(x.d) + row * p_.ldd() + col, &v, sizeof v, cudaMemcpyHostToDevice));
}

LtGemm::LtGemm(cudaStream_t stream, int64_t workspace_bytes)
    : stream_(stream), workspace_bytes_(static_cast<size_t>(workspace_bytes)) {
  LCM_CUBLAS_CHECK(cublasLtCreate(&lt_));
  if (workspace_bytes_ > 0) LCM_CUDA_CHECK(cudaMalloc(&workspace_, workspace_bytes_));
}

LtGemm::~LtGemm() {
  if (std::uncaught_exceptions() > 0) return;
  for (auto& [k, e] : cache_) destroy(e);
  if (workspace_) cudaFree(workspace_);
  if (lt_) cublasLtDestroy(lt_);
}

void LtGemm::destroy(Entry& e) {
  if (e.op) cublasLtMatmulDescDestroy(e.op);
  if (e.lp) cublasLtMatrixLayoutDestroy(e.lp);
  if (e.lq) cublasLtMatrixLayoutDestroy(e.lq);
  if (e.ld) cublasLtMatrixLayoutDestroy(e.ld);
  e = Entry{};
}

LtGemm::Entry LtGemm::descriptors(const Key& key) const {
  [[maybe_unused]] const auto [m, n, k, ta, tb, c32, accumulate, exact] = key;
  // Row-major X[r, c] is column-major X^T: cuBLASLt computes D^T[n, m] = op(P) op(Q) with P
  // the storage of B and Q the storage of A.
  Entry e;
  LCM_CUBLAS_CHECK(cublasLtMatmulDescCreate(&e.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t opp = tb ? CUBLAS_OP_T : CUBLAS_OP_N, opq = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  LCM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(e.op, CUBLASLT_MATMUL_DESC_TRANSA, &opp, sizeof opp));
  LCM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(e.op, CUBLASLT_MATMUL_DESC_TRANSB, &opq, sizeof opq));
  const uint64_t pr = tb ? k : n, pc = tb ? n : k, qr = ta ? m : k, qc = ta ? k : m;
  LCM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&e.lp, CUDA_R_16BF, pr, pc, static_cast<int64_t>(pr)));
  LCM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&e.lq, CUDA_R_16BF, qr, qc, static_cast<int64_t>(qr)));
  LCM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&e.ld, c32 ? CUDA_R_32F : CUDA_R_16BF, static_cast<uint64_t>(n),
                                              static_cast<uint64_t>(m), n));
  return e;
}

bool LtGemm::heuristic(Entry& e) const {
  cublasLtMatmulPreference_t pref = nullptr;
  LCM_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws = workspace_bytes_;
  LCM_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  int returned = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(lt_, e.op, e.lp, e.lq, e.ld, e.ld, pref, 1, &e.algo, &returned);
  cublasLtMatmulPreferenceDestroy(pref);
  return st == CUBLAS_STATUS_SUCCESS && returned >= 1;
}

namespace {
// A dimension's bucket: the next multiple of 128, or the next power of two below 128.
int64_t bucket(int64_t x) {
  if (x >= 128) return (x + 127) / 128 * 128;
  int64_t b = 1;
  while (b < x) b *= 2;
  return b;
}
}  // namespace

const LtGemm::Entry& LtGemm::entry(const Key& key) {
  const auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  if (cache_.size() >= kMaxShapes) {  // cheap to rebuild: descriptors and a check
    for (auto& [k, e] : cache_) destroy(e);
    cache_.clear();
  }
  const auto [m, n, k, ta, tb, c32, accumulate, exact] = key;
  Entry e = descriptors(key);
  bool ok = false;
  if (!exact) {  // exact_algo: no bucket, the exact shape's own heuristic below
    const Key bkey{bucket(m), bucket(n), bucket(k), ta, tb, c32, accumulate, false};
    auto b = bucket_algo_.find(bkey);
    if (b == bucket_algo_.end()) {
      std::optional<cublasLtMatmulHeuristicResult_t> found;
      if (bkey == key) {
        if (heuristic(e)) found = e.algo;
      } else {
        Entry be = descriptors(bkey);
        if (heuristic(be)) found = be.algo;
        destroy(be);
      }
      b = bucket_algo_.emplace(bkey, found).first;
    }
    if (b->second) {
      cublasLtMatmulHeuristicResult_t check{};
      ok = cublasLtMatmulAlgoCheck(lt_, e.op, e.lp, e.lq, e.ld, e.ld, &b->second->algo, &check) ==
               CUBLAS_STATUS_SUCCESS &&
           check.workspaceSize <= workspace_bytes_;
      if (ok) {
        e.algo = *b->second;
        e.algo.workspaceSize = check.workspaceSize;
      }
    }
  }
  if (!ok && !heuristic(e)) {
    destroy(e);
    throw ExecError("cuBLASLt offers no algorithm for the row-major GEMM m=" + std::to_string(m) + " n=" +
                    std::to_string(n) + " k=" + std::to_string(k) + (ta ? " A^T" : "") + (tb ? " B^T" : "") +
                    (accumulate ? " (beta 1)" : ""));
  }
  return cache_.emplace(key, e).first->second;
}

void LtGemm::run(int64_t m, int64_t n, int64_t k, const void* a, bool trans_a, const void* b, bool trans_b, void* c,
                 bool c_fp32, float beta, bool exact_algo) {
  if (m <= 0 || n <= 0 || k <= 0) return;
  const Entry& e = entry(Key{m, n, k, trans_a, trans_b, c_fp32, beta != 0.0f, exact_algo});
  const float alpha = 1.0f;
  LCM_CUBLAS_CHECK(cublasLtMatmul(lt_, e.op, &alpha, b, e.lp, a, e.lq, &beta, c, e.ld, c, e.ld, &e.algo.algo,
                                  workspace_, workspace_bytes_, stream_));
}

}  // namespace lcm::exec
