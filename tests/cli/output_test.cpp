// `-o FILE` semantics (issue 14): a regular file is replaced atomically keeping its mode,
// through symlinks to their target; a FIFO or device is written in place; TERM during the
// write leaves no temporary file behind.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace {

namespace fs = std::filesystem;

const std::string kLcm = std::string(LCM_BINARY_DIR) + "/bin/lcm";
const std::string kDefault = std::string(LCM_SOURCE_DIR) + "/scenarios/default.yaml";

class OutputTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("lcm_output_test_" + std::to_string(::getpid()) + "_" +
            testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  int run(const std::string& args) {
    const std::string cmd = "cd '" + dir_.string() + "' && timeout 60 '" + kLcm + "' " + args + " 2>err";
    const int status = std::system(cmd.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  std::string slurp(const std::string& name) {
    std::ifstream in(dir_ / name, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  bool any_temp() {
    for (const auto& e : fs::directory_iterator(dir_))
      if (e.path().filename().string().find(".tmp.") != std::string::npos) return true;
    return false;
  }
  fs::path dir_;
};

TEST_F(OutputTest, KeepsTheModeOfAnExistingFile) {
  std::ofstream(dir_ / "e.json") << "old";
  fs::permissions(dir_ / "e.json", fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  ASSERT_EQ(run("estimate '" + kDefault + "' --format json -o e.json"), 0) << slurp("err");
  EXPECT_NE(slurp("e.json").find("\"schema_version\""), std::string::npos);
  struct stat st {};
  ASSERT_EQ(::stat((dir_ / "e.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  EXPECT_FALSE(any_temp());
}

TEST_F(OutputTest, NewFilesFollowTheUmask) {
  ASSERT_EQ(run("estimate '" + kDefault + "' -o n.txt"), 0) << slurp("err");
  struct stat st {};
  ASSERT_EQ(::stat((dir_ / "n.txt").c_str(), &st), 0);
  const mode_t mask = ::umask(0);
  ::umask(mask);
  EXPECT_EQ(st.st_mode & 07777, 0666u & ~mask);
}

TEST_F(OutputTest, WritesThroughASymlinkToItsTarget) {
  fs::create_directories(dir_ / "real");
  std::ofstream(dir_ / "real/t.json") << "old";
  fs::create_symlink("real/t.json", dir_ / "link.json");
  fs::create_symlink("real/new.json", dir_ / "dangling.json");
  ASSERT_EQ(run("estimate '" + kDefault + "' --format json -o link.json"), 0) << slurp("err");
  ASSERT_EQ(run("estimate '" + kDefault + "' --format json -o dangling.json"), 0) << slurp("err");
  EXPECT_TRUE(fs::is_symlink(dir_ / "link.json"));
  EXPECT_TRUE(fs::is_symlink(dir_ / "dangling.json"));
  EXPECT_NE(slurp("real/t.json").find("\"schema_version\""), std::string::npos);
  EXPECT_NE(slurp("real/new.json").find("\"schema_version\""), std::string::npos);
}

TEST_F(OutputTest, WritesIntoAFifoInPlace) {
  ASSERT_EQ(::mkfifo((dir_ / "p").c_str(), 0600), 0);
  // A reader copies the FIFO to a file; lcm must open the FIFO, not replace it.
  const std::string reader = "cat '" + (dir_ / "p").string() + "' > '" + (dir_ / "got").string() + "' &";
  ASSERT_EQ(std::system(reader.c_str()), 0);
  ASSERT_EQ(run("estimate '" + kDefault + "' --format json -o p"), 0) << slurp("err");
  for (int i = 0; i < 100 && slurp("got").find('}') == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_NE(slurp("got").find("\"schema_version\""), std::string::npos);
  struct stat st {};
  ASSERT_EQ(::lstat((dir_ / "p").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
}

TEST_F(OutputTest, DevFullStaysADeviceAndTheErrorIsNamed) {
  EXPECT_EQ(run("estimate '" + kDefault + "' -o /dev/full"), 1);
  EXPECT_EQ(slurp("err"), "lcm: cannot write /dev/full: No space left on device\n");
  struct stat st {};
  ASSERT_EQ(::stat("/dev/full", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
}

TEST_F(OutputTest, TermDuringTheWriteRemovesTheTemporaryFile) {
  // A ~100 MB trace: its write takes long enough to be interrupted once the temporary file
  // exists. Retried a few times in case the whole write slips between two polls.
  bool interrupted = false;
  for (int attempt = 0; attempt < 3 && !interrupted; ++attempt) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      if (::chdir(dir_.c_str()) != 0) ::_exit(127);
      ::execl(kLcm.c_str(), "lcm", "trace", kDefault.c_str(), "--set", "num_layers=512", "--micro-batches", "16",
              "-o", "big.json", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    int status = 0;
    for (;;) {
      if (::waitpid(pid, &status, WNOHANG) == pid) break;
      if (any_temp()) {
        ::kill(pid, SIGTERM);
        ::waitpid(pid, &status, 0);
        interrupted = WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM;
        break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    if (interrupted) {
      EXPECT_FALSE(any_temp());
      EXPECT_FALSE(fs::exists(dir_ / "big.json"));
    }
    fs::remove(dir_ / "big.json");
  }
  EXPECT_TRUE(interrupted) << "the temporary file was never seen during the write";
}

}  // namespace
