// `lcm-exec train`: the training loop (runner.hpp): data, steps, optimizer, timing,
// summary, trace, dump, checkpoints (save and resume).
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn_graph.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <optional>

#include "lcm/executor/cudnn_attention.hpp"
#include "lcm/executor/error.hpp"
#include "lcm/executor/gemm.hpp"
#include "lcm/executor/train/checkpoint.hpp"
#include "lcm/executor/train/data.hpp"
#include "lcm/executor/train/runner.hpp"
#include "lcm/executor/train/summary.hpp"
#include "lcm/model/capacity.hpp"
#include "lcm/model/flops.hpp"
#include "infra/sysinfo.hpp"
#include "train/event_recorder.hpp"
#include "train/host_costs.hpp"
#include "train/model.hpp"

namespace lcm::exec::train {

namespace {

const char* recompute_text(RecomputeKind k) {
  switch (k) {
    case RecomputeKind::kNone: return "none";
    case RecomputeKind::kSelective: return "selective";
    case RecomputeKind::kFull: return "full";
  }
  return "?";
}

// Cosine decay from lr to min_lr over the steps after a linear warm-up (Megatron's
// --lr-decay-style cosine); `step` is 1-based.
float learning_rate(const TrainOptions& o, int step) {
  if (o.lr_warmup_steps > 0 && step <= o.lr_warmup_steps)
    return o.lr * static_cast<float>(step) / static_cast<float>(o.lr_warmup_steps);
  const int decay = o.lr_decay_steps > 0 ? o.lr_decay_steps : o.steps;
  const int span = std::max(1, decay - o.lr_warmup_steps);
  const double t = std::min(1.0, static_cast<double>(step - o.lr_warmup_steps) / span);
  return static_cast<float>(o.min_lr + 0.5 * (o.lr - o.min_lr) * (1.0 + std::cos(3.141592653589793 * t)));
}

template <class T>
void write_raw(const std::filesystem::path& path, const T* data, size_t n) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(n * sizeof(T)));
  if (!f) throw ExecError("cannot write " + path.string());
}

// Copies one fp32 device buffer's parameter slices into DIR/PREFIX.<name>.f32 files.
nlohmann::json dump_tensors(const Model& m, const float* dev, const std::filesystem::path& dir, const std::string& prefix) {
  std::vector<float> host(static_cast<size_t>(m.flat_size()));
  LCM_CUDA_CHECK(cudaMemcpy(host.data(), dev, host.size() * sizeof(float), cudaMemcpyDeviceToHost));
  nlohmann::json index = nlohmann::json::array();
  for (const ParamInfo& p : m.params()) {
    const std::string file = prefix + "." + p.name + ".f32";
    write_raw(dir / file, host.data() + p.offset, static_cast<size_t>(p.numel));
    index.push_back({{"name", p.name}, {"shape", p.shape}, {"file", file}});
  }
  return index;
}

// The checkpoint's blobs: the fp32 master weights and the two AdamW moments (the bf16 working
// copy is bf16(master), recomputed on load; the main grads are zeroed every step).
constexpr const char* kBlobNames[3] = {"master", "exp_avg", "exp_avg_sq"};

void save_state(const Model& m, cudaStream_t stream, const std::string& dir, int step, const nlohmann::json& fingerprint,
                const TokenSource& data, const TrainOptions& o, std::vector<float>& host) {
  const size_t n = static_cast<size_t>(m.flat_size());
  host.resize(3 * n);
  LCM_CUDA_CHECK(cudaStreamSynchronize(stream));
  const float* dev[3] = {m.master(), m.exp_avg(), m.exp_avg_sq()};
  for (size_t i = 0; i < 3; ++i)
    LCM_CUDA_CHECK(cudaMemcpy(host.data() + i * n, dev[i], n * sizeof(float), cudaMemcpyDeviceToHost));
  nlohmann::json params = nlohmann::json::array();
  for (const ParamInfo& p : m.params()) params.push_back({p.name, p.offset, p.numel});
  const nlohmann::json meta = {
      {"step", step},
      {"fingerprint", fingerprint},
      {"data", data.state()},
      // No stateful generator: weights come from a counter-based hash of --seed and the data
      // sources' streams from --seed and their cursor (the data state above).
      {"rng", {{"seed", o.seed}, {"kind", "counter-based"}}},
      {"lr_schedule", {{"next_step", step + 1}, {"next_lr", learning_rate(o, step + 1)}}},
      {"params", params}};
  std::vector<CheckpointBlob> blobs;
  for (size_t i = 0; i < 3; ++i) blobs.push_back({kBlobNames[i], host.data() + i * n, n * sizeof(float)});
  save_checkpoint(dir, meta, blobs);
}

// Puts a loaded checkpoint's state on the device. Returns its step.
int restore_state(Model& m, cudaStream_t stream, const LoadedCheckpoint& ck) {
  const size_t n = static_cast<size_t>(m.flat_size());
  nlohmann::json params = nlohmann::json::array();
  for (const ParamInfo& p : m.params()) params.push_back({p.name, p.offset, p.numel});
  if (ck.meta.value("params", nlohmann::json()) != params)
    throw ExecError("--resume: the checkpoint's parameter layout differs from the model's (same fingerprint: a bug)");
  float* dev[3] = {m.master(), m.exp_avg(), m.exp_avg_sq()};
  for (size_t i = 0; i < 3; ++i) {
    const auto it = ck.blobs.find(kBlobNames[i]);
    if (it == ck.blobs.end() || it->second.size() != n * sizeof(float))
      throw ExecError(std::string("--resume: checkpoint blob '") + kBlobNames[i] + "' missing or not " +
                      std::to_string(n * sizeof(float)) + " bytes");
    LCM_CUDA_CHECK(cudaMemcpy(dev[i], it->second.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  }
  m.refresh_bf16();
  LCM_CUDA_CHECK(cudaStreamSynchronize(stream));
  return ck.meta.at("step").get<int>();
}

}  // namespace

int run_train(const TrainOptions& o, const TrainPlan& p) {
  namespace fs = std::filesystem;
  const bool tty = isatty(2) != 0;
  // Checkpoint checks before CUDA starts (a refused resume is a usage error, exit 2).
  const nlohmann::json fingerprint = run_fingerprint(o, p);
  std::optional<LoadedCheckpoint> resume_from;
  if (o.resume) resume_from = load_resume(o, p);
  LCM_CUDA_CHECK(cudaSetDevice(0));
  LCM_CUDA_CHECK(cudaFree(nullptr));  // the context
  size_t free0 = 0, total = 0;
  LCM_CUDA_CHECK(cudaMemGetInfo(&free0, &total));
  const size_t context_bytes = total - free0;  // everything in use once the context exists (an idle GPU: the context)
  cudaDeviceProp prop{};
  LCM_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  int driver = 0;
  LCM_CUDA_CHECK(cudaDriverGetVersion(&driver));

  cudaStream_t stream = nullptr;
  LCM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  LtGemm gemm(stream, int64_t{32} << 20);
  cudnnHandle_t cudnn = nullptr;
  LCM_CUDNN_CHECK(cudnnCreate(&cudnn));
  LCM_CUDNN_CHECK(cudnnSetStream(cudnn, stream));
  size_t free1 = 0;
  LCM_CUDA_CHECK(cudaMemGetInfo(&free1, &total));
  const size_t library_bytes = free0 > free1 ? free0 - free1 : 0;

  int rc = kExitOk;
  {
    CachingAllocator alloc(cuda_backend());
    Model model(p, alloc, stream, false, &gemm, cudnn);
    const int64_t T = p.tokens, M = p.micro_batches;
    auto data = make_token_source(o.data, p.vocab, o.seed);
    int start_step = 0;
    model.init_weights(o.seed);
    if (resume_from) {
      start_step = restore_state(model, stream, *resume_from);
      data->restore(resume_from->meta.at("data"));
      resume_from.reset();  // the host copy
    }
    std::vector<float> save_host;  // reused by every save

    DeviceArray<int32_t> tokens(alloc, static_cast<size_t>(M * T), MemCategory::kOther);
    DeviceArray<int32_t> labels(alloc, static_cast<size_t>(M * T), MemCategory::kOther);
    DeviceArray<float> loss_rows(alloc, static_cast<size_t>(M * T), MemCategory::kOther);
    DeviceArray<float> scalars(alloc, 2, MemCategory::kOther);  // aux loss, grad norm
    int32_t* h_tokens = nullptr;
    int32_t* h_labels = nullptr;
    float* h_out = nullptr;
    LCM_CUDA_CHECK(cudaMallocHost(&h_tokens, static_cast<size_t>(M * T) * sizeof(int32_t)));
    LCM_CUDA_CHECK(cudaMallocHost(&h_labels, static_cast<size_t>(M * T) * sizeof(int32_t)));
    LCM_CUDA_CHECK(cudaMallocHost(&h_out, static_cast<size_t>(M * T + 2) * sizeof(float)));

    fs::path dump;
    if (!o.dump_dir.empty()) {
      dump = o.dump_dir;
      fs::create_directories(dump);
      LCM_CUDA_CHECK(cudaStreamSynchronize(stream));
      nlohmann::json idx = dump_tensors(model, model.master(), dump, "init");
      write_file_atomic((dump / "weights.json").string(), idx.dump(1));
    }

    const Flops flops = count_flops(p.scenario, p.mesh);
    TrainSummary sum;
    sum.scenario_path = p.scenario_path;
    sum.scenario_name = p.scenario.name;
    sum.overrides = p.overrides;
    sum.scaled = p.layers_from != p.layers_to;
    sum.layers_from = p.layers_from;
    sum.layers_to = p.layers_to;
    sum.device_name = prop.name;
    sum.device_count = p.gpus;
    sum.cuda_driver = driver;
    sum.cudnn = static_cast<int64_t>(cudnn_runtime_version());
    sum.seq_length = p.s;
    sum.micro_batch_size = static_cast<int>(p.b);
    sum.micro_batches = p.micro_batches;
    sum.recompute = recompute_text(p.recompute);
    sum.seed = o.seed;
    sum.data = o.data;
    sum.model_flops_per_step = flops.per_step;
    sum.peak_flops = p.scenario.hardware.gpu.peak_bf16_flops;
    std::vector<RoutingRecord> routing;

    // The runner's own enqueue and sync costs (lcm compare predicts the run with them).
    sum.host = measure_host_costs(gemm, stream);

    EventRecorder rec;
    char pci[64] = {};
    LCM_CUDA_CHECK(cudaDeviceGetPCIBusId(pci, sizeof pci, 0));
    const ClockSampler clocks(pci);  // SM clock and power during each step (power cap)
    for (int step = start_step + 1; step <= o.steps; ++step) {
      const bool warmup = step - start_step <= o.warmup;
      for (int64_t mb = 0; mb < M; ++mb) data->next(p.b, p.s, h_tokens + mb * T, h_labels + mb * T);
      int64_t valid = 0;
      for (int64_t i = 0; i < M * T; ++i) {
        if (h_tokens[i] < 0 || h_tokens[i] >= p.vocab)
          throw ExecError("data: token id " + std::to_string(h_tokens[i]) + " outside the vocabulary");
        valid += h_labels[i] >= 0 ? 1 : 0;
      }
      const float grad_scale = valid > 0 ? 1.0f / static_cast<float>(valid) : 0.0f;
      const auto t0 = std::chrono::steady_clock::now();
      rec.begin_step(step, warmup, stream);
      LCM_CUDA_CHECK(cudaMemcpyAsync(tokens.get(), h_tokens, tokens.bytes(), cudaMemcpyHostToDevice, stream));
      LCM_CUDA_CHECK(cudaMemcpyAsync(labels.get(), h_labels, labels.bytes(), cudaMemcpyHostToDevice, stream));
      LCM_CUDA_CHECK(cudaMemsetAsync(scalars.get(), 0, scalars.bytes(), stream));
      model.zero_grads();
      std::vector<Model::CapturedRouting> routed;  // step 1 of a --dump: the MoE layers' assignments
      const bool dump_step = step == start_step + 1 && !dump.empty();
      model.capture_routing(dump_step && p.experts > 0 ? &routed : nullptr);
      for (int64_t mb = 0; mb < M; ++mb)
        model.micro_batch(tokens.get() + mb * T, labels.get() + mb * T, grad_scale, loss_rows.get() + mb * T,
                          scalars.get(), static_cast<int>(mb), &rec);
      model.capture_routing(nullptr);
      if (dump_step) {  // step-1 gradients, before clipping and the update
        LCM_CUDA_CHECK(cudaStreamSynchronize(stream));
        nlohmann::json idx = dump_tensors(model, model.grads(), dump, "grad");
        write_file_atomic((dump / "grads.json").string(), idx.dump(1));
        // routing.l<layer>.mb<micro-batch>.i32: [tokens, topk] expert ids, -1 where dropped.
        for (const Model::CapturedRouting& r : routed) {
          std::vector<int32_t> v = r.slots.expert;
          for (size_t i = 0; i < v.size(); ++i)
            if (!r.slots.kept[i]) v[i] = -1 - v[i];
          write_raw(dump / ("routing.l" + std::to_string(r.layer) + ".mb" + std::to_string(r.micro_batch) + ".i32"),
                    v.data(), v.size());
        }
      }
      AdamParams ap;
      ap.lr = learning_rate(o, step);
      ap.weight_decay = o.weight_decay;
      ap.step = step;
      model.optimizer_step(ap, o.clip_grad, scalars.get() + 1, &rec);
      LCM_CUDA_CHECK(cudaMemcpyAsync(h_out, loss_rows.get(), loss_rows.bytes(), cudaMemcpyDeviceToHost, stream));
      LCM_CUDA_CHECK(cudaMemcpyAsync(h_out + M * T, scalars.get(), 2 * sizeof(float), cudaMemcpyDeviceToHost, stream));
      LCM_CUDA_CHECK(cudaStreamSynchronize(stream));
      const auto t1 = std::chrono::steady_clock::now();
      const double seconds = std::chrono::duration<double>(t1 - t0).count();
      rec.resolve_step();
      double loss = 0;
      for (int64_t i = 0; i < M * T; ++i) loss += static_cast<double>(h_out[i]);  // fixed order: reproducible
      loss /= static_cast<double>(std::max<int64_t>(1, valid));
      const ClockSampler::Window cw = clocks.window(t0, t1);
      StepRecord r{step, seconds, loss, h_out[M * T + 1], h_out[M * T], M * T, warmup, cw.sm_mhz, cw.power_w};
      sum.steps.push_back(r);
      if (!warmup)
        for (const Model::Routing& mr : model.routing()) {
          auto it = std::find_if(routing.begin(), routing.end(), [&](const RoutingRecord& x) { return x.layer == mr.layer; });
          if (it == routing.end()) {
            routing.push_back({mr.layer, std::vector<int64_t>(mr.load.size()), std::vector<int64_t>(mr.kept.size())});
            it = routing.end() - 1;
          }
          for (size_t e = 0; e < mr.load.size() && e < it->load.size(); ++e) it->load[e] += mr.load[e];
          for (size_t e = 0; e < mr.kept.size() && e < it->kept.size(); ++e) it->kept[e] += mr.kept[e];
        }
      if (step == start_step + 1 && !dump.empty()) {
        write_raw(dump / "tokens.i32", h_tokens, static_cast<size_t>(M * T));
        write_raw(dump / "labels.i32", h_labels, static_cast<size_t>(M * T));
        float mscale = 1.0f;
        const std::vector<float> inv = rope_inv_freq(p.rope, p.rope_dim, &mscale);
        nlohmann::json cfg = {{"hidden", p.hidden},        {"heads", p.heads},       {"groups", p.groups},
                              {"head_dim", p.head_dim},    {"ffn", p.ffn},           {"vocab", p.vocab},
                              {"padded_vocab", p.padded_vocab}, {"layers", p.num_layers}, {"moe_layer", p.moe_layer},
                              {"seq", p.s},                {"micro_batch_size", p.b}, {"micro_batches", M},
                              {"tied_embeddings", p.tied_embeddings}, {"norm_eps", p.norm_eps},
                              {"softmax_scale", p.softmax_scale}, {"rope_inv_freq", inv}, {"rope_mscale", mscale},
                              {"loss", loss},              {"valid_tokens", valid}};
        cfg["qk_norm"] = p.qk_norm;
        if (p.mla)  // multi-latent attention's shapes (head_dim is qk_nope + qk_rope)
          cfg["mla"] = {{"q_lora", p.q_lora}, {"kv_lora", p.kv_lora}, {"qk_nope", p.qk_nope}, {"qk_rope", p.qk_rope},
                        {"v_dim", p.v_dim}};
        if (p.experts > 0) {  // what scripts/train_reference.py needs to rebuild the MoE layers
          const ModelSpec& md = p.scenario.model;
          const double cf = md.moe_expert_capacity_factor;
          cfg["moe"] = {{"experts", p.experts},
                        {"topk", p.topk},
                        {"expert_ffn", p.expert_ffn},
                        {"shared_ffn", p.shared_ffn},
                        {"score", md.moe_router_score_function == RouterScore::kSigmoid ? "sigmoid" : "softmax"},
                        {"groups", md.moe_router_num_groups},
                        {"group_topk", md.moe_router_group_topk},
                        {"expert_bias", md.moe_router_enable_expert_bias},
                        {"capacity_factor", cf},
                        // per micro-batch (lcm::capacity, Megatron's get_capacity); -1: dropless
                        {"capacity", cf > 0 ? lcm::capacity(p.tokens, p.topk, p.experts, cf) : int64_t{-1}},
                        {"drop_policy", "probs"},
                        {"pad_to_capacity", md.moe_pad_expert_input_to_capacity},
                        {"aux_loss_coeff", p.moe_aux_loss_coeff},
                        {"z_loss_coeff", p.moe_z_loss_coeff},
                        // step 1's aux + z losses summed over the MoE layers and micro-batches
                        {"aux_loss", h_out[M * T]}};
        }
        write_file_atomic((dump / "config.json").string(), cfg.dump(1));
      }
      if (tty)
        std::fprintf(stderr, "\rlcm-exec train: step %d/%d  loss %.4f  grad norm %.3f  %.3f s%s", step, o.steps, loss,
                     r.grad_norm, seconds, step == o.steps ? "\n" : "");
      if (!o.save_dir.empty() && (step == o.steps || (o.save_every > 0 && step % o.save_every == 0)))
        save_state(model, stream, o.save_dir, step, fingerprint, *data, o, save_host);
    }
    sum.routing = routing;
    sum.ops = rec.aggregates();
    const AllocatorStats& st = alloc.stats();
    sum.peak_allocated = st.peak_allocated;
    sum.peak_reserved = st.peak_reserved;
    sum.at_peak_by = st.at_peak_by;
    sum.context_bytes = context_bytes;
    sum.library_workspace_bytes = library_bytes;
    sum.finish();
    if (!o.out_dir.empty()) {
      fs::create_directories(o.out_dir);
      write_file_atomic((fs::path(o.out_dir) / "summary.json").string(), to_json(sum).dump(1));
      write_file_atomic((fs::path(o.out_dir) / "trace.rank0.json").string(),
                        rec.trace(0, std::string("rank 0 (") + prop.name + ")").dump());
    }
    std::printf("lcm-exec train: %d steps, median step %.4f s, %.0f tokens/s, MFU %.3f, peak allocated %.2f GiB\n",
                o.steps - start_step, sum.step_time_median, sum.tokens_per_s, sum.mfu,
                static_cast<double>(sum.peak_allocated) / (1 << 30));
    LCM_CUDA_CHECK(cudaFreeHost(h_tokens));
    LCM_CUDA_CHECK(cudaFreeHost(h_labels));
    LCM_CUDA_CHECK(cudaFreeHost(h_out));
  }
  LCM_CUDNN_CHECK(cudnnDestroy(cudnn));
  LCM_CUDA_CHECK(cudaStreamDestroy(stream));
  return rc;
}

}  // namespace lcm::exec::train
