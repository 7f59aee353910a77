# hvd_agent_node: facts about this node (hostname, interfaces, CPUs, GPUs through NVML loaded with
# dlopen, what this build can do) and the worker environment contract. No link-time NVML or
# CUDA dependency: one agent binary serves CPU-only and GPU nodes. No protobuf either: the
# Describe answer is made from these facts in agent/rpc.
add_library(hvd_agent_node STATIC
  ${CMAKE_CURRENT_LIST_DIR}/gpu_discovery.cc
  ${CMAKE_CURRENT_LIST_DIR}/node_facts.cc
  ${CMAKE_CURRENT_LIST_DIR}/worker_env.cc)
target_include_directories(hvd_agent_node PUBLIC ${PROJECT_SOURCE_DIR})
# hvd_support: node_facts.h carries the runtime's interface list (hvd_support/interfaces.h).
target_link_libraries(hvd_agent_node PUBLIC hvd hvd_contract hvd_support hvd_contract_env
                      PRIVATE ${CMAKE_DL_LIBS} hvd_warnings)
# The version and build features the agent reports (node_facts.h).
target_compile_definitions(hvd_agent_node PRIVATE HVD_AGENT_VERSION="${PROJECT_VERSION}")
if(HVD_HAVE_NCCL)
  target_compile_definitions(hvd_agent_node PRIVATE HVD_AGENT_HAVE_NCCL)
endif()
if(HVD_HAVE_MPI)
  target_compile_definitions(hvd_agent_node PRIVATE HVD_AGENT_HAVE_MPI)
endif()
