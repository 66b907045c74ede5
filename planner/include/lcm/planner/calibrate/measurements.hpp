// `lcm calibrate`'s inputs: measured op times (lcm-exec results, nccl-tests logs) read as
// the model's ops (model/calibration.hpp does the fitting; the reports of a fit are
// lcm/planner/report/calibration_report.hpp).
#pragma once

#include <string>
#include <vector>

#include "lcm/model/calibration.hpp"
#include "lcm/model/io/config_error.hpp"

namespace lcm::calib {


struct Measurements {
  std::vector<MeasuredOp> points;
  std::vector<std::string> skipped;  // "FILE: KEY: why" for points that cannot be used
  std::vector<std::string> files;    // files read
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

// Text parsers behind read_measurements (for tests).
io::Result<std::vector<MeasuredOp>> parse_exec_summary(const std::string& json_text, const std::string& file,
                                                       int gpus_per_node, std::vector<std::string>* skipped);
io::Result<std::vector<MeasuredOp>> parse_nccl_tests_log(const std::string& text, const std::string& file,
                                                         int gpus_per_node);

}  // namespace lcm::calib
