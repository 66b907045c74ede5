#!/usr/bin/env python3
"""Mutation check of the step-time composition rules (docs/time-model.md, "Composition rules").

Breaks each rule of model/src/step_time.cpp (and kernel_fixed in timing.cpp; the host syncs of
schedule_gen.hpp and the node de-duplication of comm.cpp / timing.cpp) in turn, rebuilds
lcm_model_tests in ./build, runs the step-time tests and prints which tests caught it; every
mutation must be CAUGHT. Each file is restored after its mutation. Run from the repository root
on a tree with no local edits to those files:  python3 scripts/step_time_mutations.py [M01 ...]
"""
import os
import re
import subprocess
import sys

root = os.getcwd()
ST = 'model/src/step_time.cpp'
TM = 'model/src/timing.cpp'
SG = 'model/src/schedule_gen.hpp'
CM = 'model/src/comm.cpp'
M = [
 ("M01 pass: ignore Op::calls", ST, "const double t = op_time(op, topo, hw) * op.calls;", "const double t = op_time(op, topo, hw);"),
 ("M02 class: attention counted memory-bound", ST, "case OpKind::kAttention: return OpClass::kAttention;", "case OpKind::kAttention: return OpClass::kMemoryBound;"),
 ("M03 CP ring hides under attention+GEMM", ST, "std::max(0.0, cp_overlappable - attn);\n  hidden[idx(CommDim::kCp)] += std::min(cp_overlappable, attn);", "std::max(0.0, cp_overlappable - attn - gemm);\n  hidden[idx(CommDim::kCp)] += std::min(cp_overlappable, attn + gemm);"),
 ("M04 TP last chunk also for all-gather", ST, "if (op.coll.dim == CommDim::kTp && op.coll.kind != Collective::kAllGather)", "if (op.coll.dim == CommDim::kTp)"),
 ("M05 TP no last chunk", ST, "std::max(0.0, before - tp_last_chunks)", "std::max(0.0, before)"),
 ("M06 TP last chunk 1/(2tp)", ST, "tp_last_chunks += t / std::max(1, op.coll.group_size);", "tp_last_chunks += t / std::max(1, 2 * op.coll.group_size);"),
 ("M07 TP budget = all compute", ST, "hide(CommDim::kTp, std::min(gemm,", "hide(CommDim::kTp, std::min(total_compute,"),
 ("M08 EP budget = GEMM only", ST, "hide(CommDim::kEp, total_compute);", "hide(CommDim::kEp, gemm);"),
 ("M09 SM fraction 8/132", ST, "constexpr double kCommSmFraction = 16.0 / 132.0;", "constexpr double kCommSmFraction = 8.0 / 132.0;"),
 ("M10 contention also charged for hidden CP", ST, "(hidden[idx(CommDim::kTp)] + hidden[idx(CommDim::kEp)]);", "(hidden[idx(CommDim::kTp)] + hidden[idx(CommDim::kEp)] + hidden[idx(CommDim::kCp)]);"),
 ("M11 contention charged to attention", ST, "compute[static_cast<size_t>(OpClass::kGemm)] += contention;", "compute[static_cast<size_t>(OpClass::kAttention)] += contention;"),
 ("M12 contention not in total", ST, "  total_compute += contention;\n", "\n"),
 ("M13 kernel_fixed once per grouped GEMM", TM, "hw.efficiency.kernel_fixed * static_cast<double>(std::max(1, g.groups));", "hw.efficiency.kernel_fixed;"),
 ("M14 no kernel_fixed on memory-bound ops", TM, "return bytes / (hw.gpu.hbm_bw * hw.efficiency.hbm) + hw.efficiency.kernel_fixed;", "return bytes / (hw.gpu.hbm_bw * hw.efficiency.hbm);"),
 ("M15 stage: MTP recompute for every depth", ST, "add(b, in.mtp->recompute, st.mtp_recomputed);", "add(b, in.mtp->recompute, st.mtp);"),
 ("M16 stage: MoE recompute for every layer", ST, "add(b, in.moe->recompute, st.moe_recomputed);", "add(b, in.moe->recompute, st.moe);"),
 ("M17 stage: dense recompute dropped", ST, "add(b, in.dense->recompute, st.dense_recomputed);", ""),
 ("M18 stage: post_fwd dropped", ST, "add(f, *st.post_fwd, 1);", ""),
 ("M19 stage: pre_bwd dropped", ST, "add(b, *st.pre_bwd, 1);", ""),
 ("M20 vp: p2p never hidden", ST, "if (in.vp > 1) {", "if (in.vp > 1000) {"),
 ("M21 EP: no unpaired all-to-alls", ST, "const double unpaired = p->hidden[idx(CommDim::kEp)] / mb;", "const double unpaired = 0 * p->hidden[idx(CommDim::kEp)] / mb;"),
 ("M22 EP: unpaired share 1/(2m)", ST, "const double unpaired = p->hidden[idx(CommDim::kEp)] / mb;", "const double unpaired = p->hidden[idx(CommDim::kEp)] / (2 * mb);"),
 ("M23 step op roles: all-gather under backward", ST, "else if (op.coll.kind != Collective::kAllGather ||", "else if (true ||"),
 ("M23b step op roles: ZeRO-3 backward re-gather under forward", ST, "op.id == OpId::kDpParamsAllGatherBwd ||", "op.id == OpId::kNone ||"),
 ("M24 step op time ignores calls", ST, "t.time = op_time(op, topo, hw) * op.calls;", "t.time = op_time(op, topo, hw);"),
 ("M25 DP window ignores calls", ST, "const double window = (grads ? t.bwd : t.fwd) * std::max(1, op.calls);", "const double window = (grads ? t.bwd : t.fwd);"),
 ("M26 DP window fwd/bwd swapped", ST, "(grads ? t.bwd : t.fwd)", "(grads ? t.fwd : t.bwd)"),
 ("M27 DP no last bucket", ST, "const double tail = tt / layers_here;", "const double tail = 0 * tt / layers_here;"),
 ("M28 DP last bucket over all layers incl. none", ST, "const int layers_here = std::max(1, st.dense + st.moe);", "const int layers_here = std::max(1, st.dense + st.moe + 1);"),
 ("M29 fill not shrunk by vp", ST, "const double fill = (sum_fb - fb_max) / std::max(1, in.vp);", "const double fill = (sum_fb - fb_max);"),
 ("M30 fill sums distinct inputs only", ST, "for (int k = 0; k < run; ++k) sum_fb += res->fb;", "sum_fb += res->fb;"),
 ("M31 score ignores per-step time", ST, "r.score = r.fb + (r.dp_exposed + r.opt) / std::max(1, in.num_micro_batches);", "r.score = r.fb;"),
 ("M32 ties: last rank is the bottleneck", ST, "if (res->score > worst) {", "if (res->score >= worst) {"),
 ("M33 overflow slot always the first", ST, "StageResult* slot = bn_result == &overflow[0] ? &overflow[1] : &overflow[0];", "StageResult* slot = &overflow[0];"),
 ("M34 step without optimizer", ST, "out.step_s = out.pipeline + out.dp_exposed + out.optimizer + step_sync;", "out.step_s = out.pipeline + out.dp_exposed + step_sync;"),
 ("M35 DP term without dp_exposed", ST, "out.exposed_comm[idx(CommDim::kDp)] += out.dp_exposed;", ""),
 ("M36 compute per step not x m", ST, "out.compute[i] = mb * bn.compute[i];", "out.compute[i] = bn.compute[i];"),
 ("M37 MFU from hardware FLOPs", ST, "out.mfu = flops.model_flops", "out.mfu = flops.hardware_flops"),
 ("M38 precomputed micro-batch time ignored", ST, "if (st.microbatch_time) return stage_result(*st.microbatch_time, st, in);", ""),
 ("M39 step_time ignores mesh vp", ST, "in.vp = m.vp;", "in.vp = 1;"),
 # Host-bound regime (issue 12): kernel enqueue, synchronisations, segments.
 ("H01 host: one kernel per op", ST, "out.kernels += host_kernels(op);", "out.kernels += 1;"),
 ("H02 host: syncs not counted", ST, "out.syncs += op.host_syncs * op.calls;", "out.syncs += 0 * op.host_syncs;"),
 ("H03 host: sync idle without launch latency", ST, "out.syncs * (hw.host.sync + hw.host.launch_latency)", "out.syncs * hw.host.sync"),
 ("H04 host: no per-layer Python", ST, "if (t.fwd.total > 0 || t.fwd.host > 0) t.fwd.host += over_fwd;", ";"),
 ("H13 host: a selective recompute re-runs the whole layer's Python", ST, "t.recompute.host += h.layer_overhead_fwd * share + (routes(l.recompute) ? h.moe_overhead_fwd : 0.0);", "t.recompute.host += over_fwd;"),
 ("H11 host: backward takes the forward's Python", ST, "if (t.bwd.total > 0 || t.bwd.host > 0) t.bwd.host += over_bwd;", "if (t.bwd.total > 0 || t.bwd.host > 0) t.bwd.host += over_fwd;"),
 ("H12 host: an MoE layer has a dense layer's Python", ST, "const double over_fwd = h.layer_overhead_fwd + (moe ? h.moe_overhead_fwd : 0.0);", "const double over_fwd = h.layer_overhead_fwd;"),
 ("H05 host: repeated synced layers never host-bound", ST, "(times - 1) * std::max(0.0, p.host - p.total)", "(times - 1) * 0.0"),
 ("H06 host: last segment not joined with the first", ST, "std::max(0.0, (host_ + first_host_) - (gpu_ + first_gpu_))", "std::max(0.0, host_ - gpu_)"),
 ("H07 host: sync round trip not idle", ST, " + times * p.sync_idle;", ";"),
 ("H08 host: no closing sync per step", ST, "const double step_sync = hw.host.sync + hw.host.launch_latency;", "const double step_sync = 0;"),
 ("H09 host: all idle in the forward", ST, "f.total += idle_fwd;\n  b.total += idle_bwd;", "f.total += idle_fwd + idle_bwd;"),
 ("H10 host: GPU-bound segments idle too", ST, "else {\n      idle_ += std::max(0.0, host - gpu);", "else {\n      idle_ += std::abs(host - gpu);"),
 ("S01 sync: alltoall pad ignored", SG, "case Dispatcher::kAllToAll: return !md.moe_pad_expert_input_to_capacity;", "case Dispatcher::kAllToAll: return true;"),
 ("S02 sync: DeepEP like HybridEP", SG, "md.moe_flex_dispatcher_backend == FlexBackend::kDeepEp ||", "false ||"),
 ("S03 sync: backward keeps the forward's sync", SG, "  o.host_syncs = 0;  // the backward reuses", "  // the backward reuses"),
 # DeepEP / HybridEP node de-duplication (issue 12).
 ("D01 dedup: NIC copy per destination rank", CM, ".nic_bytes = token_bytes * (nodes - 1) * node_hit_probability(c.dedup, nodes)}", ".nic_bytes = c.message_bytes * (nodes - 1) / nodes}"),
 ("D02 dedup: group-limited routing ignored", CM, "if (G <= 0 || gt <= 0 || gt >= G ||", "if (true ||"),
 ("D03 dedup: one chosen group per node at most", CM, "for (int j = 1; j <= std::min(g, gt); ++j)", "for (int j = 1; j <= 1; ++j)"),
 ("D04 dedup: no NVLink forwarding", CM, ".nvlink_bytes = c.message_bytes * (r - 1.0) / r", ".nvlink_bytes = c.message_bytes * (r - 1.0) / (nodes * r)"),
 ("D05 dedup: hook off", TM, "if (c.dedup.dest_ranks > 0 && !intra) {", "if (false) {"),
 ("M40 step_time: post_bwd list times pre_bwd", ST, "pass_time(st.post_bwd, par, topo, hw), pass_time(st.pre_bwd, par, topo, hw)}", "pass_time(st.pre_bwd, par, topo, hw), pass_time(st.pre_bwd, par, topo, hw)}"),
]
only = sys.argv[1:]
for name, f, old, new in M:
    if only and name.split()[0] not in only: continue
    path = os.path.join(root, f)
    orig = open(path).read()
    n = orig.count(old)
    if n != 1:
        print(f"{name}: pattern found {n} times, skipped", flush=True); continue
    open(path, 'w').write(orig.replace(old, new))
    try:
        b = subprocess.run(['cmake', '--build', 'build', '-j2', '--target', 'lcm_model_tests'], cwd=root, capture_output=True, text=True)
        if b.returncode != 0:
            print(f"{name}: BUILD FAILED\n{b.stdout[-2000:]}", flush=True); continue
        r = subprocess.run(['./build/bin/lcm_model_tests', '--gtest_filter=StepTimeRules*:StepTime.*:TimingGemm*:NodeDedup.*:HostSyncs.*'], cwd=root, capture_output=True, text=True)
        failed = sorted(set(re.findall(r'^\[  FAILED  \] ([A-Za-z]\S+)', r.stdout, re.M)))
        print(f"{name}: {'CAUGHT' if failed else 'NOT CAUGHT'} {' '.join(failed)}", flush=True)
    finally:
        open(path, 'w').write(orig)
# Leave the build matching the restored sources.
subprocess.run(['cmake', '--build', 'build', '-j2', '--target', 'lcm_model_tests'], cwd=root, capture_output=True)
