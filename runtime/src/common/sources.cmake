target_sources(hvd PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/error.cc
  ${CMAKE_CURRENT_LIST_DIR}/fd_limit.cc
  ${CMAKE_CURRENT_LIST_DIR}/logging.cc)
target_sources(hvd PRIVATE ${CMAKE_CURRENT_LIST_DIR}/types.cc)
