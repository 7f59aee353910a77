# The fake NcclApi (tests/common/fake_nccl.h): ranks as threads, host memory as device memory.
add_library(hvd_test_fake_nccl STATIC ${CMAKE_CURRENT_LIST_DIR}/../common/fake_nccl.cc)
target_include_directories(hvd_test_fake_nccl PUBLIC ${CMAKE_CURRENT_LIST_DIR}/..)
target_link_libraries(hvd_test_fake_nccl PUBLIC hvd_internal PRIVATE hvd_warnings)

# Communicator bootstrap through the store, its error paths, and the lazy cache.
hvd_test(NAME nccl_comm_test LABEL unit TIMEOUT 120
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/nccl_comm_test.cc)
target_link_libraries(nccl_comm_test PRIVATE hvd_test_fake_nccl)
