# The engine: pure logic, then ranks as threads over in-process links.
hvd_test(NAME engine_logic_test LABEL unit TIMEOUT 60
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/engine_logic_test.cc)
hvd_test(NAME engine_test LABEL unit TIMEOUT 240
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/engine_test.cc)
hvd_test(NAME engine_negotiation_test LABEL unit TIMEOUT 120
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/engine_negotiation_test.cc)
hvd_test(NAME process_sets_test LABEL unit TIMEOUT 120
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/process_sets_test.cc)
hvd_test(NAME autotune_test LABEL unit TIMEOUT 180
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/autotune_test.cc)
hvd_test(NAME straggler_test LABEL unit TIMEOUT 120
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/straggler_test.cc)
