// GPU tests of the training kernels (kernels.hpp) against their CPU references
// (reference.hpp), on random sizes including ragged ones (rows of 1, widths that are not a
// multiple of 8, vocabularies that are not a multiple of the block, unaligned pointers), and
// of the MoE block (moe_block.hpp) against its CPU reference. Every comparison is also run
// once with a planted error and must then fail. The reductions that feed the loss repeat
// bit for bit (embedding backward, sum of squares, the MoE router's statistics). Skips without
// a GPU.
//
// Tolerances: a bf16 output is the fp32 result rounded to nearest, at most 2^-9 of its value
// away; fp32 results of the GPU and the double references differ by accumulation order and
// expf/sincosf ulps (~1e-6 relative); so bf16 outputs are checked at 2^-8 relative plus an
// absolute floor for cancellation (a small fraction of the output's scale), fp32 outputs at
// ~1e-5 relative.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "lcm/executor/train/kernels.hpp"
#include "lcm/executor/train/reference.hpp"
#include "train/moe_block_kernels.cuh"
#include "train_check.hpp"
#include "require_gpu.hpp"

namespace lcm::exec::train {
namespace {

using testing::Check;
using testing::compare;
using testing::describe;

template <class T>
struct Dev {
  T* p = nullptr;
  size_t n = 0;
  explicit Dev(size_t count) : n(count) { EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&p), (n + 8) * sizeof(T)), cudaSuccess); }
  ~Dev() { cudaFree(p); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
};

uint16_t bits_of(float v) {
  const float r = ref::bf16_round(v);
  uint32_t u;
  std::memcpy(&u, &r, 4);
  return static_cast<uint16_t>(u >> 16);
}
float from_bits(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

void put_bf16(bf16* dst, const std::vector<float>& v) {
  std::vector<uint16_t> b(v.size());
  for (size_t i = 0; i < v.size(); ++i) b[i] = bits_of(v[i]);
  ASSERT_EQ(cudaMemcpy(dst, b.data(), b.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
}
std::vector<float> get_bf16(const bf16* src, size_t n) {
  std::vector<uint16_t> b(n);
  EXPECT_EQ(cudaMemcpy(b.data(), src, n * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = from_bits(b[i]);
  return v;
}
template <class T>
void put(T* dst, const std::vector<T>& v) {
  ASSERT_EQ(cudaMemcpy(dst, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
}
template <class T>
std::vector<T> get(const T* src, size_t n) {
  std::vector<T> v(n);
  EXPECT_EQ(cudaMemcpy(v.data(), src, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return v;
}

// Random values already rounded to bf16 (what a bf16 tensor holds).
std::vector<float> rand_bf16(size_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 g(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = ref::bf16_round(d(g));
  return v;
}

float max_abs(const std::vector<float>& v) {
  float m = 0;
  for (float x : v) m = std::max(m, std::fabs(x));
  return m;
}

// got must match ref; and the same check with one element moved well past its tolerance
// must fail (the comparison bites).
void expect_match(const std::vector<float>& got, const std::vector<float>& ref, double rel, double abs,
                  const std::string& what) {
  const Check c = compare(got, ref, rel, abs, what);
  EXPECT_TRUE(c.ok()) << describe(c, got, ref);
  if (got.empty()) return;
  std::vector<float> bad = got;
  const size_t i = bad.size() / 2;
  bad[i] = static_cast<float>(ref[i] + 4 * (rel * std::fabs(ref[i]) + abs) + 1e-3 * (1 + std::fabs(ref[i])));
  EXPECT_FALSE(compare(bad, ref, rel, abs, what).ok()) << what << ": a planted error went unnoticed";
}

constexpr double kBf16Rel = 1.0 / 256;  // twice the bf16 rounding bound

class TrainKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = ::lcm::test::no_gpu_reason();
    if (!why.empty()) GTEST_SKIP() << "no GPU: " << why;
    ASSERT_EQ(cudaStreamCreate(&s_), cudaSuccess);
  }
  void TearDown() override {
    if (s_) cudaStreamDestroy(s_);
  }
  void sync() { ASSERT_EQ(cudaStreamSynchronize(s_), cudaSuccess); }
  cudaStream_t s_ = nullptr;
};

TEST_F(TrainKernels, InitIsBitIdenticalToHost) {
  for (int64_t n : {int64_t{1}, int64_t{10007}, int64_t{1} << 20}) {
    Dev<float> d(static_cast<size_t>(n));
    init_params(d.p, n, 0.02f, 0.0f, 0xabcdefull + static_cast<uint64_t>(n), s_);
    sync();
    const std::vector<float> got = get(d.p, static_cast<size_t>(n));
    int64_t differ = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float want = init_value(0xabcdefull + static_cast<uint64_t>(n), i, 0.02f, 0.0f);
      differ += std::memcmp(&want, &got[static_cast<size_t>(i)], 4) != 0 ? 1 : 0;
    }
    EXPECT_EQ(differ, 0) << "n = " << n;
  }
  Dev<float> c(100);
  init_params(c.p, 100, 0.0f, 1.0f, 1, s_);
  sync();
  EXPECT_EQ(get(c.p, 100), std::vector<float>(100, 1.0f));
}

TEST_F(TrainKernels, CastsAndAdd) {
  for (int64_t n : {int64_t{1}, int64_t{13}, int64_t{4099}, int64_t{1} << 18}) {
    for (int off : {0, 1}) {  // off 1: unaligned pointers, the scalar path
      std::mt19937_64 g(static_cast<uint64_t>(n + off));
      std::uniform_real_distribution<float> u(-100.0f, 100.0f);
      std::vector<float> x(static_cast<size_t>(n));
      for (float& v : x) v = u(g);
      Dev<float> df(static_cast<size_t>(n) + 1);
      Dev<bf16> db(static_cast<size_t>(n) + 1), db2(static_cast<size_t>(n) + 1), dsum(static_cast<size_t>(n) + 1);
      put(df.p + off, x);
      cast_to_bf16(df.p + off, db.p + off, n, s_);
      sync();
      std::vector<float> want(x.size());
      ref::cast_to_bf16(x.data(), want.data(), n);
      const std::vector<float> got = get_bf16(db.p + off, x.size());
      expect_match(got, want, 0, 0, "cast_to_bf16 (bit exact)");
      cast_to_f32(db.p + off, df.p + off, n, s_);
      sync();
      expect_match(get(df.p + off, x.size()), want, 0, 0, "cast_to_f32 (exact)");
      const std::vector<float> y = rand_bf16(x.size(), 77);
      put_bf16(db2.p + off, y);
      add(db.p + off, db2.p + off, dsum.p + off, n, s_);
      add_inplace(db.p + off, db2.p + off, n, s_);
      sync();
      std::vector<float> sum(x.size());
      ref::add(want.data(), y.data(), sum.data(), n);
      expect_match(get_bf16(dsum.p + off, x.size()), sum, kBf16Rel, 0, "add");
      expect_match(get_bf16(db.p + off, x.size()), sum, kBf16Rel, 0, "add_inplace");
    }
  }
}

TEST_F(TrainKernels, Embedding) {
  for (auto [rows, h, vocab] : {std::tuple<int64_t, int64_t, int64_t>{1, 8, 3}, {37, 13, 11}, {256, 1024, 100}}) {
    const std::vector<float> table = rand_bf16(static_cast<size_t>(vocab * h), 1);
    std::vector<int32_t> tok(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) tok[static_cast<size_t>(r)] = static_cast<int32_t>((r * 7 + 3) % vocab);
    Dev<int32_t> dt(tok.size());
    Dev<bf16> dtab(table.size()), dout(static_cast<size_t>(rows * h)), dgrad(static_cast<size_t>(rows * h));
    Dev<float> dtable_grad(table.size());
    put(dt.p, tok);
    put_bf16(dtab.p, table);
    embedding_fwd(dt.p, dtab.p, dout.p, rows, h, s_);
    const std::vector<float> g = rand_bf16(static_cast<size_t>(rows * h), 2);
    put_bf16(dgrad.p, g);
    std::vector<float> acc0(table.size(), 0.5f);
    put(dtable_grad.p, acc0);
    embedding_bwd(dt.p, dgrad.p, dtable_grad.p, rows, h, s_);
    sync();
    std::vector<float> want(static_cast<size_t>(rows * h));
    ref::embedding_fwd(tok.data(), table.data(), want.data(), rows, h);
    expect_match(get_bf16(dout.p, want.size()), want, 0, 0, "embedding_fwd");
    ref::embedding_bwd(tok.data(), g.data(), acc0.data(), rows, h);
    expect_match(get(dtable_grad.p, acc0.size()), acc0, 1e-6, 1e-6, "embedding_bwd");
  }
}

TEST_F(TrainKernels, RmsNormForwardBackward) {
  for (auto [rows, h] : {std::pair<int64_t, int64_t>{1, 8}, {7, 100}, {5, 13}, {33, 4096}, {300, 1000}, {64, 7168}}) {
    const std::vector<float> x = rand_bf16(static_cast<size_t>(rows * h), 3, 2.0f), w = rand_bf16(static_cast<size_t>(h), 4);
    const std::vector<float> dy = rand_bf16(x.size(), 5);
    Dev<bf16> dx(x.size()), dw(w.size()), dyv(x.size()), dgy(x.size()), ddx(x.size());
    Dev<float> drstd(static_cast<size_t>(rows)), ddw(w.size());
    put_bf16(dx.p, x);
    put_bf16(dw.p, w);
    put_bf16(dgy.p, dy);
    std::vector<float> dw_acc(w.size(), 0.25f);
    put(ddw.p, dw_acc);
    rmsnorm_fwd(dx.p, dw.p, dyv.p, drstd.p, rows, h, 1e-5f, s_);
    rmsnorm_bwd(dx.p, dw.p, drstd.p, dgy.p, ddx.p, ddw.p, rows, h, s_);
    sync();
    std::vector<float> y(x.size()), rstd(static_cast<size_t>(rows)), gx(x.size());
    ref::rmsnorm_fwd(x.data(), w.data(), y.data(), rstd.data(), rows, h, 1e-5f);
    const std::string sz = " rows " + std::to_string(rows) + " h " + std::to_string(h);
    expect_match(get_bf16(dyv.p, y.size()), y, kBf16Rel, 1e-6, "rmsnorm y" + sz);
    expect_match(get(drstd.p, rstd.size()), rstd, 1e-5, 0, "rmsnorm rstd" + sz);
    // The backward from the GPU's rstd (identical to the reference's within 1e-5).
    ref::rmsnorm_bwd(x.data(), w.data(), rstd.data(), dy.data(), gx.data(), dw_acc.data(), rows, h);
    expect_match(get_bf16(ddx.p, gx.size()), gx, kBf16Rel, 1e-4 * max_abs(gx), "rmsnorm dx" + sz);
    // dw: an fp32 sum over rows of terms of size |dy x rstd| ~ 1: error ~ rows 2^-24 |terms|.
    expect_match(get(ddw.p, dw_acc.size()), dw_acc, 1e-5, 1e-6 * static_cast<double>(rows) + 1e-5, "rmsnorm dw" + sz);
  }
}

TEST_F(TrainKernels, RopeTableForwardBackward) {
  struct Case {
    int64_t rows, seq, heads, head_dim, rot;
    int type;
  };
  for (const Case c : {Case{7, 3, 3, 10, 6, 0}, Case{50, 25, 4, 128, 64, 3}, Case{1, 1, 1, 4, 4, 2}, Case{64, 64, 8, 128, 128, 2}}) {
    RopeParams p;
    p.type = c.type;
    p.factor = c.type == 3 ? 40 : 8;
    p.base = c.type == 2 ? 500000 : 10000;
    p.original_max_position = c.type == 3 ? 4096 : 8192;
    float ms = 1;
    const std::vector<float> inv = rope_inv_freq(p, c.rot, &ms);
    const int64_t half = c.rot / 2;
    Dev<float> dinv(inv.size()), dcos(static_cast<size_t>(c.seq * half)), dsin(static_cast<size_t>(c.seq * half));
    put(dinv.p, inv);
    rope_table(dinv.p, dcos.p, dsin.p, c.seq, half, ms, s_);
    const std::vector<float> x = rand_bf16(static_cast<size_t>(c.rows * c.heads * c.head_dim), 6);
    Dev<bf16> dx(x.size()), dg(x.size());
    put_bf16(dx.p, x);
    put_bf16(dg.p, x);
    rope_fwd(dx.p, dcos.p, dsin.p, c.rows, c.seq, c.heads, c.head_dim, c.rot, s_);
    rope_bwd(dg.p, dcos.p, dsin.p, c.rows, c.seq, c.heads, c.head_dim, c.rot, s_);
    sync();
    std::vector<float> cs(static_cast<size_t>(c.seq * half)), sn(cs.size());
    ref::rope_table(inv.data(), cs.data(), sn.data(), c.seq, half, ms);
    expect_match(get(dcos.p, cs.size()), cs, 2e-6, 2e-6, "rope cos table");
    expect_match(get(dsin.p, sn.size()), sn, 2e-6, 2e-6, "rope sin table");
    std::vector<float> y = x, g = x;
    ref::rope_fwd(y.data(), cs.data(), sn.data(), c.rows, c.seq, c.heads, c.head_dim, c.rot);
    ref::rope_bwd(g.data(), cs.data(), sn.data(), c.rows, c.seq, c.heads, c.head_dim, c.rot);
    const double floor = 1.0 / 512 * max_abs(x) * ms;  // a c - b s: rounding relative to the inputs
    expect_match(get_bf16(dx.p, y.size()), y, kBf16Rel, floor, "rope_fwd");
    expect_match(get_bf16(dg.p, g.size()), g, kBf16Rel, floor, "rope_bwd");
  }
}

TEST_F(TrainKernels, SwigluForwardBackward) {
  for (auto [rows, f] : {std::pair<int64_t, int64_t>{1, 8}, {9, 24}, {5, 13}, {64, 1408}, {3, 1}}) {
    const std::vector<float> h = rand_bf16(static_cast<size_t>(rows * 2 * f), 7, 2.0f), da = rand_bf16(static_cast<size_t>(rows * f), 8);
    Dev<bf16> dh(h.size()), dda(da.size()), da_out(da.size()), ddh(h.size());
    put_bf16(dh.p, h);
    put_bf16(dda.p, da);
    swiglu_fwd(dh.p, da_out.p, rows, f, s_);
    swiglu_bwd(dh.p, dda.p, ddh.p, rows, f, s_);
    sync();
    std::vector<float> a(da.size()), g(h.size());
    ref::swiglu_fwd(h.data(), a.data(), rows, f);
    ref::swiglu_bwd(h.data(), da.data(), g.data(), rows, f);
    expect_match(get_bf16(da_out.p, a.size()), a, kBf16Rel, 1e-6, "swiglu_fwd");
    expect_match(get_bf16(ddh.p, g.size()), g, kBf16Rel, 1e-6, "swiglu_bwd");
  }
}

// The fused QKV split + RoPE against copying then rotating (the CPU reference), forward and
// backward, vectorised (head 128) and scalar (head 24) paths, with and without rotation.
TEST_F(TrainKernels, QkvSplitRopeAndJoin) {
  struct Case {
    int64_t rows, seq, hq, hkv, d;
  };
  for (const Case c : {Case{40, 20, 4, 2, 128}, Case{9, 3, 3, 1, 24}, Case{16, 16, 8, 8, 64}})
    for (const bool rotate : {true, false}) {
      RopeParams p;
      float ms = 1;
      const std::vector<float> inv = rope_inv_freq(p, c.d, &ms);
      const int64_t half = c.d / 2;
      std::vector<float> cs(static_cast<size_t>(c.seq * half)), sn(cs.size());
      ref::rope_table(inv.data(), cs.data(), sn.data(), c.seq, half, ms);
      Dev<float> dcos(cs.size()), dsin(sn.size());
      put(dcos.p, cs);
      put(dsin.p, sn);
      const int64_t nq = c.rows * c.hq * c.d, nk = c.rows * c.hkv * c.d, nrow = nq + 2 * nk;
      const std::vector<float> qkv = rand_bf16(static_cast<size_t>(nrow), 31), gq = rand_bf16(static_cast<size_t>(nq), 32),
                               gk = rand_bf16(static_cast<size_t>(nk), 33), gv = rand_bf16(static_cast<size_t>(nk), 34);
      Dev<bf16> d_qkv(qkv.size()), d_q(gq.size()), d_k(gk.size()), d_v(gv.size());
      Dev<bf16> d_gq(gq.size()), d_gk(gk.size()), d_gv(gv.size()), d_gqkv(qkv.size());
      put_bf16(d_qkv.p, qkv);
      put_bf16(d_gq.p, gq);
      put_bf16(d_gk.p, gk);
      put_bf16(d_gv.p, gv);
      qkv_split_rope(d_qkv.p, d_q.p, d_k.p, d_v.p, dcos.p, dsin.p, c.rows, c.seq, c.hq, c.hkv, c.d, rotate, s_);
      qkv_join_rope(d_gq.p, d_gk.p, d_gv.p, d_gqkv.p, dcos.p, dsin.p, c.rows, c.seq, c.hq, c.hkv, c.d, rotate, s_);
      sync();
      std::vector<float> q(gq.size()), k(gk.size()), v(gv.size()), g(qkv.size());
      ref::qkv_split_rope(qkv.data(), q.data(), k.data(), v.data(), cs.data(), sn.data(), c.rows, c.seq, c.hq, c.hkv,
                          c.d, rotate);
      ref::qkv_join_rope(gq.data(), gk.data(), gv.data(), g.data(), cs.data(), sn.data(), c.rows, c.seq, c.hq, c.hkv,
                         c.d, rotate);
      const double rel = rotate ? kBf16Rel : 0, floor = rotate ? 1.0 / 512 * max_abs(qkv) : 0;
      expect_match(get_bf16(d_q.p, q.size()), q, rel, floor, "split q");
      expect_match(get_bf16(d_k.p, k.size()), k, rel, floor, "split k");
      expect_match(get_bf16(d_v.p, v.size()), v, 0, 0, "split v (a copy)");
      expect_match(get_bf16(d_gqkv.p, g.size()), g, rel, rotate ? 1.0 / 512 * max_abs(gq) : 0, "join");
    }
}

// MLA's K/V assembly is a copy (bit exact); the k_pe gradient sums the heads in fp32 and
// rounds once (bf16 of the exact sum of bf16 inputs, up to the sum's own rounding).
TEST_F(TrainKernels, MlaKvAssemblyAndGradient) {
  struct Case {
    int64_t rows, heads, dn, dr, dv;
  };
  for (const Case c : {Case{3, 2, 8, 4, 8}, Case{17, 16, 128, 64, 128}, Case{5, 3, 32, 16, 24}}) {
    const int64_t dq = c.dn + c.dr, du = c.dn + c.dv;
    const std::vector<float> kvu = rand_bf16(static_cast<size_t>(c.rows * c.heads * du), 21);
    const std::vector<float> kpe = rand_bf16(static_cast<size_t>(c.rows * c.dr), 22);
    const std::vector<float> dk = rand_bf16(static_cast<size_t>(c.rows * c.heads * dq), 23);
    const std::vector<float> dv = rand_bf16(static_cast<size_t>(c.rows * c.heads * c.dv), 24);
    Dev<bf16> d_kvu(kvu.size()), d_kpe(kpe.size()), d_k(dk.size()), d_v(dv.size());
    Dev<bf16> d_dk(dk.size()), d_dv(dv.size()), d_dkvu(kvu.size()), d_dkpe(kpe.size());
    put_bf16(d_kvu.p, kvu);
    put_bf16(d_kpe.p, kpe);
    put_bf16(d_dk.p, dk);
    put_bf16(d_dv.p, dv);
    mla_assemble_kv(d_kvu.p, d_kpe.p, d_k.p, d_v.p, c.rows, c.heads, c.dn, c.dr, c.dv, s_);
    mla_split_kv_grad(d_dk.p, d_dv.p, d_dkvu.p, d_dkpe.p, c.rows, c.heads, c.dn, c.dr, c.dv, s_);
    sync();
    std::vector<float> k(dk.size()), v(dv.size()), dkvu(kvu.size()), dkpe(kpe.size());
    ref::mla_assemble_kv(kvu.data(), kpe.data(), k.data(), v.data(), c.rows, c.heads, c.dn, c.dr, c.dv);
    ref::mla_split_kv_grad(dk.data(), dv.data(), dkvu.data(), dkpe.data(), c.rows, c.heads, c.dn, c.dr, c.dv);
    expect_match(get_bf16(d_k.p, k.size()), k, 0, 0, "mla K (bit exact)");
    expect_match(get_bf16(d_v.p, v.size()), v, 0, 0, "mla V (bit exact)");
    expect_match(get_bf16(d_dkvu.p, dkvu.size()), dkvu, 0, 0, "mla dkvu (bit exact)");
    expect_match(get_bf16(d_dkpe.p, dkpe.size()), dkpe, kBf16Rel, 1e-6 * static_cast<double>(c.heads), "mla dk_pe");
  }
}

TEST_F(TrainKernels, CrossEntropy) {
  struct Case {
    int64_t rows, vocab, ld;
  };
  for (const Case c : {Case{1, 1000, 1000}, Case{5, 50257, 50304}, Case{3, 128, 136}, Case{4, 131, 131}, Case{2, 7, 8}}) {
    const std::vector<float> logits = rand_bf16(static_cast<size_t>(c.rows * c.ld), 9, 3.0f);
    std::vector<int32_t> labels(static_cast<size_t>(c.rows));
    for (int64_t r = 0; r < c.rows; ++r) labels[static_cast<size_t>(r)] = static_cast<int32_t>((r * 7919 + 11) % c.vocab);
    if (c.rows > 2) labels[1] = -1;  // ignored
    Dev<bf16> dl(logits.size()), dg(logits.size());
    Dev<int32_t> dlab(labels.size());
    Dev<float> dloss(labels.size());
    put_bf16(dl.p, logits);
    put(dlab.p, labels);
    ASSERT_EQ(cudaMemset(dg.p, 0xff, logits.size() * 2), cudaSuccess);  // NaN poison: padding must be written
    cross_entropy_fwd_bwd(dl.p, dlab.p, dloss.p, dg.p, c.rows, c.vocab, c.ld, 0.25f, s_);
    sync();
    std::vector<float> loss(labels.size()), g(logits.size());
    ref::cross_entropy_fwd_bwd(logits.data(), labels.data(), loss.data(), g.data(), c.rows, c.vocab, c.ld, 0.25f);
    const std::string sz = " vocab " + std::to_string(c.vocab) + " ld " + std::to_string(c.ld);
    expect_match(get(dloss.p, loss.size()), loss, 1e-5, 1e-5, "cross-entropy loss" + sz);
    expect_match(get_bf16(dg.p, g.size()), g, kBf16Rel, 1e-8, "cross-entropy dlogits" + sz);
  }
}

TEST_F(TrainKernels, OptimizerPieces) {
  for (int64_t n : {int64_t{1}, int64_t{1001}, int64_t{1} << 20}) {
    for (int off : {0, 1}) {
      const std::vector<float> grad = rand_bf16(static_cast<size_t>(n), 10, 0.01f);
      std::vector<float> master = rand_bf16(static_cast<size_t>(n), 11, 0.02f), m = rand_bf16(static_cast<size_t>(n), 12, 1e-3f);
      std::vector<float> v(static_cast<size_t>(n));
      for (size_t i = 0; i < v.size(); ++i) v[i] = m[i] * m[i] * 2;
      Dev<float> dg(grad.size() + 1), dm(grad.size() + 1), dmm(grad.size() + 1), dv(grad.size() + 1), dsc(2), dnorm(1);
      Dev<bf16> dmodel(grad.size() + 1);
      Dev<double> dss(1);
      put(dg.p + off, grad);
      put(dm.p + off, master);
      put(dmm.p + off, m);
      put(dv.p + off, v);
      ASSERT_EQ(cudaMemset(dss.p, 0, 8), cudaSuccess);
      sum_squares(dg.p + off, n, dss.p, s_);
      clip_coefficient(dss.p, 0.5f, dsc.p, dnorm.p, s_);
      AdamParams a;
      a.lr = 3e-4f;
      a.step = 3;
      adamw_step(dm.p + off, dmodel.p + off, dmm.p + off, dv.p + off, dg.p + off, n, a, dsc.p, s_);
      sync();
      double ss = 0;
      ref::sum_squares(grad.data(), n, &ss);
      EXPECT_NEAR(get(dss.p, 1)[0], ss, 1e-6 * ss) << "sum_squares n " << n;
      float scale = 0, norm = 0;
      ref::clip_coefficient(&ss, 0.5f, &scale, &norm);
      EXPECT_NEAR(get(dsc.p, 1)[0], scale, 1e-6 * scale);
      EXPECT_NEAR(get(dnorm.p, 1)[0], norm, 1e-6 * norm);
      std::vector<float> model(master.size());
      ref::adamw_step(master.data(), model.data(), m.data(), v.data(), grad.data(), n, a, &scale);
      expect_match(get(dm.p + off, master.size()), master, 1e-6, 1e-9, "adamw master");
      // m = b1 m + (1 - b1) g cancels where m and g have opposite signs: the error is fp32
      // rounding of the terms (measured on the H200: 2.2x a 1e-5 relative bound at
      // -6.2e-8), so the bound is relative plus 1e-6 of the tensor's largest value. The bf16
      // copy rounds a master that may differ in its last fp32 bits: one bf16 step (2^-7
      // relative at most) either way.
      expect_match(get(dmm.p + off, m.size()), m, 1e-5, 1e-6 * max_abs(m), "adamw exp_avg");
      expect_match(get(dv.p + off, v.size()), v, 1e-5, 1e-15, "adamw exp_avg_sq");
      expect_match(get_bf16(dmodel.p + off, model.size()), model, 1.0 / 128, 0, "adamw model copy");
    }
  }
}

// Bit-identical repeats (the runner's resume guarantee): the reductions that used to be
// floating-point atomics. Heavily repeated token ids (4096 rows on 7 ids) and a 10M-element
// sum of squares give an order-dependent result many ways; both kernels must give one. The
// embedding backward is also held against the reference on these shapes.
bool same_bits(const void* a, const void* b, size_t bytes) { return std::memcmp(a, b, bytes) == 0; }

TEST_F(TrainKernels, EmbeddingBackwardAndSumOfSquaresAreBitIdentical) {
  for (auto [rows, h, vocab] : {std::tuple<int64_t, int64_t, int64_t>{4096, 1024, 7}, {4096, 13, 7}, {3000, 64, 2000}}) {
    std::vector<int32_t> tok(static_cast<size_t>(rows));
    std::mt19937 g(static_cast<unsigned>(rows + h));
    for (int32_t& t : tok) t = static_cast<int32_t>(g() % static_cast<unsigned>(vocab));
    const std::vector<float> dout = rand_bf16(static_cast<size_t>(rows * h), 11);
    Dev<int32_t> dt(tok.size());
    Dev<bf16> dd(dout.size());
    Dev<float> acc(static_cast<size_t>(vocab * h));
    put(dt.p, tok);
    put_bf16(dd.p, dout);
    std::vector<float> first;
    for (int rep = 0; rep < 3; ++rep) {
      ASSERT_EQ(cudaMemset(acc.p, 0, acc.n * 4), cudaSuccess);
      embedding_bwd(dt.p, dd.p, acc.p, rows, h, s_);
      sync();
      const std::vector<float> got = get(acc.p, acc.n);
      if (rep == 0) first = got;
      EXPECT_TRUE(same_bits(got.data(), first.data(), got.size() * 4)) << "embedding_bwd rows " << rows << " h " << h;
    }
    std::vector<float> want(acc.n, 0.0f);
    ref::embedding_bwd(tok.data(), dout.data(), want.data(), rows, h);
    // fp32 sums of ~rows / vocab unit terms: error ~ sqrt(terms) 2^-24 relative to their scale.
    expect_match(first, want, 1e-5, 1e-5 * std::sqrt(static_cast<double>(rows) / vocab),
                 "embedding_bwd repeated ids rows " + std::to_string(rows) + " h " + std::to_string(h));
  }
  const int64_t n = 10'000'003;  // not a multiple of 4: the vector loop and the tail both run
  const std::vector<float> v = rand_bf16(static_cast<size_t>(n), 12, 0.01f);
  Dev<float> dv(v.size());
  Dev<double> ss(1);
  put(dv.p, v);
  for (const int64_t off : {int64_t{0}, int64_t{1}}) {  // aligned and unaligned
    double first = 0;
    for (int rep = 0; rep < 3; ++rep) {
      ASSERT_EQ(cudaMemset(ss.p, 0, 8), cudaSuccess);
      sum_squares(dv.p + off, n - off, ss.p, s_);
      sync();
      const double got = get(ss.p, 1)[0];
      if (rep == 0) first = got;
      EXPECT_TRUE(same_bits(&got, &first, 8)) << "sum_squares offset " << off << ": " << got << " vs " << first;
    }
    double want = 0;
    ref::sum_squares(v.data() + off, n - off, &want);
    EXPECT_NEAR(first, want, 1e-9 * want);
  }
}

// The MoE router's aux-loss statistics (moe_block_kernels.cuh): per-block partials summed in
// order, so psum and zsum repeat bit for bit; counts and routing are integers.
TEST_F(TrainKernels, MoeRoutingStatisticsAreBitIdentical) {
  for (const bool sigmoid : {false, true}) {
    moe::RouteDesc d;
    d.tokens = 5000;
    d.experts = 64;
    d.topk = 4;
    d.sigmoid = sigmoid;
    d.groups = sigmoid ? 8 : 0;
    d.group_topk = sigmoid ? 2 : 0;
    d.aux = true;
    d.z = true;
    std::vector<float> logits(static_cast<size_t>(d.tokens) * d.experts);
    std::mt19937_64 g(sigmoid ? 5 : 6);
    std::normal_distribution<float> nd(0.0f, 2.0f);
    for (float& x : logits) x = nd(g);
    const size_t nk = static_cast<size_t>(d.tokens) * d.topk, E = static_cast<size_t>(d.experts);
    Dev<float> dl(logits.size()), w(nk), psum(E), zsum(1);
    Dev<int32_t> idx(nk), eid(nk), count(E);
    put(dl.p, logits);
    std::vector<float> p0, z0;
    std::vector<int32_t> c0;
    for (int rep = 0; rep < 3; ++rep) {
      moe::route(d, dl.p, nullptr, idx.p, w.p, eid.p, count.p, psum.p, zsum.p, s_);
      sync();
      const std::vector<float> p = get(psum.p, E), z = get(zsum.p, 1);
      const std::vector<int32_t> c = get(count.p, E);
      if (rep == 0) {
        p0 = p, z0 = z, c0 = c;
        // The sums are the sums: psum totals the tokens (each token's aux scores sum to 1).
        double total = 0;
        for (float x : p) total += x;
        EXPECT_NEAR(total, d.tokens, 1e-3 * d.tokens);
        int64_t picks = 0;
        for (int32_t x : c) picks += x;
        EXPECT_EQ(picks, static_cast<int64_t>(d.tokens) * d.topk);
      }
      EXPECT_TRUE(same_bits(p.data(), p0.data(), E * 4)) << (sigmoid ? "sigmoid" : "softmax") << " psum";
      EXPECT_TRUE(same_bits(z.data(), z0.data(), 4)) << (sigmoid ? "sigmoid" : "softmax") << " zsum";
      EXPECT_EQ(c, c0);
    }
    double zref = 0;
    for (int t = 0; t < d.tokens; ++t) {
      const float* l = logits.data() + static_cast<size_t>(t) * E;
      double m = l[0], sum = 0;
      for (size_t e = 0; e < E; ++e) m = std::max(m, static_cast<double>(l[e]));
      for (size_t e = 0; e < E; ++e) sum += std::exp(l[e] - m);
      zref += (m + std::log(sum)) * (m + std::log(sum));
    }
    EXPECT_NEAR(z0[0], zref, 1e-5 * zref);
  }
}

}  // namespace
}  // namespace lcm::exec::train
