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
  // Median host time of `n` calls of f, each timed alone (compute_stats is unit-free).
  auto median_of = [](int n, auto&& f) {
    std::vector<double> t;
    for (int i = 0; i < n; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      f();
      t.push_back(seconds_since(t0));
    }
    return compute_stats(std::move(t)).median_us;
  };
  // First calls: the algorithm heuristic and the modules' loading are not enqueue costs.
  run_gemm();
  run_add();
  LCM_CUDA_CHECK(cudaStreamSynchronize(stream));

  HostCosts h;
  StreamGate gate;
  gate.close(stream, 5.0);
  const double gemm_s = median_of(reps, run_gemm), kernel_s = median_of(reps, run_add);
  gate.open();
  LCM_CUDA_CHECK(cudaGetLastError());
  LCM_CUDA_CHECK(cudaStreamSynchronize(stream));
  // A gate that opened by itself let the GPU run ahead of the host: not enqueue costs (-1).
  if (!gate.timed_out()) {
    h.gemm_enqueue_s = gemm_s;
    h.kernel_enqueue_s = kernel_s;
    std::vector<double> sync;  // the round trip after one tiny kernel, its enqueue excluded
    for (int i = 0; i < 50; ++i) {
      run_add();
      const auto t0 = std::chrono::steady_clock::now();
      LCM_CUDA_CHECK(cudaStreamSynchronize(stream));
      sync.push_back(seconds_since(t0));
    }
    h.sync_s = compute_stats(std::move(sync)).median_us;
  }
  LCM_CUDA_CHECK(cudaFree(buf));
  return h;
}

}  // namespace lcm::exec::train
