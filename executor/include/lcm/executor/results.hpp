// Records and writers: one PointRecord per measured point; rank 0's ResultSink keeps
// summary.csv and summary.json (rewritten atomically after every point, so a run that
// dies keeps what it finished); every rank's TraceWriter keeps a Chrome Trace Event file.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "lcm/executor/timing.hpp"

namespace lcm::exec {

// Temp file in the same directory, fsync, rename: readers see the old or the new file.
void write_file_atomic(const std::string& path, std::string_view content);

struct PointRecord {
  std::string key;       // unique per point, e.g. "collectives/all_reduce/tp/float/1048576"
  std::string family;    // gemm | collectives | membw | attention
  std::string op;        // trace name, e.g. "bench.gemm.4096x4096x4096", "bench.allreduce.tp"
  std::string dtype;
  std::string shape;     // gemm: MxNxK; attention: BxSxHQxHKVxD
  std::string label;     // gemm: model GEMM name; membw: method
  int64_t size_bytes = 0;  // collectives: nccl-tests size; membw: bytes copied; gemm: A+B+D bytes
  int64_t count = 0;       // collectives: nccl-tests count (elements)
  std::string group;
  int group_size = 1;
  std::string collective;  // all_reduce, ...
  std::string redop;       // sum | none
  int root = -1;
  int warmup = 0, reps = 0, buffers = 1;
  TimeStats time;          // microseconds
  double tflops = 0;       // gemm, attention, at the median time
  double gbps = 0;         // membw: (read + write) bytes / median time, 1e9
  double algbw = 0, busbw = 0;  // collectives, GB/s (1e9), at the median time
  int64_t wrong = 0;
  int64_t checked = 0;
  bool correct = true;
  std::vector<double> per_rank_median_us;
  nlohmann::json extra = nlohmann::json::object();  // algo, clocks, notes
};

nlohmann::json to_json(const PointRecord& p);
PointRecord point_from_json(const nlohmann::json& j);
std::string csv_header();
std::string to_csv_row(const PointRecord& p);

class ResultSink {
 public:
  // dir empty: keep records in memory only. `run` holds system info and the command line.
  ResultSink(std::string dir, nlohmann::json run);
  // Loads dir/summary.json; keeps its correct points and returns their keys.
  std::set<std::string> load_resume();
  void add(const PointRecord& p);
  void set_status(const std::string& status, const nlohmann::json& failure = nullptr);
  void flush() const;
  const std::vector<PointRecord>& points() const { return points_; }

 private:
  std::string dir_;
  nlohmann::json run_;
  std::vector<PointRecord> points_;
};

// Chrome Trace Event Format (docs/reference/conventions.md §1.2): pid = rank, one tid per stream or
// communicator, ts/dur in microseconds from the run's start on rank 0's clock.
class TraceWriter {
 public:
  TraceWriter(int rank, int world, std::string process_name);
  void thread_name(int tid, const std::string& name);
  void complete(const std::string& name, const char* cat, int tid, double ts_us, double dur_us,
                nlohmann::json args = nlohmann::json::object());
  void instant(const std::string& name, const char* cat, int tid, double ts_us,
               nlohmann::json args = nlohmann::json::object());
  void set_distributed_info(nlohmann::json info) { distributed_ = std::move(info); }
  void set_other(const std::string& key, nlohmann::json v) { other_[key] = std::move(v); }
  std::string dump() const;
  void write(const std::string& path) const;

 private:
  int rank_;
  nlohmann::json events_ = nlohmann::json::array();
  nlohmann::json distributed_ = nlohmann::json::object();
  nlohmann::json other_ = nlohmann::json::object();
};

}  // namespace lcm::exec
