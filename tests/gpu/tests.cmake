# GPU programs (tests/gpu): libhvd on CUDA device buffers. Built wherever the NCCL backend is
# (they use hvd's own dlopen loaders of libcuda and libnccl, and link neither). On a machine
# without a GPU the ctest below is skipped (exit 77) with the reason; scripts/gpu-check.sh runs
# them for real on a GPU machine, from the standalone project in tests/gpu/standalone.
if(HVD_HAVE_NCCL)
  add_executable(hvd-gpu-check ${CMAKE_CURRENT_LIST_DIR}/gpu_check.cc
                               ${CMAKE_CURRENT_LIST_DIR}/../common/collective_checks.cc)
  target_include_directories(hvd-gpu-check PRIVATE ${CMAKE_CURRENT_LIST_DIR}/..)
  target_link_libraries(hvd-gpu-check PRIVATE hvd_internal hvd_warnings)
  # Its launcher builds each rank's environment with the agent's own worker-environment code.
  if(TARGET hvd_agent_node)
    target_link_libraries(hvd-gpu-check PRIVATE hvd_agent_node)
  else()
    # The standalone project has no agent/: the two sources, which need nothing but libhvd.
    get_filename_component(_hvd_root ${CMAKE_CURRENT_LIST_DIR}/../.. ABSOLUTE)
    target_sources(hvd-gpu-check PRIVATE ${_hvd_root}/agent/placement.cc
                                         ${_hvd_root}/agent/node/worker_env.cc)
    target_include_directories(hvd-gpu-check PRIVATE ${_hvd_root})
  endif()
  add_executable(hvd-gpu-bench ${CMAKE_CURRENT_LIST_DIR}/gpu_bench.cc)
  target_link_libraries(hvd-gpu-bench PRIVATE hvd_internal hvd_warnings)
  if(COMMAND add_test)
    add_test(NAME gpu_collectives_np1 COMMAND hvd-gpu-check --backend nccl)
    add_test(NAME gpu_host_staged_np2 COMMAND hvd-gpu-check --np 2 --backend host)
    set_tests_properties(gpu_collectives_np1 gpu_host_staged_np2 PROPERTIES
                         LABELS gpu TIMEOUT 300 SKIP_RETURN_CODE 77)
    # The checker itself, on host buffers, so CPU machines know its expectations and its
    # launcher are right before a GPU machine's few minutes are spent on it.
    add_test(NAME gpu_check_on_host_memory_np2 COMMAND hvd-gpu-check --np 2 --host-memory)
    set_tests_properties(gpu_check_on_host_memory_np2 PROPERTIES LABELS mp TIMEOUT 300)
    # A size that is not one, or a zero start (sizes grow by 4 from it), is a usage error.
    add_test(NAME gpu_bench_rejects_bad_sizes COMMAND hvd-gpu-bench -b 64K -e lots)
    add_test(NAME gpu_bench_rejects_zero_start COMMAND hvd-gpu-bench -b 0)
    set_tests_properties(gpu_bench_rejects_bad_sizes PROPERTIES LABELS unit TIMEOUT 30
                         PASS_REGULAR_EXPRESSION "-e 'lots' is not a size")
    set_tests_properties(gpu_bench_rejects_zero_start PROPERTIES LABELS unit TIMEOUT 30
                         PASS_REGULAR_EXPRESSION "need 4 <= MIN <= MAX")
  endif()
endif()
