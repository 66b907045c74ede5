// `lcm calibrate`'s inputs: measured op times (lcm-exec results, nccl-tests logs) read as
// the model's ops (model/calibration.hpp does the fitting; the reports of a fit are
// lcm/planner/report/calibration_report.hpp).
#pragma once

#include <string>
#include <vector>

#include "lcm/model/calibration.hpp"
#include "lcm/model/io/config_error.hpp"

namespace lcm::calib {


// The GPU an lcm-exec summary says it ran on (its "system": gpu_name, sm_count, hbm_bytes).
struct MeasuredGpu {
  std::string file, name;
  int sm_count = 0;
  double hbm_bytes = 0;
};

struct Measurements {
  std::vector<MeasuredOp> points;
  std::vector<std::string> skipped;  // "FILE: KEY: why" for points that cannot be used
  std::vector<std::string> files;    // files read
  std::vector<MeasuredGpu> gpus;     // one per lcm-exec summary that names its GPU
};

// Reads one input and appends its points:
//  - "@LIST": every input named in the text file LIST, one per line ('#' comments; a
//    relative entry is found from the current directory, else from the directories above
//    LIST), e.g. @validation/measured/h200/calibration_inputs.txt;
//  - a directory: its summary.json (an lcm-exec results directory), else every lcm-exec
//    summary among the *.json files directly inside it (other JSON files are ignored);
//  - an lcm-exec summary JSON (summary.json or a copy of one): families gemm, attention,
//    collectives, membw and moe / cp-attention points that carry an op shape;
//  - an nccl-tests log, named explicitly (text: the "#  Rank ... on HOST" lines and the size/count/type/...
//    table; the collective comes from "Collective test starting: X_perf" or the file name).
// Points whose correctness check failed are skipped with a reason. `gpus_per_node`
// places ranks on nodes when a file names no hosts.
io::Result<bool> read_measurements(const std::string& path, int gpus_per_node, Measurements& out);

// One line per distinct GPU among `ms.gpus` whose SM count differs from the profile's or whose
// HBM size is more than 5 % away from it: fitting or scoring a profile on another part's
// measurements (an H100 profile on H200 points) is almost always a mistake, so lcm calibrate
// warns. Empty when every summary matches (or none names its GPU; nccl-tests logs do not).
std::vector<std::string> gpu_mismatches(const Measurements& ms, const HardwareSpec& hw);

// Text parsers behind read_measurements (for tests).
io::Result<std::vector<MeasuredOp>> parse_exec_summary(const std::string& json_text, const std::string& file,
                                                       int gpus_per_node, std::vector<std::string>* skipped);
io::Result<std::vector<MeasuredOp>> parse_nccl_tests_log(const std::string& text, const std::string& file,
                                                         int gpus_per_node);

}  // namespace lcm::calib
