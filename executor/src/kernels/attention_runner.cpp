// Attention buffers, execution and verification (see attention_runner.hpp).
#include "lcm/executor/attention_runner.hpp"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <exception>

#include "lcm/executor/attention_ref.cuh"
#include "lcm/executor/error.hpp"
#include "lcm/executor/kernels.cuh"

namespace lcm::exec {

namespace {

// A device allocation freed at scope exit (verification scratch).
template <typename T>
struct DeviceArray {
  T* p = nullptr;
  explicit DeviceArray(size_t n) {
    if (n) LCM_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p), n * sizeof(T)));
  }
  ~DeviceArray() {
    if (p) cudaFree(p);
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
};

template <typename T>
T* upload(DeviceArray<T>& dst, const std::vector<T>& src, cudaStream_t s) {
  if (!src.empty())
    LCM_CUDA_CHECK(cudaMemcpyAsync(dst.p, src.data(), src.size() * sizeof(T), cudaMemcpyHostToDevice, s));
  return dst.p;
}

template <typename T>
std::vector<T> download(const T* src, size_t n, cudaStream_t s) {
  std::vector<T> out(n);
  if (n) LCM_CUDA_CHECK(cudaMemcpyAsync(out.data(), src, n * sizeof(T), cudaMemcpyDeviceToHost, s));
  return out;
}

std::vector<int32_t> flatten(const std::vector<AttnRow>& rows) {
  std::vector<int32_t> out;
  out.reserve(rows.size() * 3);
  for (const AttnRow& r : rows) {
    out.push_back(r.b);
    out.push_back(r.h);
    out.push_back(r.i);
  }
  return out;
}

kernels::AttnRefDesc ref_desc(const AttentionProblem& p) {
  kernels::AttnRefDesc d;
  d.b = static_cast<int32_t>(p.b);
  d.s = static_cast<int32_t>(p.s);
  d.hq = static_cast<int32_t>(p.hq);
  d.hkv = static_cast<int32_t>(p.hkv);
  d.d = static_cast<int32_t>(p.d);
  d.scale = p.softmax_scale();
  d.causal = p.causal ? 1 : 0;
  d.window = static_cast<int32_t>(p.causal ? p.window : 0);
  return d;
}

int64_t nonfinite(const void* p, size_t n, bool bf16, cudaStream_t s) {
  DeviceArray<unsigned long long> count(1);
  LCM_CUDA_CHECK(cudaMemsetAsync(count.p, 0, sizeof(unsigned long long), s));
  if (bf16) kernels::count_nonfinite_bf16(p, n, count.p, s);
  else kernels::count_nonfinite_f32(static_cast<const float*>(p), n, count.p, s);
  unsigned long long c = 0;
  LCM_CUDA_CHECK(cudaMemcpyAsync(&c, count.p, sizeof c, cudaMemcpyDeviceToHost, s));
  LCM_CUDA_CHECK(cudaStreamSynchronize(s));
  return static_cast<int64_t>(c);
}

}  // namespace

nlohmann::json to_json(const AttnCheckSet& c) {
  nlohmann::json j = nlohmann::json::object();
  for (int i = 0; i < kAttnOuts; ++i) j[to_string(static_cast<AttnOut>(i))] = to_json(c.out[static_cast<size_t>(i)]);
  return j;
}

AttentionRunner::AttentionRunner(cudaStream_t stream) : stream_(stream) {
  LCM_CUDNN_CHECK(cudnnCreate(&handle_));
}

AttentionRunner::~AttentionRunner() {
  if (std::uncaught_exceptions() > 0) return;  // a hung kernel would block cudaFree; the process is exiting
  release();
  if (handle_) cudnnDestroy(handle_);
}

void AttentionRunner::release() {
  attn_.reset();
  for (Set& s : sets_)
    for (void* p : {s.q, s.k, s.v, s.dout, s.o, static_cast<void*>(s.stats), s.dq, s.dk, s.dv})
      if (p) cudaFree(p);
  sets_.clear();
  if (workspace_) cudaFree(workspace_);
  workspace_ = nullptr;
  workspace_bytes_ = 0;
}

std::string AttentionRunner::unsupported_reason() const {
  if (!attn_) return "not set up";
  return attn_->unsupported_reason();
}

double AttentionRunner::device_bytes() const {
  return static_cast<double>(sets_.size()) * p_.set_bytes() + static_cast<double>(workspace_bytes_);
}

void AttentionRunner::setup(const AttentionProblem& p, int sets, uint64_t seed, int max_plans) {
  release();
  p_ = p;
  seed_ = seed;
  attn_ = std::make_unique<CudnnAttention>(handle_, stream_, p_, max_plans);
  if (!attn_->supported()) return;
  workspace_bytes_ = attn_->workspace_bytes();
  LCM_CUDA_CHECK(cudaMalloc(&workspace_, workspace_bytes_));
  const size_t qb = static_cast<size_t>(p_.q_elems()) * 2, kvb = static_cast<size_t>(p_.kv_elems()) * 2;
  const size_t sb = static_cast<size_t>(p_.stat_elems()) * 4;
  sets_.resize(static_cast<size_t>(sets));
  for (int i = 0; i < sets; ++i) {
    Set& x = sets_[static_cast<size_t>(i)];
    LCM_CUDA_CHECK(cudaMalloc(&x.q, qb));
    LCM_CUDA_CHECK(cudaMalloc(&x.k, kvb));
    LCM_CUDA_CHECK(cudaMalloc(&x.v, kvb));
    LCM_CUDA_CHECK(cudaMalloc(&x.dout, qb));
    LCM_CUDA_CHECK(cudaMalloc(&x.o, qb));
    LCM_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&x.stats), sb));
    LCM_CUDA_CHECK(cudaMalloc(&x.dq, qb));
    LCM_CUDA_CHECK(cudaMalloc(&x.dk, kvb));
    LCM_CUDA_CHECK(cudaMalloc(&x.dv, kvb));
    kernels::fill_uniform(x.q, kernels::ElemType::kBf16, static_cast<size_t>(p_.q_elems()), input_seed(i, 0), stream_);
    kernels::fill_uniform(x.k, kernels::ElemType::kBf16, static_cast<size_t>(p_.kv_elems()), input_seed(i, 1), stream_);
    kernels::fill_uniform(x.v, kernels::ElemType::kBf16, static_cast<size_t>(p_.kv_elems()), input_seed(i, 2), stream_);
    kernels::fill_uniform(x.dout, kernels::ElemType::kBf16, static_cast<size_t>(p_.q_elems()), input_seed(i, 3),
                          stream_);
  }
  poison_outputs();
  rebind();
  LCM_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void AttentionRunner::rebind() {
  for (int i = 0; i < sets(); ++i) {
    const Set& x = sets_[static_cast<size_t>(i)];
    attn_->bind(i, {x.q, x.k, x.v, x.o, x.stats, x.dout, x.dq, x.dk, x.dv}, workspace_);
  }
}

void AttentionRunner::poison_outputs() {
  const size_t qb = static_cast<size_t>(p_.q_elems()) * 2, kvb = static_cast<size_t>(p_.kv_elems()) * 2;
  const size_t sb = static_cast<size_t>(p_.stat_elems()) * 4;
  for (Set& x : sets_) {  // 0xff bytes: NaN in bf16 and in fp32
    LCM_CUDA_CHECK(cudaMemsetAsync(x.o, 0xff, qb, stream_));
    LCM_CUDA_CHECK(cudaMemsetAsync(x.stats, 0xff, sb, stream_));
    LCM_CUDA_CHECK(cudaMemsetAsync(x.dq, 0xff, qb, stream_));
    LCM_CUDA_CHECK(cudaMemsetAsync(x.dk, 0xff, kvb, stream_));
    LCM_CUDA_CHECK(cudaMemsetAsync(x.dv, 0xff, kvb, stream_));
  }
}

void AttentionRunner::corrupt(int set, AttnOut which, int64_t b, int64_t h, int64_t i, int64_t t, float value) {
  const Set& x = sets_.at(static_cast<size_t>(set));
  LCM_CUDA_CHECK(cudaStreamSynchronize(stream_));
  if (which == AttnOut::kLse) {
    LCM_CUDA_CHECK(cudaMemcpy(x.stats + p_.stat_offset(b, h, i), &value, sizeof value, cudaMemcpyHostToDevice));
    return;
  }
  const __nv_bfloat16 v = __float2bfloat16_rn(value);
  void* base = which == AttnOut::kO ? x.o : which == AttnOut::kDq ? x.dq : which == AttnOut::kDk ? x.dk : x.dv;
  const int64_t off = (which == AttnOut::kO || which == AttnOut::kDq) ? p_.q_offset(b, h, i, t) : p_.kv_offset(b, h, i, t);
  LCM_CUDA_CHECK(cudaMemcpy(static_cast<__nv_bfloat16*>(base) + off, &v, sizeof v, cudaMemcpyHostToDevice));
}

AttnCheckSet AttentionRunner::verify(int set, bool full, uint64_t sample_seed) {
  const Set& x = sets_.at(static_cast<size_t>(set));
  cudaStream_t s = stream_;
  LCM_CUDA_CHECK(cudaStreamSynchronize(s));
  const AttnSample smp = attention_sample(p_, full, sample_seed);
  const kernels::AttnRefDesc rd = ref_desc(p_);
  const size_t d = static_cast<size_t>(p_.d);
  const size_t nq = smp.q_rows.size(), nk = smp.kv_rows.size();

  // Query rows: forward (O, LSE, and the row terms of the backward), then dQ.
  const std::vector<int32_t> qrows_h = flatten(smp.q_rows);
  DeviceArray<int32_t> qrows(qrows_h.size());
  upload(qrows, qrows_h, s);
  DeviceArray<float> o_ref(nq * d), o_mag(nq * d), lse_ref(nq), dsum(nq), dabs(nq), dq_ref(nq * d), dq_mag(nq * d);
  kernels::attention_ref_fwd(rd, x.q, x.k, x.v, x.dout, qrows.p, static_cast<int>(nq), o_ref.p, o_mag.p, lse_ref.p,
                             dsum.p, dabs.p, s);
  kernels::attention_ref_dq(rd, x.q, x.k, x.v, x.dout, qrows.p, static_cast<int>(nq), lse_ref.p, dsum.p, dabs.p,
                            dq_ref.p, dq_mag.p, s);

  // Key rows: dK, dV need LSE and D of every query row they attend from, as [b][h_q][s].
  const size_t nstat = static_cast<size_t>(p_.stat_elems());
  DeviceArray<float> lse_all(nstat), dsum_all(nstat), dabs_all(nstat);
  LCM_CUDA_CHECK(cudaMemsetAsync(lse_all.p, 0xff, nstat * 4, s));  // NaN where nothing was computed
  const auto scatter_rows = [&](const std::vector<AttnRow>& rows, const float* lse, const float* ds, const float* da) {
    std::vector<int64_t> idx;
    idx.reserve(rows.size());
    for (const AttnRow& r : rows) idx.push_back(p_.stat_offset(r.b, r.h, r.i));
    DeviceArray<int64_t> didx(idx.size());
    upload(didx, idx, s);
    kernels::scatter_f32(lse, didx.p, idx.size(), lse_all.p, s);
    kernels::scatter_f32(ds, didx.p, idx.size(), dsum_all.p, s);
    kernels::scatter_f32(da, didx.p, idx.size(), dabs_all.p, s);
    LCM_CUDA_CHECK(cudaStreamSynchronize(s));
  };
  if (full) {
    scatter_rows(smp.q_rows, lse_ref.p, dsum.p, dabs.p);
  } else {
    std::vector<AttnRow> tail;
    for (int64_t bi = 0; bi < p_.b; ++bi)
      for (int64_t h = 0; h < p_.hq; ++h)
        for (int64_t i = smp.kv_first_query; i < p_.s; ++i)
          tail.push_back({static_cast<int32_t>(bi), static_cast<int32_t>(h), static_cast<int32_t>(i)});
    const std::vector<int32_t> trows_h = flatten(tail);
    DeviceArray<int32_t> trows(trows_h.size());
    upload(trows, trows_h, s);
    const size_t nt = tail.size();
    DeviceArray<float> t_o(nt * d), t_mag(nt * d), t_lse(nt), t_ds(nt), t_da(nt);
    kernels::attention_ref_fwd(rd, x.q, x.k, x.v, x.dout, trows.p, static_cast<int>(nt), t_o.p, t_mag.p, t_lse.p,
                               t_ds.p, t_da.p, s);
    scatter_rows(tail, t_lse.p, t_ds.p, t_da.p);
  }
  const std::vector<int32_t> krows_h = flatten(smp.kv_rows);
  DeviceArray<int32_t> krows(krows_h.size());
  upload(krows, krows_h, s);
  DeviceArray<float> dk_ref(nk * d), dk_mag(nk * d), dv_ref(nk * d), dv_mag(nk * d);
  kernels::attention_ref_dkv(rd, x.q, x.k, x.v, x.dout, krows.p, static_cast<int>(nk), lse_all.p, dsum_all.p,
                             dabs_all.p, dk_ref.p, dk_mag.p, dv_ref.p, dv_mag.p, s);

  // What cuDNN wrote at the same places.
  std::vector<int64_t> qidx, kidx, sidx;
  qidx.reserve(nq * d);
  for (const AttnRow& r : smp.q_rows) {
    sidx.push_back(p_.stat_offset(r.b, r.h, r.i));
    for (size_t t = 0; t < d; ++t) qidx.push_back(p_.q_offset(r.b, r.h, r.i, static_cast<int64_t>(t)));
  }
  kidx.reserve(nk * d);
  for (const AttnRow& r : smp.kv_rows)
    for (size_t t = 0; t < d; ++t) kidx.push_back(p_.kv_offset(r.b, r.h, r.i, static_cast<int64_t>(t)));
  DeviceArray<int64_t> dqidx(qidx.size()), dkidx(kidx.size()), dsidx(sidx.size());
  upload(dqidx, qidx, s);
  upload(dkidx, kidx, s);
  upload(dsidx, sidx, s);
  DeviceArray<float> got_o(nq * d), got_lse(nq), got_dq(nq * d), got_dk(nk * d), got_dv(nk * d);
  kernels::gather_bf16(x.o, dqidx.p, qidx.size(), got_o.p, s);
  kernels::gather_f32(x.stats, dsidx.p, sidx.size(), got_lse.p, s);
  kernels::gather_bf16(x.dq, dqidx.p, qidx.size(), got_dq.p, s);
  kernels::gather_bf16(x.dk, dkidx.p, kidx.size(), got_dk.p, s);
  kernels::gather_bf16(x.dv, dkidx.p, kidx.size(), got_dv.p, s);

  const auto h_o = download(got_o.p, nq * d, s), h_oref = download(o_ref.p, nq * d, s), h_omag = download(o_mag.p, nq * d, s);
  const auto h_lse = download(got_lse.p, nq, s), h_lseref = download(lse_ref.p, nq, s);
  const auto h_dq = download(got_dq.p, nq * d, s), h_dqref = download(dq_ref.p, nq * d, s),
             h_dqmag = download(dq_mag.p, nq * d, s);
  const auto h_dk = download(got_dk.p, nk * d, s), h_dkref = download(dk_ref.p, nk * d, s),
             h_dkmag = download(dk_mag.p, nk * d, s);
  const auto h_dv = download(got_dv.p, nk * d, s), h_dvref = download(dv_ref.p, nk * d, s),
             h_dvmag = download(dv_mag.p, nk * d, s);
  LCM_CUDA_CHECK(cudaStreamSynchronize(s));

  AttnCheckSet c;
  c[AttnOut::kO] = check_attention_values(h_o, h_oref, h_omag, 1e-2);
  c[AttnOut::kLse] = check_attention_lse(h_lse, h_lseref);
  c[AttnOut::kDq] = check_attention_values(h_dq, h_dqref, h_dqmag, 2e-2);
  c[AttnOut::kDk] = check_attention_values(h_dk, h_dkref, h_dkmag, 2e-2);
  c[AttnOut::kDv] = check_attention_values(h_dv, h_dvref, h_dvmag, 2e-2);
  // Every element of every output: an unwritten (still NaN-poisoned) region fails.
  const size_t qn = static_cast<size_t>(p_.q_elems()), kn = static_cast<size_t>(p_.kv_elems());
  c[AttnOut::kO].nonfinite = nonfinite(x.o, qn, true, s);
  c[AttnOut::kLse].nonfinite = nonfinite(x.stats, nstat, false, s);
  c[AttnOut::kDq].nonfinite = nonfinite(x.dq, qn, true, s);
  c[AttnOut::kDk].nonfinite = nonfinite(x.dk, kn, true, s);
  c[AttnOut::kDv].nonfinite = nonfinite(x.dv, kn, true, s);
  return c;
}

}  // namespace lcm::exec
