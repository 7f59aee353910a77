# The engine's Chrome-trace timeline: valid JSON after every flush and after a SIGKILL, escaping
# of hostile tensor names, B/E pairing, bounded memory.
hvd_test(NAME timeline_test LABEL unit TIMEOUT 60
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/timeline_test.cc)
target_link_libraries(timeline_test PRIVATE hvd_test_support)
