// Error messages for the return-code checks in error.hpp.
#include "lcm/executor/error.hpp"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <mpi.h>

namespace lcm::exec {

namespace {
std::string where(const char* expr, const char* file, int line) {
  std::string f = file;
  const size_t slash = f.find_last_of('/');
  if (slash != std::string::npos) f = f.substr(slash + 1);
  return f + ":" + std::to_string(line) + ": " + expr;
}
}  // namespace

void throw_cuda_error(int code, const char* expr, const char* file, int line) {
  throw ExecError(where(expr, file, line) + ": " + cudaGetErrorName(static_cast<cudaError_t>(code)) + ": " +
                  cudaGetErrorString(static_cast<cudaError_t>(code)));
}

void throw_cublas_error(int code, const char* expr, const char* file, int line) {
  throw ExecError(where(expr, file, line) + ": cuBLAS status " + std::to_string(code) + " (" +
                  cublasLtGetStatusName(static_cast<cublasStatus_t>(code)) + ")");
}

void throw_mpi_error(int code, const char* expr, const char* file, int line) {
  char msg[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(code, msg, &len);
  throw ExecError(where(expr, file, line) + ": MPI error " + std::to_string(code) + " (" + std::string(msg, static_cast<size_t>(len)) + ")");
}

}  // namespace lcm::exec
