hvd_test(NAME store_test LABEL unit TIMEOUT 120
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/store_test.cc)
target_link_libraries(store_test PRIVATE hvd_test_support)
hvd_test(NAME tcp_store_server_test LABEL unit TIMEOUT 120
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/tcp_store_server_test.cc)
