# DeviceBackend: routing, HVD_GPU_BACKEND, hierarchical allreduce and the watchdog, against the
# fake NCCL and the fake CUDA (ranks as threads).
hvd_test(NAME device_backend_test LABEL unit TIMEOUT 120
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/device_backend_test.cc)
target_link_libraries(device_backend_test PRIVATE hvd_test_fake_nccl hvd_test_fake_cuda)

# The engine with device tensors (NCCL and host-staged), against the same fakes.
hvd_test(NAME engine_device_test LABEL unit TIMEOUT 120
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/engine_device_test.cc)
target_link_libraries(engine_device_test PRIVATE hvd_test_fake_nccl hvd_test_fake_cuda)
