add_library(hvd_test_checks STATIC ${CMAKE_CURRENT_LIST_DIR}/../common/collective_checks.cc)
target_include_directories(hvd_test_checks PUBLIC ${CMAKE_CURRENT_LIST_DIR}/..)
target_link_libraries(hvd_test_checks PUBLIC hvd_internal PRIVATE hvd_warnings)

hvd_test(NAME collectives_test LABEL unit TIMEOUT 300
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/collectives_test.cc)
target_link_libraries(collectives_test PRIVATE hvd_test_checks)
hvd_test(NAME collective_mismatch_test LABEL unit TIMEOUT 120
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/collective_mismatch_test.cc)
target_link_libraries(collective_mismatch_test PRIVATE hvd_test_checks)

include(${CMAKE_CURRENT_LIST_DIR}/store.cmake)
hvd_test(NAME config_test LABEL unit TIMEOUT 60 SOURCES ${CMAKE_CURRENT_LIST_DIR}/config_test.cc)
hvd_test(NAME job_members_test LABEL unit TIMEOUT 60
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/job_members_test.cc)
hvd_test(NAME api_test LABEL unit TIMEOUT 60 SOURCES ${CMAKE_CURRENT_LIST_DIR}/api_test.cc)
target_link_libraries(api_test PRIVATE hvd_test_support)
hvd_test(NAME c_engine_api_test LABEL unit TIMEOUT 120
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/c_engine_api_test.cc)
target_link_libraries(c_engine_api_test PRIVATE hvd_test_support)
hvd_test(NAME reduce_test LABEL unit TIMEOUT 60 SOURCES ${CMAKE_CURRENT_LIST_DIR}/reduce_test.cc)
hvd_test(NAME adasum_test LABEL unit TIMEOUT 120 SOURCES ${CMAKE_CURRENT_LIST_DIR}/adasum_test.cc)
target_link_libraries(adasum_test PRIVATE hvd_test_checks)
hvd_test(NAME mesh_test LABEL unit TIMEOUT 120 SOURCES ${CMAKE_CURRENT_LIST_DIR}/mesh_test.cc)
target_link_libraries(mesh_test PRIVATE hvd_test_support)
hvd_test(NAME fd_limit_test LABEL unit TIMEOUT 60 SOURCES ${CMAKE_CURRENT_LIST_DIR}/fd_limit_test.cc)

# "Reduction loops that the compiler vectorises": the float32 sum kernel must contain packed
# SSE/AVX additions (not meaningful in sanitizer builds, which instrument every access).
if(NOT HVD_SANITIZE)
  add_test(NAME reduce_kernels_are_vectorised
           COMMAND sh -c "objdump -d --no-show-raw-insn $<TARGET_FILE:hvd> | grep -qE 'v?addps'")
  set_tests_properties(reduce_kernels_are_vectorised PROPERTIES LABELS unit TIMEOUT 60)
endif()

# Launcher and agent pieces, each in its own file.
include(${CMAKE_CURRENT_LIST_DIR}/launcher.cmake OPTIONAL)
include(${CMAKE_CURRENT_LIST_DIR}/agent.cmake OPTIONAL)
include(${CMAKE_CURRENT_LIST_DIR}/auth.cmake OPTIONAL)
include(${CMAKE_CURRENT_LIST_DIR}/process.cmake OPTIONAL)
include(${CMAKE_CURRENT_LIST_DIR}/agent_node.cmake OPTIONAL)
include(${CMAKE_CURRENT_LIST_DIR}/proto.cmake OPTIONAL)
include(${CMAKE_CURRENT_LIST_DIR}/elastic.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/coordinator.cmake OPTIONAL)
include(${CMAKE_CURRENT_LIST_DIR}/hvdrun_unit.cmake OPTIONAL)
include(${CMAKE_CURRENT_LIST_DIR}/rpc.cmake OPTIONAL)
include(${CMAKE_CURRENT_LIST_DIR}/agent_service.cmake OPTIONAL)
include(${CMAKE_CURRENT_LIST_DIR}/agent_metrics.cmake OPTIONAL)
include(${CMAKE_CURRENT_LIST_DIR}/hvdrun_remote.cmake OPTIONAL)
include(${CMAKE_CURRENT_LIST_DIR}/engine.cmake OPTIONAL)
include(${CMAKE_CURRENT_LIST_DIR}/timeline.cmake OPTIONAL)
# The GPU backend: loaders, communicators (against a fake NCCL), watchdog.
include(${CMAKE_CURRENT_LIST_DIR}/gpu_api.cmake OPTIONAL)
include(${CMAKE_CURRENT_LIST_DIR}/gpu_comm.cmake OPTIONAL)
include(${CMAKE_CURRENT_LIST_DIR}/gpu_watchdog.cmake OPTIONAL)
include(${CMAKE_CURRENT_LIST_DIR}/gpu_staged.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/gpu_nccl.cmake OPTIONAL)
include(${CMAKE_CURRENT_LIST_DIR}/device_backend.cmake)
# MPI through its plugin.
include(${CMAKE_CURRENT_LIST_DIR}/mpi.cmake)
hvd_test(NAME c_process_sets_api_test LABEL unit TIMEOUT 120
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/c_process_sets_api_test.cc)
target_link_libraries(c_process_sets_api_test PRIVATE hvd_test_support)
