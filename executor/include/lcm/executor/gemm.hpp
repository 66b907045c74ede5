// GEMM through cuBLASLt and its CPU checker.
//
// Layouts (row-major in the caller's terms, m = tokens):
//   bf16: C[m,n] = A[m,k] B[k,n], exactly what torch.matmul does for contiguous inputs
//         (cuBLASLt column-major NN with m and n swapped), bf16 in/out, fp32 accumulation.
//   fp8:  C[m,n] = sa sb A[m,k] W[n,k]^T, e4m3 in, bf16 out, fp32 accumulation: the TN
//         layout Hopper's fp8 kernels need (torch._scaled_mm's), per-tensor scale pointers.
//   fp8_block: the same layout with a scale per 1x128 block of A's rows and per 128x128
//         block of W (Transformer Engine's Float8BlockScaling GEMMs on Hopper).
// Inputs are pattern::uniform_pm1 rounded to the input type, so the CPU recomputes any
// element from (seed, index); the checker compares a grid of output elements (all of them
// for small problems) with a float64 dot product.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "lcm/executor/compare.hpp"
#include "lcm/executor/options.hpp"

namespace lcm::exec {

struct GemmProblem {
  int64_t m = 0, n = 0, k = 0;
  GemmDType dtype = GemmDType::kBf16;
  double flops() const { return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k); }
  double set_bytes() const;  // one A + B + D set, padding included
  // Leading dimensions (elements) of the row-major buffers: the row length rounded up to 16
  // bytes, the alignment cuBLASLt's tensor-core kernels need of every column it reads (a
  // shape whose N or K is not a multiple of 8 (bf16) or 16 (fp8) still gets them; equal
  // to the row length for every aligned shape, e.g. 3000x5000x7000 bf16, as torch.matmul's
  // contiguous tensors). A is [m, lda]; B bf16 [k, ldb], fp8 W [n, ldb]; D [m, ldd].
  int64_t lda() const;
  int64_t ldb() const;
  int64_t ldd() const;
};

inline constexpr float kFp8ScaleA = 0.5f;   // activation scale
inline constexpr float kFp8ScaleB = 0.25f;  // weight scale

// Input element `index` of an operand, as the device holds it, widened to float.
float gemm_input_value(GemmDType t, uint64_t seed, uint64_t index);

// The output elements a check compares: every row and column for small problems
// (m*n*k <= 2^27), else the first and last row/column and 30 more of each (1024 elements).
struct SampleGrid {
  std::vector<int64_t> rows, cols;
};
SampleGrid sample_grid(const GemmProblem& p, uint64_t seed);

// How the algorithm that ran reduces a split-K GEMM's partial sums (cuBLASLt's
// CUBLASLT_ALGO_CONFIG_SPLITK_NUM and _REDUCTION_SCHEME of the selected algorithm).
struct GemmReduction {
  int splitk = 1;
  // The partial sums (or the running sum) are held in the output type, bf16: cuBLASLt's
  // OUTPUT_TYPE and INPLACE schemes. PyTorch allows them by default
  // (allow_bf16_reduced_precision_reduction) and cuBLASLt's heuristic picks them for skinny
  // shapes (6144x100x4096 on the H100: split-K 5, partials in bf16).
  bool partials_in_output_type = false;
};

// Compares got[r * cols.size() + c] = C[rows[r], cols[c]] with the float64 reference
// (reference/gemm_check.cpp), the worst element reported as its index r * n + c.
// Tolerance per element: |ref| / 128 + sum_k |a_k b_k| x (2^-16 bf16, 2^-13 fp8): bf16 output
// rounding is at most |ref| / 256; the second term covers the accumulation (fp32 for bf16,
// Hopper's reduced-precision fp8 MMA accumulation for fp8). Relative L2 error <= 1e-2.
// A split-K algorithm whose partials are rounded to bf16 adds 2^-8 x sum_s (|P_s| + |R_s|),
// P_s the s-th partial over k split into `splitk` equal contiguous chunks and R_s the running
// sum after it: bf16 rounding moves a value by at most 2^-8 of itself, once per stored
// partial (OUTPUT_TYPE) or running sum (INPLACE).
Comparison check_gemm(const GemmProblem& p, uint64_t seed_a, uint64_t seed_b, const SampleGrid& g,
                      const std::vector<float>& got, const GemmReduction& reduction = {});

class GemmRunner {
 public:
  GemmRunner(cudaStream_t stream, int64_t workspace_bytes);
  ~GemmRunner();
  GemmRunner(const GemmRunner&) = delete;
  GemmRunner& operator=(const GemmRunner&) = delete;

  // Allocates and fills `sets` distinct (A, B, D) sets; asks the heuristic for up to
  // `max_algos` candidates. supported() is false when it offers none.
  void setup(const GemmProblem& p, int sets, uint64_t seed, int max_algos);
  bool supported() const { return !algos_.empty(); }
  const std::string& unsupported_reason() const { return unsupported_reason_; }
  int num_algos() const { return static_cast<int>(algos_.size()); }
  void select_algo(int i) { selected_ = i; }
  int selected_algo() const { return selected_; }
  nlohmann::json algo_json(int i) const;
  GemmReduction reduction(int i) const;  // the split-K reduction of candidate i
  int sets() const { return static_cast<int>(sets_.size()); }
  const GemmProblem& problem() const { return p_; }

  void enqueue(int set);  // one GEMM on the stream
  Comparison verify(int set, uint64_t sample_seed);  // waits for the stream
  void corrupt_output(int set, int64_t row, int64_t col, float value);  // for the checker's test
  uint64_t seed_a(int set) const { return seed_ * 1000003ull + 2ull * static_cast<uint64_t>(set); }
  uint64_t seed_b(int set) const { return seed_a(set) + 1; }

 private:
  void release();
  struct Set {
    void* a = nullptr;  // row-major [m,k]
    void* b = nullptr;  // bf16: row-major [k,n]; fp8: row-major [n,k]
    void* d = nullptr;  // row-major [m,n] bf16
  };
  cudaStream_t stream_;
  cublasLtHandle_t lt_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_;
  GemmProblem p_;
  uint64_t seed_ = 0;
  std::vector<Set> sets_;
  float* scales_ = nullptr;  // fp8: weight scale at [0], activation scale at [64], on the device
  float* block_scales_ = nullptr;  // fp8_block: the weight's block scales, then the activation's
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t la_ = nullptr, lb_ = nullptr, lc_ = nullptr;
  std::vector<cublasLtMatmulHeuristicResult_t> algos_;
  int selected_ = 0;
  bool c_null_ = false;  // pass no C matrix (beta = 0), as torch._scaled_mm does for fp8
  std::string unsupported_reason_;
  cublasStatus_t launch(int set, const cublasLtMatmulHeuristicResult_t& h);
  void validate_algos();
};

// Row-major bf16 GEMMs on the caller's pointers (the MoE layer's router and expert GEMMs):
// C[m,n] = op(A) op(B) + beta C, op(A) = A[m,k] or, transposed, A stored [k,m]; op(B) =
// B[k,n] or B stored [n,k]; fp32 accumulation, C bf16 or fp32. The algorithm is the cuBLASLt
// heuristic's first for the shape with m, n, k rounded up to a bucket (a multiple of 128; a
// power of two below 128), looked up once per bucket, transposes, C type and beta, and checked
// on the exact shape (cublasLtMatmulAlgoCheck; the exact shape's own heuristic when the check
// fails). Dropless MoE routing gives every micro-batch new per-expert row counts: one
// heuristic call per new count stalls the host (measured on the H200, session 5: expert GEMMs
// 2-4x their usual time right after the routing's host synchronisation). The choice is a
// function of the exact shape only (not of the order shapes come in), so runs repeat bit for
// bit. Exact-shape descriptors are cached too, at most kMaxShapes of them. A GEMM whose shape
// does not follow the routing (the router's, the shared experts') passes `exact_algo`: the
// heuristic's first algorithm for its exact shape, as cuBLAS gives a framework. (Session 41: the
// bucket of a 160-expert router is 256 wide, and its algorithm ran the router GEMMs on tiles
// for 256 columns.)
class LtGemm {
 public:
  LtGemm(cudaStream_t stream, int64_t workspace_bytes);
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;
  // m, n or k of 0: nothing is launched (an expert without tokens).
  void run(int64_t m, int64_t n, int64_t k, const void* a, bool trans_a, const void* b, bool trans_b, void* c,
           bool c_fp32, float beta = 0.0f, bool exact_algo = false);
  size_t cached_shapes() const { return cache_.size(); }

 private:
  struct Entry {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t lp = nullptr, lq = nullptr, ld = nullptr;
    cublasLtMatmulHeuristicResult_t algo{};
  };
  using Key = std::tuple<int64_t, int64_t, int64_t, bool, bool, bool, bool, bool>;  // ..., exact_algo
  static constexpr size_t kMaxShapes = 4096;
  const Entry& entry(const Key& k);
  Entry descriptors(const Key& k) const;  // op and layouts of a shape, no algorithm
  static void destroy(Entry& e);
  bool heuristic(Entry& e) const;         // the heuristic's first algorithm into e.algo
  cudaStream_t stream_;
  cublasLtHandle_t lt_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_;
  std::map<Key, Entry> cache_;                                     // exact shapes
  std::map<Key, std::optional<cublasLtMatmulHeuristicResult_t>> bucket_algo_;  // per bucketed shape
};

}  // namespace lcm::exec
