// Host tests of the training runner's atomic checkpoints (lcm/executor/train/checkpoint.hpp):
// round trip, the checksum against an independent reference, corruption and truncation
// detected, the recovery rule on hand-made crash states, and saves killed with SIGKILL at
// random moments that always leave a complete checkpoint (the old one or the new one).
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "lcm/executor/error.hpp"
#include "lcm/executor/train/checkpoint.hpp"

namespace lcm::exec::train {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    static int count = 0;
    path_ = fs::temp_directory_path() /
            ("lcm_train_ckpt_" + std::to_string(::getpid()) + "_" + info->name() + "_" + std::to_string(count++));
    fs::remove_all(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// The blobs of "step" s: two buffers whose bytes depend on s (one of an odd size, so the
// checksum's last word is partial) and an empty one.
struct StepData {
  std::vector<unsigned char> weights, optimizer;
  explicit StepData(int64_t s) : weights(100003), optimizer(4096) {
    for (size_t i = 0; i < weights.size(); ++i) weights[i] = static_cast<unsigned char>(s * 131 + i * 7);
    for (size_t i = 0; i < optimizer.size(); ++i) optimizer[i] = static_cast<unsigned char>(s + i / 16);
  }
  std::vector<CheckpointBlob> blobs() const {
    return {{"weights", weights.data(), weights.size()},
            {"optimizer.m", optimizer.data(), optimizer.size()},
            {"empty", nullptr, 0}};
  }
};

void save_step(const fs::path& dir, int64_t s) {
  const StepData d(s);
  save_checkpoint(dir, {{"step", s}, {"data", {{"source", "copy"}, {"sequences", 8 * s}}}}, d.blobs());
}

std::vector<unsigned char> as_uchar(const std::vector<std::byte>& b) {
  std::vector<unsigned char> out(b.size());
  if (!b.empty()) std::memcpy(out.data(), b.data(), b.size());
  return out;
}

// The step of the loaded checkpoint, after checking that its blobs are exactly that step's.
int64_t loaded_step(const fs::path& dir) {
  const auto c = load_checkpoint(dir);
  if (!c) return -1;
  const int64_t s = c->meta.at("step").get<int64_t>();
  const StepData d(s);
  EXPECT_EQ(c->meta["data"]["sequences"], 8 * s);
  EXPECT_EQ(c->blobs.size(), 3u);
  EXPECT_EQ(as_uchar(c->blobs.at("weights")), d.weights);
  EXPECT_EQ(as_uchar(c->blobs.at("optimizer.m")), d.optimizer);
  EXPECT_TRUE(c->blobs.at("empty").empty());
  return s;
}

std::vector<std::string> entries(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::string exec_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const ExecError& e) {
    return e.what();
  }
  return "(no ExecError)";
}

TEST(CheckpointChecksum, MatchesAnIndependentReferenceAndSeesEverySingleByteChange) {
  // Values from a Python transcription of lcm-mx64 (arbitrary-precision integers masked to 64 bits).
  EXPECT_EQ(checkpoint_checksum("", 0), 0x02ae0ee39bf6040aull);
  EXPECT_EQ(checkpoint_checksum("lcm", 3), 0x88d80aaaa8022dbfull);
  EXPECT_EQ(checkpoint_checksum("checkpoint", 10), 0x6a55742a8fefcc37ull);
  unsigned char seq[17];
  for (int i = 0; i < 17; ++i) seq[i] = static_cast<unsigned char>(i);
  EXPECT_EQ(checkpoint_checksum(seq, 17), 0x3d3ee67d6818200bull);
  EXPECT_NE(checkpoint_checksum("lcm\0", 4), checkpoint_checksum("lcm", 3));  // the length seeds it
  std::vector<unsigned char> buf(64, 0x5a);
  const uint64_t base = checkpoint_checksum(buf.data(), buf.size());
  for (size_t i = 0; i < buf.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      buf[i] ^= static_cast<unsigned char>(1 << bit);
      EXPECT_NE(checkpoint_checksum(buf.data(), buf.size()), base) << "byte " << i << " bit " << bit;
      buf[i] ^= static_cast<unsigned char>(1 << bit);
    }
  }
}

TEST(Checkpoint, RoundTripsMetaAndBlobsAndWritesTheDocumentedManifest) {
  TempDir dir;
  EXPECT_FALSE(load_checkpoint(dir.path()).has_value());  // no directory at all
  save_step(dir.path(), 7);
  EXPECT_EQ(loaded_step(dir.path()), 7);
  EXPECT_EQ(entries(dir.path()), std::vector<std::string>{"checkpoint"});
  EXPECT_EQ(entries(dir.path() / "checkpoint"),
            (std::vector<std::string>{"empty.bin", "manifest.json", "optimizer.m.bin", "weights.bin"}));
  std::ifstream mf(dir.path() / "checkpoint" / "manifest.json");
  const nlohmann::json m = nlohmann::json::parse(mf);
  EXPECT_EQ(m["format"], "lcm-exec-checkpoint/1");
  EXPECT_EQ(m["checksum"], "lcm-mx64");
  EXPECT_EQ(m["meta"]["step"], 7);
  ASSERT_EQ(m["blobs"].size(), 3u);
  EXPECT_EQ(m["blobs"][0]["name"], "weights");
  EXPECT_EQ(m["blobs"][0]["file"], "weights.bin");
  EXPECT_EQ(m["blobs"][0]["bytes"], 100003);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(checkpoint_checksum(StepData(7).weights.data(), 100003)));
  EXPECT_EQ(m["blobs"][0]["checksum"], hex);
  EXPECT_EQ(m["blobs"][2]["bytes"], 0);
  save_step(dir.path(), 8);  // replaces it; the old one is gone
  EXPECT_EQ(loaded_step(dir.path()), 8);
  EXPECT_EQ(entries(dir.path()), std::vector<std::string>{"checkpoint"});
}

TEST(Checkpoint, RejectsBadBlobNames) {
  TempDir dir;
  const char x = 1;
  EXPECT_NE(exec_error([&] {
              save_checkpoint(dir.path(), {}, {{"a/b", &x, 1}});
            }).find("'a/b': expected"),
            std::string::npos);
  EXPECT_NE(exec_error([&] { save_checkpoint(dir.path(), {}, {{"", &x, 1}}); }).find("expected"), std::string::npos);
  EXPECT_NE(exec_error([&] {
              save_checkpoint(dir.path(), {}, {{"manifest", &x, 1}});
            }).find("not 'manifest'"),
            std::string::npos);
  EXPECT_NE(exec_error([&] {
              save_checkpoint(dir.path(), {}, {{"a", &x, 1}, {"a", &x, 1}});
            }).find("given twice"),
            std::string::npos);
}

TEST(Checkpoint, CorruptTruncatedOrMissingFilesAreErrorsNamingTheFile) {
  TempDir dir;
  const fs::path ck = dir.path() / "checkpoint", w = ck / "weights.bin", m = ck / "manifest.json";
  const auto fresh = [&] {
    fs::remove_all(dir.path());
    save_step(dir.path(), 3);
  };
  const auto load_error = [&] { return exec_error([&] { load_checkpoint(dir.path()); }); };
  fresh();
  {  // one flipped byte in the middle of the weights
    std::fstream f(w, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(50000);
    const char c = static_cast<char>(StepData(3).weights[50000] ^ 0x10);
    f.write(&c, 1);
  }
  const std::string flipped = load_error();
  EXPECT_EQ(flipped.rfind(w.string() + ": checksum mismatch: manifest.json says ", 0), 0u) << flipped;
  EXPECT_NE(flipped.find("(corrupt file)"), std::string::npos);
  fresh();
  fs::resize_file(w, 100002);
  EXPECT_EQ(load_error(), w.string() + ": truncated or extended: manifest.json says 100003 bytes, the file has 100002");
  fresh();
  { std::ofstream(w, std::ios::app) << 'x'; }
  EXPECT_EQ(load_error(), w.string() + ": truncated or extended: manifest.json says 100003 bytes, the file has 100004");
  fresh();
  fs::remove(w);
  EXPECT_EQ(load_error(), w.string() + ": missing (listed in manifest.json)");
  fresh();
  fs::remove(m);
  EXPECT_EQ(load_error(), m.string() + ": missing (an incomplete checkpoint directory)");
  fresh();
  { std::ofstream(m) << "{\"format\": \"lcm-exec-checkpoint/1\", "; }
  EXPECT_EQ(load_error().rfind(m.string() + ": not valid JSON: ", 0), 0u);
  fresh();
  { std::ofstream(m) << R"({"format": "lcm-exec-checkpoint/2", "checksum": "lcm-mx64", "blobs": []})"; }
  EXPECT_EQ(load_error(), m.string() + ": expected format \"lcm-exec-checkpoint/1\" with checksum \"lcm-mx64\"");
  fresh();
  {
    std::ofstream(m)
        << R"({"format": "lcm-exec-checkpoint/1", "checksum": "lcm-mx64", "blobs": [{"name": "weights"}]})";
  }
  EXPECT_EQ(load_error().rfind(m.string() + ": a blob entry: expected name, file, bytes and checksum", 0), 0u);
}

// The crash states a killed save can leave, built by hand; load picks the complete
// checkpoint and the next save cleans up.
TEST(Checkpoint, StaleTmpDirectoryIsIgnoredAndRemovedByTheNextSave) {
  TempDir dir;
  save_step(dir.path(), 1);
  const fs::path tmp = dir.path() / "checkpoint.tmp-99999";
  fs::create_directories(tmp);
  { std::ofstream(tmp / "weights.bin") << "half written"; }
  EXPECT_EQ(loaded_step(dir.path()), 1);
  save_step(dir.path(), 2);
  EXPECT_EQ(loaded_step(dir.path()), 2);
  EXPECT_EQ(entries(dir.path()), std::vector<std::string>{"checkpoint"});
}

TEST(Checkpoint, KilledBetweenTheTwoRenamesLoadsTheOldCheckpoint) {
  TempDir dir, other;
  save_step(dir.path(), 1);
  save_step(other.path(), 2);
  // The old checkpoint renamed away, the new one complete but still in its tmp directory.
  fs::rename(dir.path() / "checkpoint", dir.path() / "checkpoint.old");
  fs::rename(other.path() / "checkpoint", dir.path() / "checkpoint.tmp-4242");
  EXPECT_EQ(loaded_step(dir.path()), 1);
  save_step(dir.path(), 3);
  EXPECT_EQ(loaded_step(dir.path()), 3);
  EXPECT_EQ(entries(dir.path()), std::vector<std::string>{"checkpoint"});
  // Killed between the renames again, the tmp directory already removed: checkpoint.old is read.
  fs::rename(dir.path() / "checkpoint", dir.path() / "checkpoint.old");
  EXPECT_EQ(loaded_step(dir.path()), 3);
}

TEST(Checkpoint, KilledWhileRemovingTheOldCheckpointLoadsTheNewOne) {
  TempDir dir, other;
  save_step(dir.path(), 2);
  save_step(other.path(), 1);
  fs::rename(other.path() / "checkpoint", dir.path() / "checkpoint.old");
  fs::remove(dir.path() / "checkpoint.old" / "manifest.json");  // partly removed
  fs::remove(dir.path() / "checkpoint.old" / "weights.bin");
  EXPECT_EQ(loaded_step(dir.path()), 2);
  save_step(dir.path(), 3);
  EXPECT_EQ(loaded_step(dir.path()), 3);
  EXPECT_EQ(entries(dir.path()), std::vector<std::string>{"checkpoint"});
}

// A child process saves steps in a loop and is killed with SIGKILL after a random delay (up
// to 2.5 times what a child takes from fork to its first save done, timed here: fsync makes a
// save take milliseconds to tens of them, and under AddressSanitizer the fork itself costs as
// much again); the parent then loads: there is always a complete checkpoint, its step never
// goes back, and its blobs are exactly that step's.
TEST(Checkpoint, SavesKilledAtRandomMomentsAlwaysLeaveACompleteCheckpoint) {
  TempDir dir;
  const auto t0 = std::chrono::steady_clock::now();
  for (int s = 0; s < 4; ++s) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      try {
        save_step(dir.path(), 0);
      } catch (...) {
        ::_exit(3);
      }
      ::_exit(0);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a save failed";
  }
  const auto save_us =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count() / 4;
  std::mt19937 rng(20240611);
  int64_t step = 0;
  int progressed = 0, mid_swap = 0, with_tmp = 0;
  constexpr int kKills = 80;
  for (int iter = 0; iter < kKills; ++iter) {
    const int64_t first = step + 1;
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      try {
        for (int64_t s = first;; ++s) save_step(dir.path(), s);
      } catch (...) {}
      ::_exit(3);
    }
    ::usleep(static_cast<useconds_t>(rng() % static_cast<uint32_t>(save_us * 5 / 2 + 1)));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the child stopped by itself: a save failed";
    mid_swap += !fs::exists(dir.path() / "checkpoint") ? 1 : 0;
    for (const auto& e : fs::directory_iterator(dir.path()))
      with_tmp += e.path().filename().string().rfind("checkpoint.tmp-", 0) == 0 ? 1 : 0;
    const int64_t s = loaded_step(dir.path());
    ASSERT_GE(s, step) << "iteration " << iter;
    progressed += s > step ? 1 : 0;
    step = s;
  }
  std::printf(
      "[          ] fork and a save take %lld us; %d kills: %d made progress, %d left a tmp directory, %d hit "
      "between the renames\n",
      static_cast<long long>(save_us), kKills, progressed, with_tmp, mid_swap);
  EXPECT_GT(progressed, 0);
  EXPECT_GT(with_tmp, 0) << "no kill landed inside a save";
  save_step(dir.path(), step + 1);
  EXPECT_EQ(loaded_step(dir.path()), step + 1);
  EXPECT_EQ(entries(dir.path()), std::vector<std::string>{"checkpoint"});
}

}  // namespace
}  // namespace lcm::exec::train
