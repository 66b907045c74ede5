// measure_host_costs (host_costs.hpp).
#include "train/host_costs.hpp"

#include <chrono>
#include <vector>

#include "infra/hold.cuh"
#include "lcm/executor/error.hpp"
#include "lcm/executor/gemm.hpp"
#include "lcm/executor/timing.hpp"
#include "lcm/executor/train/kernels.hpp"

namespace lcm::exec::train {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// compute_stats is unit-free despite its `_us` names.
double median(std::vector<double> v) { return compute_stats(std::move(v)).median_us; }

}  // namespace

HostCosts measure_host_costs(LtGemm& gemm, cudaStream_t stream, int reps) {
  constexpr int64_t kDim = 128, kElems = 4096;
  void* buf = nullptr;
  const size_t gemm_bytes = 3 * kDim * kDim * sizeof(bf16), add_bytes = 3 * kElems * sizeof(bf16);
  LCM_CUDA_CHECK(cudaMalloc(&buf, gemm_bytes + add_bytes));
  LCM_CUDA_CHECK(cudaMemsetAsync(buf, 0, gemm_bytes + add_bytes, stream));
  auto* a = static_cast<bf16*>(buf);
  bf16* b = a + kDim * kDim;
  bf16* c = b + kDim * kDim;
  bf16* x = c + kDim * kDim;
  bf16* y = x + kElems;
  bf16* z = y + kElems;
  auto run_gemm = [&] { gemm.run(kDim, kDim, kDim, a, false, b, true, c, false); };
  auto run_add = [&] { add(x, y, z, kElems, stream); };
  // First calls: the algorithm heuristic and the modules' loading are not enqueue costs.
  run_gemm();
  run_add();
  LCM_CUDA_CHECK(cudaStreamSynchronize(stream));

  HostCosts h;
  std::vector<double> tg, tk, ts;
  tg.reserve(static_cast<size_t>(reps));
  tk.reserve(static_cast<size_t>(reps));
  {
    StreamGate gate;
    gate.close(stream, 5.0);
    for (int i = 0; i < reps; ++i) {
      const auto t0 = Clock::now();
      run_gemm();
      tg.push_back(seconds_since(t0));
    }
    for (int i = 0; i < reps; ++i) {
      const auto t0 = Clock::now();
      run_add();
      tk.push_back(seconds_since(t0));
    }
    gate.open();
    LCM_CUDA_CHECK(cudaGetLastError());
    LCM_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (gate.timed_out()) {  // the GPU ran ahead of the host: the figures are not enqueue costs
      LCM_CUDA_CHECK(cudaFree(buf));
      return h;
    }
  }
  for (int i = 0; i < 50; ++i) {
    run_add();
    const auto t0 = Clock::now();
    LCM_CUDA_CHECK(cudaStreamSynchronize(stream));
    ts.push_back(seconds_since(t0));
  }
  LCM_CUDA_CHECK(cudaFree(buf));
  h.gemm_enqueue_s = median(std::move(tg));
  h.kernel_enqueue_s = median(std::move(tk));
  h.sync_s = median(std::move(ts));
  return h;
}

}  // namespace lcm::exec::train
