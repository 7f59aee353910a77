# The engine: named async ops, negotiation, response cache, fusion, join, stalls.
# The timeline (timeline.cc) comes in through timeline.cmake.
target_sources(hvd PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/autotune.cc
  ${CMAKE_CURRENT_LIST_DIR}/controller.cc
  ${CMAKE_CURRENT_LIST_DIR}/engine.cc
  ${CMAKE_CURRENT_LIST_DIR}/executor.cc
  ${CMAKE_CURRENT_LIST_DIR}/gaussian_process.cc
  ${CMAKE_CURRENT_LIST_DIR}/handle.cc
  ${CMAKE_CURRENT_LIST_DIR}/in_flight_names.cc
  ${CMAKE_CURRENT_LIST_DIR}/mismatch.cc
  ${CMAKE_CURRENT_LIST_DIR}/request.cc
  ${CMAKE_CURRENT_LIST_DIR}/response_cache.cc
  ${CMAKE_CURRENT_LIST_DIR}/stall.cc
  ${CMAKE_CURRENT_LIST_DIR}/straggler.cc)
