# hvd_agent_node: facts about this node (GPUs through NVML loaded with dlopen) and the worker
# environment contract. No link-time NVML or CUDA dependency: one agent binary serves
# CPU-only and GPU nodes.
add_library(hvd_agent_node STATIC
  ${CMAKE_CURRENT_LIST_DIR}/gpu_discovery.cc
  ${CMAKE_CURRENT_LIST_DIR}/worker_env.cc)
target_include_directories(hvd_agent_node PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(hvd_agent_node PUBLIC hvd hvd_contract
                      PRIVATE ${CMAKE_DL_LIBS} hvd_warnings)
