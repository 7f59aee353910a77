target_sources(hvd PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/store.cc
  ${CMAKE_CURRENT_LIST_DIR}/memory_store.cc
  ${CMAKE_CURRENT_LIST_DIR}/file_store.cc
  ${CMAKE_CURRENT_LIST_DIR}/tcp_protocol.cc
  ${CMAKE_CURRENT_LIST_DIR}/tcp_store_server.cc
  ${CMAKE_CURRENT_LIST_DIR}/tcp_store_session.cc
  ${CMAKE_CURRENT_LIST_DIR}/tcp_store_client.cc)
