hvd_test(NAME placement_test LABEL unit TIMEOUT 60
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/placement_test.cc)
target_link_libraries(placement_test PRIVATE hvd_contract)
