target_sources(hvd PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/adasum.cc
  ${CMAKE_CURRENT_LIST_DIR}/agreement.cc
  ${CMAKE_CURRENT_LIST_DIR}/allgather.cc
  ${CMAKE_CURRENT_LIST_DIR}/allreduce.cc
  ${CMAKE_CURRENT_LIST_DIR}/alltoall.cc
  ${CMAKE_CURRENT_LIST_DIR}/barrier.cc
  ${CMAKE_CURRENT_LIST_DIR}/broadcast.cc
  ${CMAKE_CURRENT_LIST_DIR}/gathered.cc
  ${CMAKE_CURRENT_LIST_DIR}/host_collectives.cc
  ${CMAKE_CURRENT_LIST_DIR}/reduce.cc
  ${CMAKE_CURRENT_LIST_DIR}/reducescatter.cc
  ${CMAKE_CURRENT_LIST_DIR}/validate.cc)
# The reduction loops are the hot path: let the compiler vectorise them fully.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/reduce.cc ${CMAKE_CURRENT_LIST_DIR}/adasum.cc
                            PROPERTIES COMPILE_OPTIONS "-O3")
