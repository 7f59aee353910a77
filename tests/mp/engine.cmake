# The engine across real processes, launched by the real hvdrun.
add_executable(hvd-engine-worker ${CMAKE_CURRENT_LIST_DIR}/engine_worker.cc)
target_link_libraries(hvd-engine-worker PRIVATE hvd hvd_warnings)

if(TARGET hvdrun)
  hvd_test(NAME engine_mp_test LABEL mp TIMEOUT 300
           SOURCES ${CMAKE_CURRENT_LIST_DIR}/engine_mp_test.cc)
  target_link_libraries(engine_mp_test PRIVATE hvd_test_support hvd_local_job)
  target_compile_definitions(engine_mp_test PRIVATE
                             HVDRUN_PATH="$<TARGET_FILE:hvdrun>"
                             HVD_ENGINE_WORKER_PATH="$<TARGET_FILE:hvd-engine-worker>")
  add_dependencies(engine_mp_test hvdrun hvd-engine-worker)
endif()
