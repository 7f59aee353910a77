hvd_test(NAME host_spec_test LABEL unit TIMEOUT 60
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/host_spec_test.cc)
target_link_libraries(host_spec_test PRIVATE hvd_launcher_core)
