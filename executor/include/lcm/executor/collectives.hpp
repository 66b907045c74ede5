// The collectives of `lcm-exec bench collectives`, one table row each (nccl-tests'
// struct testColl): buffer sizes, the NCCL call, the correctness rule and the bus-bandwidth
// factor, which is lcm::bus_factor (model/comm.hpp), the cost model's own formula.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <span>
#include <string_view>

#include "lcm/executor/kernels.cuh"
#include "lcm/model/comm.hpp"

namespace lcm::exec {

struct CollArgs {
  const void* send = nullptr;
  void* recv = nullptr;
  size_t total = 0;   // nccl-tests count: elements of the full array (S / element size)
  size_t chunk = 0;   // total / nranks
  ncclDataType_t type = ncclFloat;
  size_t elem_bytes = 4;
  ncclComm_t comm = nullptr;
  int nranks = 1;
  int rank = 0;
  cudaStream_t stream = nullptr;
};

struct CollOp {
  const char* name;        // "all_reduce": report and --ops name
  const char* trace_name;  // "allreduce": trace op "bench.allreduce.<group>"
  Collective kind;         // for bus_factor
  const char* redop;       // "sum" or "none"
  kernels::CollCheck check;
  bool divisible;          // total must be a multiple of nranks (rounded down, as nccl-tests)
  size_t (*send_count)(const CollArgs&);
  size_t (*recv_count)(const CollArgs&);
  ncclResult_t (*launch)(const CollArgs&);  // may return ncclInProgress (non-blocking comm)
};

std::span<const CollOp> coll_ops();
const CollOp* find_coll_op(std::string_view name);

}  // namespace lcm::exec
