# Executor tests, included from tests/CMakeLists.txt only where lcm_executor is built.
#   lcm_executor_host_tests: no GPU needed (layout colors vs lcm::group_ranks, options and
#                            the binary's bad-command-line exits,
#                            writers, the result comparer, the GEMM and attention
#                            checkers); run in CI.
#   lcm_executor_gpu_tests:  label gpu; each test skips with a reason where no GPU (or fewer
#                            than 2 for the mpirun tests, or no cuDNN for the attention
#                            tests) is found.
lcm_add_test(lcm_executor_host_tests
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/cli_test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/compare_test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/layout_test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/options_test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/results_test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/attention_test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/moe_cp_test.cpp
  LIBS lcm_executor)
# Training runner host tests (issue 10): caching allocator, token sources, checkpoints.
target_sources(lcm_executor_host_tests PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/train_allocator_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/train_data_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/train_checkpoint_test.cpp
)
# end training runner host tests
add_dependencies(lcm_executor_host_tests lcm-exec)  # cli_test runs the binary

lcm_add_test(lcm_executor_gpu_tests
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/gpu_test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/mpirun_test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/attention_gpu_test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/moe_cp_gpu_test.cpp
  LIBS lcm_executor
  LABELS gpu)
add_dependencies(lcm_executor_gpu_tests lcm-exec)

# wt-bench: the shared helpers of the benchmark families (executor/src/infra/run_context.hpp,
# private to the executor, hence the include path).
target_sources(lcm_executor_host_tests PRIVATE ${CMAKE_CURRENT_LIST_DIR}/bench_helpers_test.cpp)
target_include_directories(lcm_executor_host_tests PRIVATE ${PROJECT_SOURCE_DIR}/executor/src)
# ---- training runner kernels and MoE block (issue 10, wt-kern) ----
#   lcm_executor_train_tests:     host; RoPE frequencies, init statistics, CPU references
#                                 against hand-worked cases and finite differences.
#   lcm_executor_train_gpu_tests: label gpu; every kernel and the MoE block against the CPU
#                                 references (skips without a GPU).
lcm_add_test(lcm_executor_train_tests
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/train_kernels_test.cpp
  LIBS lcm_executor)
target_include_directories(lcm_executor_train_tests PRIVATE ${PROJECT_SOURCE_DIR}/executor/src)
lcm_add_test(lcm_executor_train_gpu_tests
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/train_kernels_gpu_test.cpp
  LIBS lcm_executor
  LABELS gpu)
lcm_add_test(lcm_executor_train_moe_gpu_tests
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/train_moe_gpu_test.cpp
  LIBS lcm_executor
  LABELS gpu)
# ---- end training runner (wt-kern) ----

# ---- training runner host tests: options, plan, op-tag contract, summary (wt-runner) ----
if(LCM_EXEC_HAVE_TRAIN)
  lcm_add_test(lcm_train_runner_tests
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/train_runner_test.cpp
    LIBS lcm_executor)
  lcm_add_test(lcm_train_runner_gpu_tests
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/train_runner_gpu_test.cpp
    LIBS lcm_executor
    LABELS gpu)
  add_dependencies(lcm_train_runner_gpu_tests lcm-exec)
endif()
# (wt-runner) the kernels' GPU test also checks the MoE routing kernels (executor/src/train).
target_include_directories(lcm_executor_train_gpu_tests PRIVATE ${PROJECT_SOURCE_DIR}/executor/src)
# ---- end training runner host tests (wt-runner) ----
