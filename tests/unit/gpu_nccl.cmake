# Device collectives over NCCL, against the fake NCCL and the fake CUDA (ranks as threads).
hvd_test(NAME nccl_collectives_test LABEL unit TIMEOUT 120
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/nccl_collectives_test.cc)
target_link_libraries(nccl_collectives_test PRIVATE hvd_test_fake_nccl hvd_test_fake_cuda)
