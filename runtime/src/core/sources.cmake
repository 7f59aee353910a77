target_sources(hvd PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/api.cc
  ${CMAKE_CURRENT_LIST_DIR}/c_api.cc
  ${CMAKE_CURRENT_LIST_DIR}/c_api_support.cc
  ${CMAKE_CURRENT_LIST_DIR}/c_engine_api.cc
  ${CMAKE_CURRENT_LIST_DIR}/c_process_sets_api.cc
  ${CMAKE_CURRENT_LIST_DIR}/config.cc
  ${CMAKE_CURRENT_LIST_DIR}/config_fields.cc
  ${CMAKE_CURRENT_LIST_DIR}/elastic_session.cc
  ${CMAKE_CURRENT_LIST_DIR}/job_members.cc
  ${CMAKE_CURRENT_LIST_DIR}/process_set_engines.cc
  ${CMAKE_CURRENT_LIST_DIR}/process_sets.cc
  ${CMAKE_CURRENT_LIST_DIR}/runtime.cc
  ${CMAKE_CURRENT_LIST_DIR}/scheduler_env.cc)
