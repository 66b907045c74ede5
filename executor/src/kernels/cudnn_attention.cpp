// cuDNN backend-API fused attention (see cudnn_attention.hpp).
#include "lcm/executor/cudnn_attention.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <limits>
#include <sstream>

#include "lcm/executor/error.hpp"

namespace lcm::exec {

size_t cudnn_runtime_version() { return cudnnGetVersion(); }
size_t cudnn_header_version() { return CUDNN_VERSION; }

std::string cudnn_version_string(size_t v) {
  // cuDNN 9: MAJOR * 10000 + MINOR * 100 + PATCH.
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

namespace {

std::string last_error() {
  char buf[2048] = {0};
  cudnnGetLastErrorString(buf, sizeof buf);
  return buf;
}

std::string status_text(cudnnStatus_t st) {
  std::string s = cudnnGetErrorString(st);
  const std::string detail = last_error();
  if (!detail.empty()) s += " (" + detail + ")";
  return s;
}

// A cuDNN call in graph construction that failed; caught where another variant may work.
class CudnnBuildError : public ExecError {
 public:
  using ExecError::ExecError;
};

void set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t n,
         const void* value, const char* what) {
  const cudnnStatus_t st = cudnnBackendSetAttribute(d, name, type, n, value);
  if (st != CUDNN_STATUS_SUCCESS)
    throw CudnnBuildError(std::string("cudnnBackendSetAttribute(") + what + "): " + status_text(st));
}

void finalize(cudnnBackendDescriptor_t d, const char* what) {
  const cudnnStatus_t st = cudnnBackendFinalize(d);
  if (st != CUDNN_STATUS_SUCCESS)
    throw CudnnBuildError(std::string("cudnnBackendFinalize(") + what + "): " + status_text(st));
}

using Dims = std::array<int64_t, 4>;

struct Tensor {
  cudnnBackendDescriptor_t d = nullptr;
  int64_t uid = 0;
};

// Graph construction: every descriptor lives in `keep` until the graph is destroyed.
class Builder {
 public:
  explicit Builder(std::vector<CudnnDesc>& keep) : keep_(keep) {}

  Tensor tensor(int64_t uid, cudnnDataType_t type, const Dims& dims, const Dims& strides, bool is_virtual,
                bool by_value = false) {
    CudnnDesc t(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    const int64_t align = 16;
    set(t.get(), CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type, "TENSOR_DATA_TYPE");
    set(t.get(), CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data(), "TENSOR_DIMENSIONS");
    set(t.get(), CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data(), "TENSOR_STRIDES");
    set(t.get(), CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, "TENSOR_UNIQUE_ID");
    set(t.get(), CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align, "TENSOR_BYTE_ALIGNMENT");
    if (is_virtual) {
      const bool yes = true;
      set(t.get(), CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &yes, "TENSOR_IS_VIRTUAL");
    }
    if (by_value) {
      const bool yes = true;
      set(t.get(), CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &yes, "TENSOR_IS_BY_VALUE");
    }
    finalize(t.get(), "tensor");
    const Tensor out{t.get(), uid};
    keep_.push_back(std::move(t));
    return out;
  }
  Tensor virt(cudnnDataType_t type, const Dims& dims, const Dims& strides) {
    return tensor(next_virtual_++, type, dims, strides, true);
  }
  Tensor scalar(int64_t uid) { return tensor(uid, CUDNN_DATA_FLOAT, {1, 1, 1, 1}, {1, 1, 1, 1}, false, true); }

  void pointwise(cudnnPointwiseMode_t mode, cudnnDataType_t prec, const Tensor& x, const Tensor* b, const Tensor* t,
                 const Tensor& y, int64_t axis = -1) {
    CudnnDesc pw(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    set(pw.get(), CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, "POINTWISE_MODE");
    set(pw.get(), CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec, "POINTWISE_MATH_PREC");
    if (mode == CUDNN_POINTWISE_GEN_INDEX)
      set(pw.get(), CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis, "POINTWISE_AXIS");
    finalize(pw.get(), "pointwise descriptor");
    CudnnDesc op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    const cudnnBackendDescriptor_t pwd = pw.get();
    set(op.get(), CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pwd, "PW_DESCRIPTOR");
    set(op.get(), CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x.d, "POINTWISE_XDESC");
    if (b) set(op.get(), CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b->d, "POINTWISE_BDESC");
    if (t) set(op.get(), CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t->d, "POINTWISE_TDESC");
    set(op.get(), CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y.d, "POINTWISE_YDESC");
    const float one = 1.0f;
    set(op.get(), CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, 1, &one, "POINTWISE_ALPHA1");
    set(op.get(), CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, 1, &one, "POINTWISE_ALPHA2");
    finalize(op.get(), "pointwise operation");
    add_op(std::move(pw), std::move(op));
  }
  void pw(cudnnPointwiseMode_t mode, const Tensor& x, const Tensor& y) {
    pointwise(mode, CUDNN_DATA_FLOAT, x, nullptr, nullptr, y);
  }
  void pw(cudnnPointwiseMode_t mode, const Tensor& x, const Tensor& b, const Tensor& y) {
    pointwise(mode, CUDNN_DATA_FLOAT, x, &b, nullptr, y);
  }

  void matmul(const Tensor& a, const Tensor& b, const Tensor& c) {
    CudnnDesc mm(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    set(mm.get(), CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp, "MATMUL_COMP_TYPE");
    finalize(mm.get(), "matmul descriptor");
    CudnnDesc op(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    const cudnnBackendDescriptor_t mmd = mm.get();
    set(op.get(), CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a.d, "MATMUL_ADESC");
    set(op.get(), CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b.d, "MATMUL_BDESC");
    set(op.get(), CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c.d, "MATMUL_CDESC");
    set(op.get(), CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &mmd, "MATMUL_DESC");
    finalize(op.get(), "matmul operation");
    add_op(std::move(mm), std::move(op));
  }

  void reduction(cudnnReduceTensorOp_t mode, const Tensor& x, const Tensor& y) {
    CudnnDesc rd(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    set(rd.get(), CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp, "REDUCTION_COMP_TYPE");
    set(rd.get(), CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode, "REDUCTION_OPERATOR");
#if CUDNN_VERSION >= 91100
    if (cudnnGetVersion() >= 91100) {  // the frontend sets it (false) from 9.11 on
      const bool deterministic = false;
      set(rd.get(), CUDNN_ATTR_REDUCTION_IS_DETERMINISTIC, CUDNN_TYPE_BOOLEAN, 1, &deterministic,
          "REDUCTION_IS_DETERMINISTIC");
    }
#endif
    finalize(rd.get(), "reduction descriptor");
    CudnnDesc op(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    const cudnnBackendDescriptor_t rdd = rd.get();
    set(op.get(), CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &rdd, "REDUCTION_DESC");
    set(op.get(), CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x.d, "REDUCTION_XDESC");
    set(op.get(), CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y.d, "REDUCTION_YDESC");
    finalize(op.get(), "reduction operation");
    add_op(std::move(rd), std::move(op));
  }

  // A view of x with other dims/strides (the frontend's transposes of P, dS and K).
  void reshape(const Tensor& x, const Tensor& y) {
    CudnnDesc op(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
    set(op.get(), CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x.d, "RESHAPE_XDESC");
    set(op.get(), CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y.d, "RESHAPE_YDESC");
    finalize(op.get(), "reshape operation");
    ops_.push_back(op.get());
    keep_.push_back(std::move(op));
  }

  const std::vector<cudnnBackendDescriptor_t>& ops() const { return ops_; }

 private:
  void add_op(CudnnDesc desc, CudnnDesc op) {
    ops_.push_back(op.get());
    keep_.push_back(std::move(desc));
    keep_.push_back(std::move(op));
  }
  std::vector<CudnnDesc>& keep_;
  std::vector<cudnnBackendDescriptor_t> ops_;
  int64_t next_virtual_ = 1000;
};

// Tensor UIDs of the variant packs.
enum Uid : int64_t {
  kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV, kScale, kNegInf, kOne, kSoftmaxSum, kDQAccum, kNegInfWindow,
  kLeftBound,
};

int64_t align256(int64_t x) { return (x + 255) / 256 * 256; }

}  // namespace

[[noreturn]] void throw_cudnn_error(int status, const char* expr, const char* file, int line) {
  std::ostringstream o;
  o << "cuDNN error " << status_text(static_cast<cudnnStatus_t>(status)) << " at " << file << ":" << line << ": "
    << expr;
  throw ExecError(o.str());
}

CudnnDesc::CudnnDesc(cudnnBackendDescriptorType_t type) {
  const cudnnStatus_t st = cudnnBackendCreateDescriptor(type, &d_);
  if (st != CUDNN_STATUS_SUCCESS) {
    d_ = nullptr;
    throw CudnnBuildError("cudnnBackendCreateDescriptor(" + std::to_string(static_cast<int>(type)) + "): " +
                          status_text(st));
  }
}

CudnnDesc::~CudnnDesc() {
  if (d_) cudnnBackendDestroyDescriptor(d_);
}

CudnnDesc& CudnnDesc::operator=(CudnnDesc&& o) noexcept {
  if (this != &o) {
    if (d_) cudnnBackendDestroyDescriptor(d_);
    d_ = o.d_;
    o.d_ = nullptr;
  }
  return *this;
}

CudnnAttention::CudnnAttention(cudnnHandle_t handle, cudaStream_t stream, const AttentionProblem& p, int max_plans,
                               bool deterministic)
    : handle_(handle), stream_(stream), p_(p), deterministic_(deterministic) {
  p_.validate();
  LCM_CUDNN_CHECK(cudnnSetStream(handle_, stream_));
  if (deterministic_) {
    int dev = 0, major = 0;
    LCM_CUDA_CHECK(cudaGetDevice(&dev));
    LCM_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    if (major >= 10) {
      reason_ = "deterministic backward: only the Hopper (sm 9.x) graph is implemented (Blackwell needs cudnn-frontend's "
                "engine knob overrides)";
      return;
    }
  }
  scale_ = p_.softmax_scale();
  left_bound_ = static_cast<float>(p_.window + 1);
  // The frontend masks with the lowest float before cuDNN 9.10 and with -inf from then on.
  neg_inf_ = cudnnGetVersion() < 91000 ? std::numeric_limits<float>::lowest() : -std::numeric_limits<float>::infinity();
  const auto t0 = std::chrono::steady_clock::now();
  build(false, max_plans);
  if (!fwd_.plans.empty()) build(true, max_plans);
  build_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

CudnnAttention::~CudnnAttention() {
  clear(bwd_);
  clear(fwd_);
}

void CudnnAttention::build(bool backward, int max_plans) {
  Direction& dir = backward ? bwd_ : fwd_;
  const char* name = backward ? "backward" : "forward";
  // The frontend's graph first; GEN_INDEX in INT32 as a fallback.
  static constexpr Variant kVariants[] = {{"frontend (GEN_INDEX in FLOAT)", false}, {"GEN_INDEX in INT32", true}};
  std::string why;
  for (const Variant& v : kVariants) {
    clear(dir);
    try {
      build_graph(dir, backward, v);
    } catch (const CudnnBuildError& e) {
      why += std::string(why.empty() ? "" : "; ") + name + " graph [" + v.name + "]: " + e.what();
      continue;
    }
    std::string plan_why;
    make_plans(dir, max_plans, plan_why);
    if (!dir.plans.empty()) {
      dir.variant = v.name;
      return;
    }
    why += std::string(why.empty() ? "" : "; ") + name + " plans [" + v.name + "]: " + plan_why;
    if (!p_.causal) break;  // the variants differ only in the mask
  }
  clear(dir);
  reason_ += (reason_.empty() ? "" : "; ") + why;
}

void CudnnAttention::clear(Direction& d) {
  d.packs.clear();
  d.plans.clear();
  d.graph = CudnnDesc();
  d.keep.clear();
  d.by_value_uids.clear();
  d.selected = 0;
  d.variant.clear();
}

void CudnnAttention::build_graph(Direction& dir, bool backward, const Variant& v) {
  Builder g(dir.keep);
  const int64_t b = p_.b, s = p_.s, hq = p_.hq, hk = p_.hkv, d = p_.d, sk = p_.skv(), ss = p_.sstride();
  const auto qs = p_.q_strides();
  const auto ks = p_.kv_strides();
  const int64_t dv = p_.vdim();  // V, O, dO, dV (MLA: differs from d)
  const auto vs = p_.v_strides();
  const auto os = p_.o_strides();
  const Dims qdims{b, hq, s, d}, kvdims{b, hk, sk, d}, vdims{b, hk, sk, dv}, odims{b, hq, s, dv};
  const Dims qstr{qs[0], qs[1], qs[2], qs[3]}, kvstr{ks[0], ks[1], ks[2], ks[3]};
  const Dims vstr{vs[0], vs[1], vs[2], vs[3]}, ostr{os[0], os[1], os[2], os[3]};
  const Dims vtdims{b, hk, dv, sk}, vtstr{vs[0], vs[1], vs[3], vs[2]};  // V^T for dP = dO V^T
  // K^T (and V^T): [b, h_kv, d, s_kv], the same memory with the last two strides swapped.
  const Dims ktdims{b, hk, d, sk}, ktstr{ks[0], ks[1], ks[3], ks[2]};
  const Dims sdims{b, hq, s, sk}, sstr{hq * s * sk, s * sk, sk, 1};
  const Dims stdims{b, hq, sk, s}, ststr{hq * s * sk, s * sk, 1, sk};  // transposed view of an [s, s_kv] score tile
  const Dims rdims{b, hq, s, 1}, rstr{hq * s, s, 1, 1};
  const Dims statstr{hq * ss, ss, 1, 1};  // the Stats tensor (a row range of a longer array in ring attention)
  const cudnnDataType_t bf16 = CUDNN_DATA_BFLOAT16, f32 = CUDNN_DATA_FLOAT;

  const Tensor Q = g.tensor(kQ, bf16, qdims, qstr, false);
  const Tensor KT = g.tensor(kK, bf16, ktdims, ktstr, false);
  const Tensor scale = g.scalar(kScale);
  dir.by_value_uids = {kScale};

  // S = scale Q K^T, then the causal mask (the frontend's diagonal-band mask: right bound 0,
  // top-left diagonal): keep S where row >= col, else -inf.
  const auto scores = [&](const Tensor& S) {
    const Tensor S1 = g.virt(f32, sdims, sstr);
    g.pw(CUDNN_POINTWISE_MUL, S, scale, S1);
    return S1;
  };
  // One diagonal band of the frontend's composite mask: fresh row and column indices of S
  // (GEN_INDEX on axes 2 and 3), a comparison, and S where it holds, else -inf.
  const cudnnDataType_t gi_prec = v.gen_index_int32 ? CUDNN_DATA_INT32 : f32;
  const auto band = [&](const Tensor& S, int64_t inf_uid, const auto& compare) {
    const Tensor neg_inf = g.scalar(inf_uid);
    dir.by_value_uids.push_back(inf_uid);
    const Tensor row = g.virt(CUDNN_DATA_INT32, sdims, sstr);
    g.pointwise(CUDNN_POINTWISE_GEN_INDEX, gi_prec, S, nullptr, nullptr, row, 2);
    const Tensor col = g.virt(CUDNN_DATA_INT32, sdims, sstr);
    g.pointwise(CUDNN_POINTWISE_GEN_INDEX, gi_prec, S, nullptr, nullptr, col, 3);
    const Tensor keep = compare(row, col);
    const Tensor out = g.virt(f32, sdims, sstr);
    g.pointwise(CUDNN_POINTWISE_BINARY_SELECT, f32, S, &neg_inf, &keep, out);
    return out;
  };
  const auto causal_mask = [&](const Tensor& S) {
    if (!p_.causal) return S;
    const Tensor causal = band(S, kNegInf, [&](const Tensor& row, const Tensor& col) {
      const Tensor keep = g.virt(CUDNN_DATA_BOOLEAN, sdims, sstr);
      g.pointwise(CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, row, &col, nullptr, keep);
      return keep;
    });
    if (p_.window <= 0) return causal;
    // Sliding window: the frontend's left-bound band after the right bound (attn_score_modifiers.h
    // sliding_window_mask, CompositeDiagonalBandMaskNode before cuDNN 9.21): col + left_bound (a
    // float scalar, window + 1) > row keeps the window.
    const Tensor bound = g.scalar(kLeftBound);
    dir.by_value_uids.push_back(kLeftBound);
    return band(causal, kNegInfWindow, [&](const Tensor& row, const Tensor& col) {
      const Tensor col_bound = g.virt(f32, sdims, sstr);
      g.pointwise(CUDNN_POINTWISE_ADD, f32, col, &bound, nullptr, col_bound);
      const Tensor keep = g.virt(CUDNN_DATA_BOOLEAN, sdims, sstr);
      g.pointwise(CUDNN_POINTWISE_CMP_GT, CUDNN_DATA_BOOLEAN, col_bound, &row, nullptr, keep);
      return keep;
    });
  };

  if (!backward) {
    const Tensor V = g.tensor(kV, bf16, vdims, vstr, false);
    const Tensor O = g.tensor(kO, bf16, odims, ostr, false);
    const Tensor stats = g.tensor(kStats, f32, rdims, statstr, false);
    const Tensor S = g.virt(f32, sdims, sstr);
    g.matmul(Q, KT, S);
    const Tensor S2 = causal_mask(scores(S));
    // Softmax with statistics: max, exp(S - max), sum, Stats = max + log(sum), P = exp / sum.
    const Tensor mx = g.virt(f32, rdims, rstr);
    g.reduction(CUDNN_REDUCE_TENSOR_MAX, S2, mx);
    const Tensor sub = g.virt(f32, sdims, sstr);
    g.pw(CUDNN_POINTWISE_SUB, S2, mx, sub);
    const Tensor e = g.virt(f32, sdims, sstr);
    g.pw(CUDNN_POINTWISE_EXP, sub, e);
    const Tensor sum = g.virt(f32, rdims, rstr);
    g.reduction(CUDNN_REDUCE_TENSOR_ADD, e, sum);
    const Tensor lg = g.virt(f32, rdims, rstr);
    g.pw(CUDNN_POINTWISE_LOG, sum, lg);
    g.pw(CUDNN_POINTWISE_ADD, mx, lg, stats);
    const Tensor P = g.virt(bf16, sdims, sstr);  // the second matmul's A operand in the I/O type
    g.pw(CUDNN_POINTWISE_DIV, e, sum, P);
    g.matmul(P, V, O);
  } else {
    const Tensor VT = g.tensor(kV, bf16, vtdims, vtstr, false);
    const Tensor O = g.tensor(kO, bf16, odims, ostr, false);
    const Tensor dO = g.tensor(kDO, bf16, odims, ostr, false);
    const Tensor stats = g.tensor(kStats, f32, rdims, statstr, false);
    const Tensor dQ = g.tensor(kDQ, bf16, qdims, qstr, false);
    const Tensor dK = g.tensor(kDK, bf16, kvdims, kvstr, false);
    const Tensor dV = g.tensor(kDV, bf16, vdims, vstr, false);
    const Tensor one = g.scalar(kOne);
    dir.by_value_uids.push_back(kOne);
    const Tensor softmax_sum = g.tensor(kSoftmaxSum, f32, rdims, rstr, false);

    // softmax_sum = rowsum(dO * O) * 1 (the frontend's dropout-scale multiply, 1 without dropout)
    const Tensor dOO = g.virt(f32, odims, {hq * s * dv, s * dv, hq * dv, 1});
    g.pw(CUDNN_POINTWISE_MUL, dO, O, dOO);
    const Tensor dOO_sum = g.virt(f32, rdims, rstr);
    g.reduction(CUDNN_REDUCE_TENSOR_ADD, dOO, dOO_sum);
    g.pw(CUDNN_POINTWISE_MUL, dOO_sum, one, softmax_sum);

    // P = exp(scale Q K^T - Stats), masked
    const Tensor S = g.virt(f32, sdims, sstr);
    g.matmul(Q, KT, S);
    const Tensor S1 = scores(S);
    const Tensor S2 = g.virt(f32, sdims, sstr);
    g.pw(CUDNN_POINTWISE_SUB, S1, stats, S2);
    const Tensor S3 = causal_mask(S2);
    const Tensor P = g.virt(f32, sdims, sstr);
    g.pw(CUDNN_POINTWISE_EXP, S3, P);

    // dV = P^T dO (summed over the group's query heads under GQA)
    const Tensor PT = g.virt(bf16, stdims, ststr);
    g.reshape(P, PT);
    const Dims fulldims{b, hq, sk, d}, fullstr{hq * sk * d, sk * d, d, 1};  // per-query-head dK, dV (GQA)
    const Dims vfulldims{b, hq, sk, dv}, vfullstr{hq * sk * dv, sk * dv, dv, 1};
    if (hq == hk) {
      g.matmul(PT, dO, dV);
    } else {
      const Tensor dV_full = g.virt(bf16, vfulldims, vfullstr);
      g.matmul(PT, dO, dV_full);
      g.reduction(CUDNN_REDUCE_TENSOR_ADD, dV_full, dV);
    }

    // dS = P (dO V^T - softmax_sum) scale
    const Tensor dP = g.virt(f32, sdims, sstr);
    g.matmul(dO, VT, dP);
    const Tensor dP1 = g.virt(f32, sdims, sstr);
    g.pw(CUDNN_POINTWISE_SUB, dP, softmax_sum, dP1);
    const Tensor dP2 = g.virt(f32, sdims, sstr);
    g.pw(CUDNN_POINTWISE_MUL, dP1, P, dP2);
    const Tensor dS = g.virt(f32, sdims, sstr);
    g.pw(CUDNN_POINTWISE_MUL, dP2, scale, dS);

    // dK = dS^T Q
    const Tensor dST = g.virt(bf16, stdims, ststr);
    g.reshape(dS, dST);
    if (hq == hk) {
      g.matmul(dST, Q, dK);
    } else {
      const Tensor dK_full = g.virt(bf16, fulldims, fullstr);
      g.matmul(dST, Q, dK_full);
      g.reduction(CUDNN_REDUCE_TENSOR_ADD, dK_full, dK);
    }

    // dQ = dS K: accumulated in fp32 then converted (default), or written by the matmul
    // (deterministic; the frontend's dP-workspace variant)
    const Tensor K = g.virt(bf16, kvdims, kvstr);
    g.reshape(KT, K);
    if (deterministic_) {
      g.matmul(dS, K, dQ);
    } else {
      const Tensor dq_accum = g.tensor(kDQAccum, f32, qdims, {hq * s * d, s * d, d, 1}, false);
      g.matmul(dS, K, dq_accum);
      g.pw(CUDNN_POINTWISE_IDENTITY, dq_accum, dQ);
    }
  }

  dir.graph = CudnnDesc(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  const std::vector<cudnnBackendDescriptor_t>& ops = g.ops();
  set(dir.graph.get(), CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<int64_t>(ops.size()),
      ops.data(), "OPERATIONGRAPH_OPS");
  set(dir.graph.get(), CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle_, "OPERATIONGRAPH_HANDLE");
  finalize(dir.graph.get(), "operation graph");
}

void CudnnAttention::make_plans(Direction& dir, int max_plans, std::string& why) {
  for (const cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    const char* mode_name = mode == CUDNN_HEUR_MODE_A ? "HEUR_MODE_A" : "HEUR_MODE_FALLBACK";
    std::vector<CudnnDesc> configs;
    try {
      CudnnDesc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
      const cudnnBackendDescriptor_t graph = dir.graph.get();
      set(heur.get(), CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph,
          "ENGINEHEUR_OPERATION_GRAPH");
      set(heur.get(), CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode, "ENGINEHEUR_MODE");
      finalize(heur.get(), mode_name);
      int64_t count = 0;
      cudnnStatus_t st = cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                  CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr);
      if (st != CUDNN_STATUS_SUCCESS) throw CudnnBuildError(std::string("ENGINEHEUR_RESULTS count: ") + status_text(st));
      if (count <= 0) {
        why += std::string(why.empty() ? "" : "; ") + mode_name + ": no engine config";
        continue;
      }
      std::vector<cudnnBackendDescriptor_t> raw;
      for (int64_t i = 0; i < count; ++i) {
        configs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
        raw.push_back(configs.back().get());
      }
      int64_t got = 0;
      st = cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count,
                                    &got, raw.data());
      if (st != CUDNN_STATUS_SUCCESS) throw CudnnBuildError(std::string("ENGINEHEUR_RESULTS: ") + status_text(st));
      configs.resize(static_cast<size_t>(std::min(got, count)));
    } catch (const CudnnBuildError& e) {
      why += std::string(why.empty() ? "" : "; ") + mode_name + ": " + e.what();
      continue;
    }
    for (size_t i = 0; i < configs.size() && static_cast<int>(dir.plans.size()) < max_plans; ++i) {
      Plan pl;
      pl.plan = CudnnDesc(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      const cudnnBackendDescriptor_t cfg = configs[i].get();
      cudnnStatus_t st = cudnnBackendSetAttribute(pl.plan.get(), CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1,
                                                  &handle_);
      if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnBackendSetAttribute(pl.plan.get(), CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg);
      if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendFinalize(pl.plan.get());
      if (st != CUDNN_STATUS_SUCCESS) {
        if (why.size() < 4000)
          why += std::string(why.empty() ? "" : "; ") + mode_name + " config " + std::to_string(i) + ": " +
                 status_text(st);
        continue;
      }
      int64_t n = 0;
      cudnnBackendGetAttribute(pl.plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n,
                               &pl.workspace);
      try {
        CudnnDesc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
        cudnnBackendDescriptor_t ed = engine.get();
        if (cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &ed) ==
            CUDNN_STATUS_SUCCESS)
          cudnnBackendGetAttribute(ed, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &pl.engine);
      } catch (const CudnnBuildError&) {
      }
      pl.heuristic_index = static_cast<int>(i);
      pl.config = std::move(configs[i]);
      dir.plans.push_back(std::move(pl));
    }
    if (!dir.plans.empty()) return;
  }
}

int64_t CudnnAttention::fe_workspace_bytes() const {
  return (deterministic_ ? 0 : align256(p_.q_elems() * 4)) + align256(p_.stat_elems() * 4);
}

size_t CudnnAttention::workspace_bytes() const {
  if (!supported()) return 0;
  const int64_t f = fwd_.plans[static_cast<size_t>(fwd_.selected)].workspace;
  const int64_t b = fe_workspace_bytes() + bwd_.plans[static_cast<size_t>(bwd_.selected)].workspace;
  return static_cast<size_t>(std::max<int64_t>({f, b, 256}));
}

size_t CudnnAttention::forward_workspace_bytes() const {
  if (!supported()) return 0;
  return static_cast<size_t>(std::max<int64_t>(fwd_.plans[static_cast<size_t>(fwd_.selected)].workspace, 256));
}

void CudnnAttention::select_fwd(int i) {
  fwd_.selected = std::clamp(i, 0, num_fwd_plans() - 1);
  fwd_.packs.clear();
  bwd_.packs.clear();
}

void CudnnAttention::select_bwd(int i) {
  bwd_.selected = std::clamp(i, 0, num_bwd_plans() - 1);
  fwd_.packs.clear();
  bwd_.packs.clear();
}

CudnnDesc CudnnAttention::make_pack(const Direction& dir, const std::vector<std::pair<int64_t, const void*>>& ptrs,
                                    void* workspace) const {
  std::vector<int64_t> uids;
  std::vector<void*> data;
  for (const auto& [uid, ptr] : ptrs) {
    uids.push_back(uid);
    data.push_back(const_cast<void*>(ptr));
  }
  for (int64_t uid : dir.by_value_uids) {
    uids.push_back(uid);
    const float* v = uid == kScale ? &scale_ : uid == kOne ? &one_ : uid == kLeftBound ? &left_bound_ : &neg_inf_;
    data.push_back(const_cast<float*>(v));
  }
  CudnnDesc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  try {
    set(pack.get(), CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, static_cast<int64_t>(uids.size()),
        uids.data(), "VARIANT_PACK_UNIQUE_IDS");
    set(pack.get(), CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, static_cast<int64_t>(data.size()),
        data.data(), "VARIANT_PACK_DATA_POINTERS");
    set(pack.get(), CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace, "VARIANT_PACK_WORKSPACE");
    finalize(pack.get(), "variant pack");
  } catch (const CudnnBuildError& e) {
    throw ExecError(e.what());
  }
  return pack;
}

void CudnnAttention::bind(int set, const AttentionTensors& t, void* workspace) {
  if (!supported()) throw ExecError("cuDNN attention: not supported: " + reason_);
  const size_t i = static_cast<size_t>(set);
  if (fwd_.packs.size() <= i) fwd_.packs.resize(i + 1);
  if (bwd_.packs.size() <= i) bwd_.packs.resize(i + 1);
  if (set_workspace_.size() <= i) set_workspace_.resize(i + 1);
  set_workspace_[i] = workspace;
  fwd_.packs[i] = make_pack(fwd_, {{kQ, t.q}, {kK, t.k}, {kV, t.v}, {kO, t.o}, {kStats, t.stats}}, workspace);
  char* ws = static_cast<char*>(workspace);
  std::vector<std::pair<int64_t, const void*>> ptrs = {
      {kQ, t.q}, {kK, t.k}, {kV, t.v}, {kO, t.o}, {kDO, t.dout}, {kStats, t.stats}, {kDQ, t.dq}, {kDK, t.dk}, {kDV, t.dv}};
  if (deterministic_) {
    ptrs.emplace_back(kSoftmaxSum, ws);
  } else {
    ptrs.emplace_back(kDQAccum, ws);
    ptrs.emplace_back(kSoftmaxSum, ws + align256(p_.q_elems() * 4));
  }
  bwd_.packs[i] = make_pack(bwd_, ptrs, ws + fe_workspace_bytes());
}

void CudnnAttention::forward(int set) {
  const CudnnDesc& pack = fwd_.packs.at(static_cast<size_t>(set));
  LCM_CUDNN_CHECK(cudnnBackendExecute(handle_, fwd_.plans[static_cast<size_t>(fwd_.selected)].plan.get(), pack.get()));
}

void CudnnAttention::backward(int set) {
  const CudnnDesc& pack = bwd_.packs.at(static_cast<size_t>(set));
  // Before cuDNN 9.6 the frontend zeroes the dQ accumulator itself; later engines do it.
  if (!deterministic_ && cudnnGetVersion() < 90600)
    LCM_CUDA_CHECK(cudaMemsetAsync(set_workspace_.at(static_cast<size_t>(set)),
                                   0, static_cast<size_t>(p_.q_elems() * 4), stream_));
  LCM_CUDNN_CHECK(cudnnBackendExecute(handle_, bwd_.plans[static_cast<size_t>(bwd_.selected)].plan.get(), pack.get()));
}

nlohmann::json CudnnAttention::describe() const {
  const auto plan_json = [](const Direction& d) {
    nlohmann::json j = {{"graph_variant", d.variant}, {"plans_found", d.plans.size()}};
    if (!d.plans.empty()) {
      const Plan& pl = d.plans[static_cast<size_t>(d.selected)];
      j["engine_global_index"] = pl.engine;
      j["heuristic_index"] = pl.heuristic_index;
      j["workspace_bytes"] = pl.workspace;
    }
    return j;
  };
  nlohmann::json j = {{"forward", plan_json(fwd_)},
                      {"backward", plan_json(bwd_)},
          {"frontend_workspace_bytes", fe_workspace_bytes()},
          {"build_seconds", build_s_},
          {"cudnn_runtime", cudnn_version_string(cudnn_runtime_version())},
          {"cudnn_headers", cudnn_version_string(cudnn_header_version())},
          {"softmax_scale", scale_},
                      {"mask_value", std::isinf(neg_inf_) ? std::string("-inf") : std::to_string(neg_inf_)}};
  if (deterministic_) j["deterministic_backward"] = true;
  return j;
}

}  // namespace lcm::exec
