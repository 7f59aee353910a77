# Device buffers staged through host memory, against a fake CUDA (ranks as threads).
add_library(hvd_test_fake_cuda STATIC ${CMAKE_CURRENT_LIST_DIR}/../common/fake_cuda.cc)
target_include_directories(hvd_test_fake_cuda PUBLIC ${CMAKE_CURRENT_LIST_DIR}/..)
target_link_libraries(hvd_test_fake_cuda PUBLIC hvd_internal PRIVATE hvd_warnings)

hvd_test(NAME gpu_staged_test LABEL unit TIMEOUT 120
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/gpu_staged_test.cc)
target_link_libraries(gpu_staged_test PRIVATE hvd_test_fake_cuda)
