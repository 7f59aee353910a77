# The engine's Chrome-trace timeline (HVD_TIMELINE).
target_sources(hvd PRIVATE ${CMAKE_CURRENT_LIST_DIR}/timeline.cc)
