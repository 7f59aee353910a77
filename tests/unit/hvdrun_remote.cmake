# hvdrun's remote mode against an in-process fake hvd.v1.Agent: the SubmitJob client, the request
# it builds, and the hvdrun binary talking to the fake.
hvd_test(NAME hvdrun_remote_test LABEL unit TIMEOUT 120
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/hvdrun_remote_test.cc)
target_link_libraries(hvdrun_remote_test PRIVATE hvd_launcher hvd_test_support hvd_test_grpc)
add_dependencies(hvdrun_remote_test hvdrun)
target_compile_definitions(hvdrun_remote_test PRIVATE HVDRUN_PATH="$<TARGET_FILE:hvdrun>")
