# The NCCL watchdog and the arithmetic of hierarchical allreduce: plain C++ over NcclApi, always
# compiled (no CUDA headers), so CPU machines unit-test them against a mock NCCL.
target_sources(hvd PRIVATE ${CMAKE_CURRENT_LIST_DIR}/watchdog.cc
                           ${CMAKE_CURRENT_LIST_DIR}/hierarchical.cc)
