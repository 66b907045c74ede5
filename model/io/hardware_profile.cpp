// Hardware profiles (hwprofiles/*.yaml): one GPU in a node of gpus_per_node behind NVSwitch
// plus its NIC. Keys carry their unit (_TFLOPs, _GBps, _GiB, _GB, _MiB, _us) and are
// converted once here to FLOP/s, bytes/s, bytes and seconds. Every key is required and
// unknown keys are errors (docs/hardware-profiles.md).
#include <algorithm>
#include <filesystem>
#include <limits>
#include <set>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "lcm/model/io/data_dir.hpp"
#include "lcm/model/io/input_file.hpp"
#include "lcm/model/io/scenario_loader.hpp"
#include "yaml_read.hpp"

namespace lcm::io {

namespace fs = std::filesystem;

namespace {

constexpr double kMinEfficiency = 0.01;
constexpr double kTera = 1e12, kGiga = 1e9, kGiB = 1024.0 * 1024 * 1024, kMiB = 1024.0 * 1024, kMicro = 1e-6;

struct Key {
  std::string_view name;
  // Store a parsed value; returns "" or what was expected.
  std::function<std::string(const YAML::Node&, HardwareSpec&)> set;
  // The value as the profile writes it (in the key's unit); for edit_hardware_profile.
  std::function<std::string(const HardwareSpec&)> text;
};

Key real_key(std::string_view name, double scale, double min, bool exclusive, double max,
             std::function<double&(HardwareSpec&)> acc) {
  return {name,
          [=](const YAML::Node& n, HardwareSpec& h) -> std::string {
            auto r = read_double(n, min, exclusive);
            if (failed(r)) return why(r);
            if (std::get<0>(r) > max)
              return fmt::format("expected a number <= {:g} (lcm's physical bound, docs/hardware-profiles.md), got {}", max,
                                 n.Scalar());
            acc(h) = std::get<0>(r) * scale;
            return {};
          },
          [=](const HardwareSpec& h) {
            HardwareSpec c = h;
            return fmt::format("{:.4g}", acc(c) / scale);
          }};
}

Key int_key(std::string_view name, std::function<int&(HardwareSpec&)> acc) {
  return {name,
          [=](const YAML::Node& n, HardwareSpec& h) -> std::string {
            auto r = read_int(n, 1, 1 << 20);
            if (failed(r)) return why(r);
            acc(h) = static_cast<int>(std::get<0>(r));
            return {};
          },
          [=](const HardwareSpec& h) {
            HardwareSpec c = h;
            return std::to_string(acc(c));
          }};
}

std::vector<Key> top_keys() {
  return {
      {"name",
       [](const YAML::Node& n, HardwareSpec& h) -> std::string {
         auto r = read_string(n);
         if (failed(r)) return why(r);
         h.name = h.gpu.name = std::get<0>(r);
         return {};
       },
       [](const HardwareSpec& h) { return h.name; }},
      real_key("peak_bf16_dense_TFLOPs", kTera, 0, true, 1e5, [](HardwareSpec& h) -> double& { return h.gpu.peak_bf16_flops; }),
      real_key("peak_fp8_dense_TFLOPs", kTera, 0, true, 1e5, [](HardwareSpec& h) -> double& { return h.gpu.peak_fp8_flops; }),
      real_key("hbm_capacity_GiB", kGiB, 0, true, 65536, [](HardwareSpec& h) -> double& { return h.gpu.hbm_bytes; }),
      real_key("hbm_capacity_GB", kGiga, 0, true, 70368, [](HardwareSpec& h) -> double& { return h.gpu.hbm_bytes; }),
      real_key("hbm_capacity_MiB", kMiB, 0, true, 67108864, [](HardwareSpec& h) -> double& { return h.gpu.hbm_bytes; }),
      real_key("hbm_bw_GBps", kGiga, 0, true, 1e6, [](HardwareSpec& h) -> double& { return h.gpu.hbm_bw; }),
      int_key("num_sms", [](HardwareSpec& h) -> int& { return h.gpu.num_sms; }),
      real_key("l2_MiB", kMiB, 0, true, 65536, [](HardwareSpec& h) -> double& { return h.gpu.l2_bytes; }),
      int_key("gpus_per_node", [](HardwareSpec& h) -> int& { return h.interconnect.gpus_per_node; }),
      real_key("nvlink_bw_GBps", kGiga, 0, true, 1e5, [](HardwareSpec& h) -> double& { return h.interconnect.nvlink_bw; }),
      real_key("nvlink_latency_us", kMicro, 0, false, 1e6,
               [](HardwareSpec& h) -> double& { return h.interconnect.nvlink_latency; }),
      real_key("nvlink_ll_latency_us", kMicro, 0, false, 1e6,
               [](HardwareSpec& h) -> double& { return h.interconnect.nvlink_ll_latency; }),
      real_key("nic_bw_GBps", kGiga, 0, true, 1e5, [](HardwareSpec& h) -> double& { return h.interconnect.nic_bw; }),
      real_key("nic_latency_us", kMicro, 0, false, 1e6, [](HardwareSpec& h) -> double& { return h.interconnect.nic_latency; }),
  };
}

// gemm_roofline_exponent: 0 (no memory term) or a smooth-maximum exponent in [1, 1000]; below 1
// the "maximum" would exceed the sum of the two times; from about 50 up it is the hard maximum
// (a fit may go there: one H200 fit of session 16 gave 92).
Key roofline_exponent_key() {
  Key k = real_key("gemm_roofline_exponent", 1.0, 0, false, 1000,
                   [](HardwareSpec& h) -> double& { return h.efficiency.gemm_roofline_exponent; });
  auto set = k.set;
  k.set = [set](const YAML::Node& n, HardwareSpec& h) -> std::string {
    if (std::string e = set(n, h); !e.empty()) return e;
    const double p = h.efficiency.gemm_roofline_exponent;
    if (p > 0 && p < 1) return fmt::format("expected 0 (off) or a number in [1, 1000], got {}", n.Scalar());
    return {};
  };
  return k;
}

// Keys a profile may leave out: block-scaled FP8 GEMMs are measured on some GPUs only (a
// blockwise scenario on a profile without the key is refused by validate_scenario); the MoE
// layer's Python before its synchronisation (0: one segment, as before session 35);
// FlashAttention-2's terms (a flash2 scenario on a profile without them is refused).
bool optional_key(std::string_view block, std::string_view name) {
  if (block == "host") return name == "moe_layer_presync_fwd_us";
  return block == "efficiency" &&
         (name == "gemm_fp8_block" || name == "attention_l2_miss_slowdown" || name == "attention_l2_miss_start" ||
          name == "attention_l2_miss_full" || name == "attention_dropout_fwd_Gelem_per_s" ||
          name == "attention_dropout_bwd_Gelem_per_s" || name == "attention_flash2_fwd" ||
          name == "attention_flash2_bwd" || name == "attention_flash2_seq_half_tokens" ||
          name == "attention_flash2_other_head_dim" || name == "gpu_speed_spread" || name == "gpu_speed_spread_fp8");
}

// Achieved fractions of a peak, (0, 1], and the curve parameters of the time model.
std::vector<Key> efficiency_keys() {
  // At least 1% of a peak: a fit below that (a calibration on impossible measurements) is refused.
  auto frac = [](std::string_view name, std::function<double&(HardwareSpec&)> acc) {
    return real_key(name, 1.0, kMinEfficiency, false, 1.0, std::move(acc));
  };
  return {
      frac("gemm", [](HardwareSpec& h) -> double& { return h.efficiency.gemm; }),
      frac("gemm_fp8", [](HardwareSpec& h) -> double& { return h.efficiency.gemm_fp8; }),
      frac("gemm_fp8_block", [](HardwareSpec& h) -> double& { return h.efficiency.gemm_fp8_block; }),
      frac("attention_fwd", [](HardwareSpec& h) -> double& { return h.efficiency.attention_fwd; }),
      frac("attention_bwd", [](HardwareSpec& h) -> double& { return h.efficiency.attention_bwd; }),
      frac("attention_flash2_fwd", [](HardwareSpec& h) -> double& { return h.efficiency.attention_flash2_fwd; }),
      frac("attention_flash2_bwd", [](HardwareSpec& h) -> double& { return h.efficiency.attention_flash2_bwd; }),
      frac("attention_flash2_other_head_dim",
           [](HardwareSpec& h) -> double& { return h.efficiency.attention_flash2_other_head_dim; }),
      // GPU-to-GPU speed spread (relative standard deviation): 0 (alike) to 0.5.
      real_key("gpu_speed_spread", 1.0, 0, false, 0.5,
               [](HardwareSpec& h) -> double& { return h.efficiency.gpu_speed_spread; }),
      real_key("gpu_speed_spread_fp8", 1.0, 0, false, 0.5,
               [](HardwareSpec& h) -> double& { return h.efficiency.gpu_speed_spread_fp8; }),
      frac("hbm", [](HardwareSpec& h) -> double& { return h.efficiency.hbm; }),
      frac("hbm_elementwise", [](HardwareSpec& h) -> double& { return h.efficiency.hbm_elementwise; }),
      frac("nvlink", [](HardwareSpec& h) -> double& { return h.efficiency.nvlink; }),
      frac("nic", [](HardwareSpec& h) -> double& { return h.efficiency.nic; }),
      // Shape and size curves (timing.cpp): half-points and GEMM output tiles.
      real_key("gemm_dim_half", 1.0, 0, false, 1e6,
               [](HardwareSpec& h) -> double& { return h.efficiency.gemm_dim_half; }),
      int_key("gemm_tile_m", [](HardwareSpec& h) -> int& { return h.efficiency.gemm_tile_m; }),
      int_key("gemm_tile_n", [](HardwareSpec& h) -> int& { return h.efficiency.gemm_tile_n; }),
      real_key("attention_seq_half_tokens", 1.0, 0, false, 1e9,
               [](HardwareSpec& h) -> double& { return h.efficiency.attention_seq_half; }),
      real_key("attention_flash2_seq_half_tokens", 1.0, 0, false, 1e9,
               [](HardwareSpec& h) -> double& { return h.efficiency.attention_flash2_seq_half; }),
      real_key("nvlink_half_MiB", kMiB, 0, false, 1e6,
               [](HardwareSpec& h) -> double& { return h.efficiency.nvlink_half_bytes; }),
      real_key("nic_half_MiB", kMiB, 0, false, 1e6,
               [](HardwareSpec& h) -> double& { return h.efficiency.nic_half_bytes; }),
      real_key("attention_head_dim_half", 1.0, 0, false, 1e6,
               [](HardwareSpec& h) -> double& { return h.efficiency.attention_head_dim_half; }),
      real_key("attention_bwd_wide_dim_exponent", 1.0, 0, false, 10,
               [](HardwareSpec& h) -> double& { return h.efficiency.attention_bwd_wide_dim_exponent; }),
      real_key("collective_base_us", kMicro, 0, false, 1e6,
               [](HardwareSpec& h) -> double& { return h.efficiency.collective_base; }),
      real_key("nvlink_allgather_scale", 1.0, 0, true, 100,
               [](HardwareSpec& h) -> double& { return h.efficiency.nvlink_allgather_scale; }),
      real_key("nvlink_alltoall_scale", 1.0, 0, true, 100,
               [](HardwareSpec& h) -> double& { return h.efficiency.nvlink_alltoall_scale; }),
      real_key("nvlink_sendrecv_scale", 1.0, 0, true, 100,
               [](HardwareSpec& h) -> double& { return h.efficiency.nvlink_sendrecv_scale; }),
      real_key("nvlink_ramp_exponent", 1.0, 0, true, 10,
               [](HardwareSpec& h) -> double& { return h.efficiency.nvlink_ramp_exponent; }),
      real_key("nvlink_ll", 1.0, 0, false, 1.0, [](HardwareSpec& h) -> double& { return h.efficiency.nvlink_ll; }),
      real_key("kernel_fixed_us", kMicro, 0, false, 1e6,
               [](HardwareSpec& h) -> double& { return h.efficiency.kernel_fixed; }),
      // Small-op regime (issue 12): GEMM memory roofline exponent, copy fixed time, attention CTA tail.
      roofline_exponent_key(),
      real_key("memory_fixed_us", kMicro, 0, false, 1e6,
               [](HardwareSpec& h) -> double& { return h.efficiency.memory_fixed; }),
      real_key("grouped_gemm_fixed_us", kMicro, 0, false, 1e6,
               [](HardwareSpec& h) -> double& { return h.efficiency.grouped_gemm_fixed; }),
      real_key("attention_cta_tail", 1.0, 0, false, 4,
               [](HardwareSpec& h) -> double& { return h.efficiency.attention_cta_tail; }),
      real_key("attention_window_extra_tokens", 1.0, 0, false, 1e6,
               [](HardwareSpec& h) -> double& { return h.efficiency.attention_window_extra; }),
      real_key("attention_l2_miss_slowdown", 1.0, 0, false, 10,
               [](HardwareSpec& h) -> double& { return h.efficiency.attention_l2_miss_slowdown; }),
      real_key("attention_l2_miss_start", 1.0, 0, false, 100,
               [](HardwareSpec& h) -> double& { return h.efficiency.attention_l2_miss_start; }),
      real_key("attention_l2_miss_full", 1.0, 0, false, 100,
               [](HardwareSpec& h) -> double& { return h.efficiency.attention_l2_miss_full; }),
      real_key("attention_dropout_fwd_Gelem_per_s", 1e9, 0, false, 1e6,
               [](HardwareSpec& h) -> double& { return h.efficiency.attention_dropout_fwd_rate; }),
      real_key("attention_dropout_bwd_Gelem_per_s", 1e9, 0, false, 1e6,
               [](HardwareSpec& h) -> double& { return h.efficiency.attention_dropout_bwd_rate; }),
      real_key("gemm_sm_fill_exponent", 1.0, 0, false, 4,
               [](HardwareSpec& h) -> double& { return h.efficiency.gemm_sm_fill_exponent; }),
      real_key("gemm_accumulate_miss_bw", 1.0, 0, true, 1,
               [](HardwareSpec& h) -> double& { return h.efficiency.gemm_accumulate_miss_bw; }),
      real_key("gemm_c_write_exposed", 1.0, 0, false, 1,
               [](HardwareSpec& h) -> double& { return h.efficiency.gemm_c_write_exposed; }),
      real_key("gemm_fill_bw_exponent", 1.0, 0, false, 4,
               [](HardwareSpec& h) -> double& { return h.efficiency.gemm_fill_bw_exponent; }),
      real_key("gemm_tile_small", 1.0, 0, false, 1024,
               [](HardwareSpec& h) -> double& { return h.efficiency.gemm_tile_small; }),
      real_key("gemm_split_k_chunk", 1.0, 0, false, 1e7,
               [](HardwareSpec& h) -> double& { return h.efficiency.gemm_split_k_chunk; }),
  };
}

std::vector<Key> allowance_keys() {
  return {
      real_key("cuda_context_GiB", kGiB, 0, false, 1024, [](HardwareSpec& h) -> double& { return h.allowances.cuda_context; }),
      real_key("nccl_per_communicator_MiB", kMiB, 0, false, 1e6,
               [](HardwareSpec& h) -> double& { return h.allowances.nccl_per_communicator; }),
      real_key("cublas_workspace_MiB", kMiB, 0, false, 1e6,
               [](HardwareSpec& h) -> double& { return h.allowances.cublas_workspace; }),
      real_key("fragmentation_fraction", 1.0, 0, false, 0.999,
               [](HardwareSpec& h) -> double& { return h.allowances.fragmentation_fraction; }),
  };
}

// The optional `uncertainty:` block: per calibration class the 10th and 90th percentiles
// of measured / predicted - 1 (fractions), how many residuals, and their source.
std::vector<Key> uncertainty_keys() {
  auto band = [](std::string_view name, std::function<double&(HardwareSpec&)> acc) {
    return real_key(name, 1.0, -0.99, false, 10.0, std::move(acc));
  };
  using H = HardwareSpec;
  return {
      {"source",
       [](const YAML::Node& n, H& h) -> std::string {
         auto r = read_string(n);
         if (failed(r)) return why(r);
         h.uncertainty.source = std::get<0>(r);
         return {};
       },
       [](const H& h) { return h.uncertainty.source; }},
      int_key("points", [](H& h) -> int& { return h.uncertainty.points; }),
      band("gemm_bf16_p10", [](H& h) -> double& { return h.uncertainty.gemm_bf16.low; }),
      band("gemm_bf16_p90", [](H& h) -> double& { return h.uncertainty.gemm_bf16.high; }),
      band("gemm_fp8_p10", [](H& h) -> double& { return h.uncertainty.gemm_fp8.low; }),
      band("gemm_fp8_p90", [](H& h) -> double& { return h.uncertainty.gemm_fp8.high; }),
      band("attention_p10", [](H& h) -> double& { return h.uncertainty.attention.low; }),
      band("attention_p90", [](H& h) -> double& { return h.uncertainty.attention.high; }),
      band("memory_p10", [](H& h) -> double& { return h.uncertainty.memory.low; }),
      band("memory_p90", [](H& h) -> double& { return h.uncertainty.memory.high; }),
      band("nvlink_p10", [](H& h) -> double& { return h.uncertainty.nvlink.low; }),
      band("nvlink_p90", [](H& h) -> double& { return h.uncertainty.nvlink.high; }),
      band("nic_p10", [](H& h) -> double& { return h.uncertainty.nic.low; }),
      band("nic_p90", [](H& h) -> double& { return h.uncertainty.nic.high; }),
  };
}

// The host side of a step (HostSpec; docs/time-model.md, "Host-bound regime"). An optional
// block: a profile without it has no host cost; with it, every key is required.
std::vector<Key> host_keys() {
  return {
      real_key("kernel_launch_us", kMicro, 0, false, 1000, [](HardwareSpec& h) -> double& { return h.host.kernel_launch; }),
      real_key("launch_latency_us", kMicro, 0, false, 1000, [](HardwareSpec& h) -> double& { return h.host.launch_latency; }),
      real_key("sync_us", kMicro, 0, false, 10000, [](HardwareSpec& h) -> double& { return h.host.sync; }),
      real_key("layer_overhead_fwd_us", kMicro, 0, false, 100000,
               [](HardwareSpec& h) -> double& { return h.host.layer_overhead_fwd; }),
      real_key("layer_overhead_bwd_us", kMicro, 0, false, 100000,
               [](HardwareSpec& h) -> double& { return h.host.layer_overhead_bwd; }),
      real_key("moe_layer_overhead_fwd_us", kMicro, 0, false, 100000,
               [](HardwareSpec& h) -> double& { return h.host.moe_overhead_fwd; }),
      real_key("moe_layer_overhead_bwd_us", kMicro, 0, false, 100000,
               [](HardwareSpec& h) -> double& { return h.host.moe_overhead_bwd; }),
      real_key("moe_layer_presync_fwd_us", kMicro, 0, false, 100000,
               [](HardwareSpec& h) -> double& { return h.host.moe_presync_fwd; }),
      real_key("microbatch_overhead_us", kMicro, 0, false, 1000000,
               [](HardwareSpec& h) -> double& { return h.host.microbatch_overhead; }),
      real_key("graph_replay_us", kMicro, 0, false, 100000, [](HardwareSpec& h) -> double& { return h.host.graph_replay; }),
      real_key("optimizer_tensor_us", kMicro, 0, false, 100000,
               [](HardwareSpec& h) -> double& { return h.host.optimizer_tensor; }),
      real_key("iteration_overhead_us", kMicro, 0, false, 10000000,
               [](HardwareSpec& h) -> double& { return h.host.iteration_overhead; }),
      real_key("exec_gemm_enqueue_us", kMicro, 0, false, 1000,
               [](HardwareSpec& h) -> double& { return h.host.exec_gemm_enqueue; }),
  };
}

// The keys of a profile's top level and of its keyed blocks; the loader and the editor both
// look keys up here.
struct ProfileKeys {
  std::vector<Key> top = top_keys(), efficiency = efficiency_keys(), allowances = allowance_keys(), host = host_keys();
  // A block's keys ("" = the top level), or nullptr for a name that is no keyed block.
  const std::vector<Key>* block(std::string_view name) const {
    return name.empty()              ? &top
           : name == "efficiency"    ? &efficiency
           : name == "allowances"    ? &allowances
           : name == "host"          ? &host
                                     : nullptr;
  }
};

std::vector<std::string> names_of(const std::vector<Key>& keys) {
  std::vector<std::string> out;
  for (const Key& k : keys) out.emplace_back(k.name);
  return out;
}

// Parse one mapping against its keys (`extra_names`: sub-blocks parsed separately). Records
// each key in `seen`; the caller checks that the required ones are there.
std::optional<ConfigError> parse_block(const YAML::Node& map, const std::vector<Key>& keys, const std::string& prefix,
                                       const std::vector<std::string>& extra_names, HardwareSpec& h,
                                       const std::string& file, std::set<std::string>& seen) {
  std::vector<std::string> valid = names_of(keys);
  valid.insert(valid.end(), extra_names.begin(), extra_names.end());
  for (const auto& kv : map) {
    const Loc loc = loc_of(kv.first.Mark(), file);
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : std::string();
    const std::string dotted = prefix.empty() ? key : prefix + "." + key;
    if (std::find(extra_names.begin(), extra_names.end(), key) != extra_names.end()) continue;
    const auto it = std::find_if(keys.begin(), keys.end(), [&](const Key& k) { return k.name == key; });
    if (dotted == "allowances.activation_uncertainty_fraction")  // removed in issue 12 (session 12)
      return error_at(loc, dotted,
                      "removed: the memory band is the model's own residual spread (docs/memory-model.md, "
                      "\"Error band and verdict\"); delete the key");
    if (it == keys.end()) return error_at(loc, dotted, unknown_message("key", key, valid));
    if (!seen.insert(dotted).second) return error_at(loc, dotted, "duplicate key");
    if (std::string err = it->set(kv.second, h); !err.empty()) return error_at(loc, dotted, err);
  }
  return std::nullopt;
}

Result<HardwareSpec> load_profile_text(const std::string& text, const std::string& path);

}  // namespace

Result<HardwareSpec> load_hardware_profile(const std::string& path) {
  try {
    auto text = read_input_file(path, "hardware profile");
    if (!text) return text.error();
    return load_profile_text(text.value(), path);
  } catch (const std::exception& e) {  // any library exception becomes an input error
    return ConfigError{path, 0, 0, "", std::string("cannot load hardware profile: ") + e.what()};
  }
}

Result<HardwareSpec> load_hardware_profile_text(const std::string& text, const std::string& display_name) {
  try {
    return load_profile_text(text, display_name);
  } catch (const std::exception& e) {
    return ConfigError{display_name, 0, 0, "", std::string("cannot load hardware profile: ") + e.what()};
  }
}

namespace {

Result<HardwareSpec> load_profile_text(const std::string& text, const std::string& path) {
  auto doc = parse_yaml(text, path);
  if (!doc) return doc.error();
  const YAML::Node& root = doc.value();
  const Loc top{path, 1, 1};
  if (!root.IsMap()) return error_at(top, "", "expected a hardware profile mapping, got " + describe(root));

  HardwareSpec h;
  std::set<std::string> seen;
  const ProfileKeys pk;
  if (auto e = parse_block(root, pk.top, "", {"efficiency", "allowances", "uncertainty", "host"}, h, path, seen)) return *e;
  for (const char* block : {"efficiency", "allowances", "host"}) {
    const std::vector<Key>* keys = pk.block(block);
    const YAML::Node n = root[block];
    if (!n && keys == &pk.host) continue;  // optional: no host cost
    if (!n) return error_at(top, block, fmt::format("missing required block '{}:'", block));
    Loc bl;
    for (const auto& kv : root)
      if (kv.first.Scalar() == block) bl = loc_of(kv.first.Mark(), path);
    if (!n.IsMap()) return error_at(bl, block, "expected a mapping, got " + describe(n));
    if (auto e = parse_block(n, *keys, block, {}, h, path, seen)) return *e;
    for (const Key& k : *keys)
      if (!seen.count(std::string(block) + "." + std::string(k.name)) && !optional_key(block, k.name))
        return error_at(bl, std::string(block) + "." + std::string(k.name), fmt::format("missing required key '{}'", k.name));
  }
  if (const YAML::Node n = root["uncertainty"]) {  // optional; every key required when given
    Loc bl;
    for (const auto& kv : root)
      if (kv.first.Scalar() == "uncertainty") bl = loc_of(kv.first.Mark(), path);
    if (!n.IsMap()) return error_at(bl, "uncertainty", "expected a mapping, got " + describe(n));
    const std::vector<Key> unc_k = uncertainty_keys();
    if (auto e = parse_block(n, unc_k, "uncertainty", {}, h, path, seen)) return *e;
    for (const Key& k : unc_k)
      if (!seen.count("uncertainty." + std::string(k.name)))
        return error_at(bl, "uncertainty." + std::string(k.name), fmt::format("missing required key '{}'", k.name));
    const OpUncertainty& u = h.uncertainty;
    for (const auto& [name, b] :
         {std::pair{"gemm_bf16", u.gemm_bf16}, std::pair{"gemm_fp8", u.gemm_fp8}, std::pair{"attention", u.attention},
          std::pair{"memory", u.memory}, std::pair{"nvlink", u.nvlink}, std::pair{"nic", u.nic}})
      if (b.low > b.high)
        return error_at(bl, fmt::format("uncertainty.{}_p10", name),
                        fmt::format("the 10th percentile ({:g}) is above the 90th ({:g})", b.low, b.high));
    h.uncertainty.present = true;
  }
  int capacity = 0;
  for (const char* k : {"hbm_capacity_GiB", "hbm_capacity_GB", "hbm_capacity_MiB"}) capacity += seen.count(k);
  if (capacity != 1)
    return error_at(top, "hbm_capacity_GiB",
                    capacity == 0 ? "missing required key: one of hbm_capacity_GiB, hbm_capacity_GB, hbm_capacity_MiB"
                                  : "give the HBM capacity once (hbm_capacity_GiB, _GB or _MiB)");
  for (const Key& k : pk.top) {
    const std::string name(k.name);
    if (name.rfind("hbm_capacity_", 0) == 0) continue;
    if (!seen.count(name)) return error_at(top, name, fmt::format("missing required key '{}'", name));
  }
  return h;
}

std::vector<std::string> default_profile_dirs() {
  std::vector<std::string> dirs;
  for (const fs::path& d : data_dirs()) dirs.push_back((d / "hwprofiles").string());
  return dirs;
}

Result<std::string> find_profile(const std::string& name_or_path, const std::vector<std::string>& dirs) {
  const std::string& ref = name_or_path;
  const Loc here{"<hardware>", 0, 0};
  if (ref.empty()) return error_at(here, "hardware.profile", "empty hardware profile name");
  const bool is_path = ref.find('/') != std::string::npos || ref.ends_with(".yaml") || ref.ends_with(".yml");
  std::error_code ec;
  if (is_path) {
    if (fs::exists(ref, ec)) return ref;  // not a regular file: load_hardware_profile says what it is
    return error_at(here, "hardware.profile", fmt::format("hardware profile file '{}' not found", ref));
  }
  std::vector<std::string> search = dirs;
  for (const std::string& d : default_profile_dirs()) search.push_back(d);
  std::vector<std::string> available;
  for (const std::string& d : search) {
    const fs::path p = fs::path(d) / (ref + ".yaml");
    if (fs::is_regular_file(p, ec)) return p.string();
    for (const auto& e : fs::directory_iterator(d, ec))
      if (e.path().extension() == ".yaml") available.push_back(e.path().stem().string());
  }
  std::sort(available.begin(), available.end());
  available.erase(std::unique(available.begin(), available.end()), available.end());
  std::string msg = unknown_message("hardware profile", ref, available) + "; available: ";
  for (size_t i = 0; i < available.size(); ++i) msg += (i ? ", " : "") + available[i];
  if (available.empty()) msg += "none";
  msg += "; searched:";
  for (const std::string& d : search) msg += " " + d;
  return error_at(here, "hardware.profile", msg);
}

}  // namespace

Result<std::string> find_hardware_profile(const std::string& name_or_path, const std::vector<std::string>& dirs) {
  try {
    return find_profile(name_or_path, dirs);
  } catch (const std::exception& e) {  // a directory that cannot be listed
    return ConfigError{"<hardware>", 0, 0, "hardware.profile", std::string("cannot search profiles: ") + e.what()};
  }
}

Result<std::string> edit_hardware_profile(const std::string& text, const std::string& file, const HardwareSpec& values,
                                          const std::vector<ProfileEdit>& edits) {
  try {
    auto doc = parse_yaml(text, file);
    if (!doc) return doc.error();
    const YAML::Node& root = doc.value();
    if (!root.IsMap()) return ConfigError{file, 1, 1, "", "expected a hardware profile mapping"};
    const ProfileKeys pk;
    std::vector<std::string> lines;
    {
      std::istringstream in(text);
      for (std::string l; std::getline(in, l);) lines.push_back(l);
    }
    // An edit's key ("efficiency.gemm", "host.sync_us", "name"): its block, name and Key.
    struct Target {
      std::string block, name;
      const Key* key = nullptr;
    };
    auto target = [&](const std::string& dotted) {
      Target t;
      const auto dot = dotted.find('.');
      t.block = dot == std::string::npos ? "" : dotted.substr(0, dot);
      t.name = dot == std::string::npos ? dotted : dotted.substr(dot + 1);
      if (const std::vector<Key>* keys = pk.block(t.block)) {
        const auto it = std::find_if(keys->begin(), keys->end(), [&](const Key& k) { return k.name == t.name; });
        if (it != keys->end()) t.key = &*it;
      }
      return t;
    };
    // New text of each edited line (0-based) and the comment lines to put above it; keys the
    // profile does not have yet (an optional key, efficiency.gemm_fp8_block) go after the last
    // key of their block, with its indentation.
    std::map<int, std::pair<std::string, std::vector<std::string>>> changed;
    std::map<int, std::vector<std::string>> appended;
    for (const ProfileEdit& e : edits) {
      const auto [block, name, it] = target(e.key);
      if (!it) return ConfigError{file, 0, 0, e.key, "not a hardware profile key"};
      const YAML::Node map = block.empty() ? root : root[block];
      int line = -1, last = -1;
      if (map && map.IsMap())
        for (const auto& kv : map) {
          if (kv.first.IsScalar() && kv.first.Scalar() == name) line = kv.first.Mark().line;
          last = std::max(last, kv.first.Mark().line);
        }
      if (line < 0 && !block.empty() && last >= 0 && last < static_cast<int>(lines.size())) {
        const std::string& prev = lines[static_cast<size_t>(last)];
        const std::string pad = prev.substr(0, prev.find_first_not_of(' '));
        auto& add = appended[last];
        if (!e.comment.empty()) add.push_back(pad + "# " + e.comment);
        add.push_back(pad + std::string(name) + ": " + it->text(values));
        continue;
      }
      if (line < 0 || line >= static_cast<int>(lines.size()))
        return ConfigError{file, 0, 0, e.key, "key not found in the profile"};
      const std::string& old = lines[static_cast<size_t>(line)];
      const size_t indent = old.find_first_not_of(' ');
      const size_t hash = old.find(" #", old.find(':'));
      std::string updated = old.substr(0, indent) + std::string(name) + ": " + it->text(values);
      if (hash != std::string::npos) updated += "  " + old.substr(hash + 1);
      auto& slot = changed[line];
      slot.first = updated;
      if (!e.comment.empty()) slot.second.push_back(old.substr(0, indent) + "# " + e.comment);
    }
    std::string out;
    for (size_t i = 0; i < lines.size(); ++i) {
      const auto c = changed.find(static_cast<int>(i));
      if (c == changed.end()) {
        out += lines[i] + "\n";
      } else {
        for (const std::string& cl : c->second.second) out += cl + "\n";
        out += c->second.first + "\n";
      }
      if (const auto a = appended.find(static_cast<int>(i)); a != appended.end())
        for (const std::string& l : a->second) out += l + "\n";
    }
    // The result must load and carry exactly the edited values.
    auto check = load_profile_text(out, file);
    if (!check) return check.error();
    for (const ProfileEdit& e : edits) {
      const Key* it = target(e.key).key;
      if (it->text(check.value()) != it->text(values))
        return ConfigError{file, 0, 0, e.key, "edited value did not survive a reload (internal error)"};
    }
    return out;
  } catch (const std::exception& e) {
    return ConfigError{file, 0, 0, "", std::string("cannot edit hardware profile: ") + e.what()};
  }
}

Result<std::string> set_profile_uncertainty(const std::string& text, const std::string& file, const OpUncertainty& u) {
  try {
    // Drop an `uncertainty:` block (its line, its indented lines and the comment lines just
    // above it that name it), then append the new one.
    std::vector<std::string> lines;
    {
      std::istringstream in(text);
      for (std::string l; std::getline(in, l);) lines.push_back(l);
    }
    std::vector<std::string> kept;
    for (size_t i = 0; i < lines.size(); ++i) {
      if (lines[i].rfind("uncertainty:", 0) != 0) {
        kept.push_back(lines[i]);
        continue;
      }
      // The comment run just above the block goes with it when it starts "# uncertainty".
      size_t j = kept.size();
      while (j > 0 && kept[j - 1].rfind('#', 0) == 0) --j;
      if (j < kept.size() && kept[j].rfind("# uncertainty", 0) == 0) kept.resize(j);
      while (i + 1 < lines.size() && (lines[i + 1].empty() || lines[i + 1][0] == ' ')) ++i;
    }
    while (!kept.empty() && kept.back().empty()) kept.pop_back();
    HardwareSpec h;
    h.uncertainty = u;
    std::string out;
    for (const std::string& l : kept) out += l + "\n";
    out +=
        "\n# uncertainty: the time model's op-level error per calibration class, the 10th and 90th percentiles\n"
        "# of measured / predicted - 1 (docs/time-model.md, \"Error bands\"; written by lcm calibrate).\n"
        "uncertainty:\n";
    for (const Key& k : uncertainty_keys()) {
      std::string v = k.text(h);
      if (k.name == "source") {
        std::replace(v.begin(), v.end(), '"', '\'');
        v = "\"" + v + "\"";
      }
      out += fmt::format("  {}: {}\n", k.name, v);
    }
    auto check = load_profile_text(out, file);
    if (!check) return check.error();
    if (!check.value().uncertainty.present)
      return ConfigError{file, 0, 0, "uncertainty", "not written (internal error)"};
    return out;
  } catch (const std::exception& e) {
    return ConfigError{file, 0, 0, "", std::string("cannot edit hardware profile: ") + e.what()};
  }
}

}  // namespace lcm::io
