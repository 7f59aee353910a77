target_sources(hvd PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/context.cc
  ${CMAKE_CURRENT_LIST_DIR}/interfaces.cc
  ${CMAKE_CURRENT_LIST_DIR}/local_fabric.cc
  ${CMAKE_CURRENT_LIST_DIR}/member_links.cc
  ${CMAKE_CURRENT_LIST_DIR}/mesh.cc
  ${CMAKE_CURRENT_LIST_DIR}/mesh_links.cc
  ${CMAKE_CURRENT_LIST_DIR}/progress.cc
  ${CMAKE_CURRENT_LIST_DIR}/shm_link.cc
  ${CMAKE_CURRENT_LIST_DIR}/shm_segment.cc
  ${CMAKE_CURRENT_LIST_DIR}/shm_sizing.cc
  ${CMAKE_CURRENT_LIST_DIR}/tcp_link.cc)
