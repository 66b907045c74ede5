// A hardware spec with round, documented numbers for hand-derived time-model tests.
#pragma once

#include "lcm/model/specs.hpp"

namespace lcm::testing {

inline HardwareSpec test_h100() {
  HardwareSpec hw;
  hw.name = "test-h100";
  hw.gpu.name = "H100 SXM";
  hw.gpu.peak_bf16_flops = 989.4e12;
  hw.gpu.peak_fp8_flops = 1978.9e12;
  hw.gpu.hbm_bytes = 80.0 * (1ull << 30);
  hw.gpu.hbm_bw = 3.35e12;
  hw.gpu.num_sms = 132;
  hw.gpu.l2_bytes = 50.0 * (1 << 20);
  hw.interconnect.gpus_per_node = 8;
  hw.interconnect.nvlink_bw = 450e9;
  hw.interconnect.nvlink_latency = 5e-6;
  hw.interconnect.nic_bw = 50e9;
  hw.interconnect.nic_latency = 10e-6;
  hw.efficiency.gemm = 0.8;
  hw.efficiency.gemm_fp8 = 0.6;
  hw.efficiency.attention_fwd = 0.65;
  hw.efficiency.attention_bwd = 0.5;
  hw.efficiency.hbm = 0.85;
  hw.efficiency.hbm_elementwise = 0.85;
  hw.efficiency.nvlink = 0.82;
  hw.efficiency.nic = 0.92;
  hw.efficiency.gemm_dim_half = 64;
  hw.efficiency.gemm_tile_m = 128;
  hw.efficiency.gemm_tile_n = 256;
  hw.efficiency.attention_seq_half = 512;
  hw.efficiency.nvlink_half_bytes = 8.0 * (1 << 20);
  hw.efficiency.nic_half_bytes = 4.0 * (1 << 20);
  return hw;
}

}  // namespace lcm::testing
