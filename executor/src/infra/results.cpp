// Summary and trace writers (see results.hpp).
#include "lcm/executor/results.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "lcm/executor/error.hpp"

namespace lcm::exec {

void write_file_atomic(const std::string& path, std::string_view content) {
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw ExecError("cannot write " + tmp);
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t w = ::write(fd, content.data() + done, content.size() - done);
    if (w <= 0) {
      ::close(fd);
      ::unlink(tmp.c_str());
      throw ExecError("write failed: " + tmp);
    }
    done += static_cast<size_t>(w);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmp.c_str());
    throw ExecError("fsync/close failed: " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    throw ExecError("rename failed: " + tmp + " -> " + path);
  }
}

namespace {

nlohmann::json stats_json(const TimeStats& t) {
  return {{"n", t.n},           {"median", t.median_us}, {"min", t.min_us}, {"max", t.max_us},
          {"mean", t.mean_us},  {"p10", t.p10_us},       {"p90", t.p90_us}, {"stdev", t.stdev_us}};
}

TimeStats stats_from(const nlohmann::json& j) {
  TimeStats t;
  t.n = j.value("n", 0);
  t.median_us = j.value("median", 0.0);
  t.min_us = j.value("min", 0.0);
  t.max_us = j.value("max", 0.0);
  t.mean_us = j.value("mean", 0.0);
  t.p10_us = j.value("p10", 0.0);
  t.p90_us = j.value("p90", 0.0);
  t.stdev_us = j.value("stdev", 0.0);
  return t;
}

}  // namespace

nlohmann::json to_json(const PointRecord& p) {
  nlohmann::json j = {
      {"key", p.key},     {"family", p.family}, {"op", p.op},         {"dtype", p.dtype},
      {"warmup", p.warmup}, {"reps", p.reps},   {"buffers", p.buffers}, {"time_us", stats_json(p.time)},
      {"wrong", p.wrong}, {"checked", p.checked}, {"correct", p.correct},
      {"per_rank_median_us", p.per_rank_median_us}, {"extra", p.extra},
  };
  if (p.family == "gemm" || p.family == "attention") {
    j["shape"] = p.shape;
    j["label"] = p.label;
    j["bytes"] = p.size_bytes;
    j["tflops"] = p.tflops;
  } else if (p.family == "moe" || p.family == "cp-attention") {
    j["shape"] = p.shape;  // moe: the layer config; cp-attention: BxSxHQxHKVxD
    j["label"] = p.label;  // moe: the point (config, capacity, skew); cp-attention: shape label + cp
    j["group"] = p.group;
    j["group_size"] = p.group_size;
    j["bytes"] = p.size_bytes;
    j["tflops"] = p.tflops;
  } else if (p.family == "membw") {
    j["method"] = p.label;
    j["size"] = p.size_bytes;
    j["gbps"] = p.gbps;
  } else if (p.family == "collectives") {
    // nccl-tests' printed columns under their own names, then its -J "out_of_place" block.
    j["collective"] = p.collective;
    j["group"] = p.group;
    j["group_size"] = p.group_size;
    j["size"] = p.size_bytes;
    j["count"] = p.count;
    j["type"] = p.dtype;
    j["redop"] = p.redop;
    j["root"] = p.root;
    j["time"] = p.time.median_us;
    j["algbw"] = p.algbw;
    j["busbw"] = p.busbw;
    j["#wrong"] = p.wrong;
    j["out_of_place"] = {{"time", p.time.median_us}, {"alg_bw", p.algbw}, {"bus_bw", p.busbw}, {"nwrong", p.wrong}};
  }
  return j;
}

PointRecord point_from_json(const nlohmann::json& j) {
  PointRecord p;
  p.key = j.value("key", "");
  p.family = j.value("family", "");
  p.op = j.value("op", "");
  p.dtype = j.value("dtype", "");
  p.warmup = j.value("warmup", 0);
  p.reps = j.value("reps", 0);
  p.buffers = j.value("buffers", 1);
  if (j.contains("time_us")) p.time = stats_from(j["time_us"]);
  p.wrong = j.value("wrong", int64_t{0});
  p.checked = j.value("checked", int64_t{0});
  p.correct = j.value("correct", false);
  p.per_rank_median_us = j.value("per_rank_median_us", std::vector<double>{});
  p.extra = j.value("extra", nlohmann::json::object());
  p.shape = j.value("shape", "");
  p.label = j.contains("method") ? j.value("method", "") : j.value("label", "");
  p.size_bytes = j.contains("bytes") ? j.value("bytes", int64_t{0}) : j.value("size", int64_t{0});
  p.tflops = j.value("tflops", 0.0);
  p.gbps = j.value("gbps", 0.0);
  p.collective = j.value("collective", "");
  p.group = j.value("group", "");
  p.group_size = j.value("group_size", 1);
  p.count = j.value("count", int64_t{0});
  p.redop = j.value("redop", "");
  p.root = j.value("root", -1);
  p.algbw = j.value("algbw", 0.0);
  p.busbw = j.value("busbw", 0.0);
  return p;
}

std::string csv_header() {
  return "family,op,key,label,dtype,shape,size_bytes,count,group,group_size,warmup,reps,buffers,"
         "time_us_median,time_us_min,time_us_max,time_us_p10,time_us_p90,tflops,gbps,algbw_GBps,busbw_GBps,"
         "wrong,checked,correct\n";
}

std::string to_csv_row(const PointRecord& p) {
  std::ostringstream o;
  o.precision(6);
  o << p.family << ',' << p.op << ',' << p.key << ',' << p.label << ',' << p.dtype << ',' << p.shape << ','
    << p.size_bytes << ',' << p.count << ',' << p.group << ',' << p.group_size << ',' << p.warmup << ','
    << p.reps << ',' << p.buffers << ',' << p.time.median_us << ',' << p.time.min_us << ',' << p.time.max_us
    << ',' << p.time.p10_us << ',' << p.time.p90_us << ',' << p.tflops << ',' << p.gbps << ',' << p.algbw
    << ',' << p.busbw << ',' << p.wrong << ',' << p.checked << ',' << (p.correct ? "true" : "false") << '\n';
  return o.str();
}

ResultSink::ResultSink(std::string dir, nlohmann::json run) : dir_(std::move(dir)), run_(std::move(run)) {
  if (!dir_.empty()) std::filesystem::create_directories(dir_);
  run_["status"] = "incomplete";
}

std::set<std::string> ResultSink::load_resume() {
  std::set<std::string> keys;
  if (dir_.empty()) return keys;
  std::ifstream in(dir_ + "/summary.json");
  if (!in) return keys;
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception& e) {
    throw ExecError("--resume: " + dir_ + "/summary.json is not valid JSON: " + e.what());
  }
  for (const auto& pj : j.value("points", nlohmann::json::array())) {
    PointRecord p = point_from_json(pj);
    if (!p.correct || p.key.empty() || keys.count(p.key)) continue;
    keys.insert(p.key);
    p.extra["resumed"] = true;
    points_.push_back(std::move(p));
  }
  return keys;
}

void ResultSink::add(const PointRecord& p) {
  points_.push_back(p);
  flush();
}

void ResultSink::set_status(const std::string& status, const nlohmann::json& failure) {
  run_["status"] = status;
  if (!failure.is_null()) run_["failure"] = failure;
  flush();
}

void ResultSink::flush() const {
  if (dir_.empty()) return;
  nlohmann::json j = run_;
  j["points"] = nlohmann::json::array();
  std::string csv = csv_header();
  for (const PointRecord& p : points_) {
    j["points"].push_back(to_json(p));
    csv += to_csv_row(p);
  }
  write_file_atomic(dir_ + "/summary.json", j.dump(1) + "\n");
  write_file_atomic(dir_ + "/summary.csv", csv);
}

TraceWriter::TraceWriter(int rank, int world, std::string process_name) : rank_(rank) {
  events_.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", rank}, {"tid", 0}, {"args", {{"name", process_name}}}});
  events_.push_back({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", rank}, {"tid", 0}, {"args", {{"sort_index", rank}}}});
  distributed_ = {{"backend", "nccl"}, {"rank", rank}, {"world_size", world}};
}

void TraceWriter::thread_name(int tid, const std::string& name) {
  events_.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", rank_}, {"tid", tid}, {"args", {{"name", name}}}});
}

void TraceWriter::complete(const std::string& name, const char* cat, int tid, double ts_us, double dur_us,
                           nlohmann::json args) {
  events_.push_back({{"name", name}, {"cat", cat}, {"ph", "X"}, {"pid", rank_}, {"tid", tid},
                     {"ts", ts_us}, {"dur", dur_us}, {"args", std::move(args)}});
}

void TraceWriter::instant(const std::string& name, const char* cat, int tid, double ts_us, nlohmann::json args) {
  events_.push_back({{"name", name}, {"cat", cat}, {"ph", "i"}, {"s", "p"}, {"pid", rank_}, {"tid", tid},
                     {"ts", ts_us}, {"args", std::move(args)}});
}

std::string TraceWriter::dump() const {
  const nlohmann::json j = {{"traceEvents", events_},
                            {"displayTimeUnit", "ms"},
                            {"distributedInfo", distributed_},
                            {"otherData", other_}};
  return j.dump() + "\n";
}

void TraceWriter::write(const std::string& path) const { write_file_atomic(path, dump()); }

}  // namespace lcm::exec
