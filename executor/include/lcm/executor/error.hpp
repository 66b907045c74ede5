// Error types and CUDA / cuBLASLt / NCCL / MPI return-code checks of lcm-exec.
//
// Helpers throw; only main() exits. ExecError is a runtime failure (exit 1), UsageError a
// bad command line (exit 2), CommFailure a collective that failed or timed out (exit 5,
// raised by comms.cpp after every communicator has been aborted).
#pragma once

#include <stdexcept>
#include <string>

namespace lcm::exec {

class ExecError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Exit codes (docs/executor.md): 0 ok, 1 runtime error, 2 usage, 5 collective timeout or
// NCCL error (communicators aborted), 6 a correctness check failed.
inline constexpr int kExitOk = 0;
inline constexpr int kExitRuntime = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitCommFailure = 5;
inline constexpr int kExitWrongResults = 6;

[[noreturn]] void throw_cuda_error(int code, const char* expr, const char* file, int line);
[[noreturn]] void throw_cublas_error(int code, const char* expr, const char* file, int line);
[[noreturn]] void throw_mpi_error(int code, const char* expr, const char* file, int line);

}  // namespace lcm::exec

#define LCM_CUDA_CHECK(expr)                                                          \
  do {                                                                                \
    const auto lcm_err_ = (expr);                                                     \
    if (lcm_err_ != cudaSuccess)                                                      \
      ::lcm::exec::throw_cuda_error(static_cast<int>(lcm_err_), #expr, __FILE__, __LINE__); \
  } while (0)

#define LCM_CUBLAS_CHECK(expr)                                                        \
  do {                                                                                \
    const auto lcm_err_ = (expr);                                                     \
    if (lcm_err_ != CUBLAS_STATUS_SUCCESS)                                            \
      ::lcm::exec::throw_cublas_error(static_cast<int>(lcm_err_), #expr, __FILE__, __LINE__); \
  } while (0)

#define LCM_MPI_CHECK(expr)                                                           \
  do {                                                                                \
    const int lcm_err_ = (expr);                                                      \
    if (lcm_err_ != 0) ::lcm::exec::throw_mpi_error(lcm_err_, #expr, __FILE__, __LINE__); \
  } while (0)
