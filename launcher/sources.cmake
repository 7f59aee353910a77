# Everything of hvdrun but main(): CLI, output rendering, job building, keygen, build facts, the
# signal loop, the SubmitJob client and doctor. A library so the unit tests link exactly what ships.
find_package(CLI11 CONFIG REQUIRED)
# horovodrun's --config-file is YAML (Debian: libyaml-cpp-dev). 0.8 names its target
# yaml-cpp::yaml-cpp; 0.7 (Debian 12) only yaml-cpp.
find_package(yaml-cpp CONFIG REQUIRED)
if(TARGET yaml-cpp::yaml-cpp)
  set(HVD_YAML_CPP yaml-cpp::yaml-cpp)
else()
  set(HVD_YAML_CPP yaml-cpp)
endif()
add_library(hvd_launcher STATIC
  ${CMAKE_CURRENT_LIST_DIR}/cli.cc
  ${CMAKE_CURRENT_LIST_DIR}/config_file.cc
  ${CMAKE_CURRENT_LIST_DIR}/doctor.cc
  ${CMAKE_CURRENT_LIST_DIR}/doctor_render.cc
  ${CMAKE_CURRENT_LIST_DIR}/doctor_report.cc
  ${CMAKE_CURRENT_LIST_DIR}/engine_options.cc
  ${CMAKE_CURRENT_LIST_DIR}/horovodrun_flags.cc
  ${CMAKE_CURRENT_LIST_DIR}/hosts.cc
  ${CMAKE_CURRENT_LIST_DIR}/job_environment.cc
  ${CMAKE_CURRENT_LIST_DIR}/option_values.cc
  ${CMAKE_CURRENT_LIST_DIR}/output.cc
  ${CMAKE_CURRENT_LIST_DIR}/build_info.cc
  ${CMAKE_CURRENT_LIST_DIR}/keygen.cc
  ${CMAKE_CURRENT_LIST_DIR}/job_spec.cc
  ${CMAKE_CURRENT_LIST_DIR}/job_commands.cc
  ${CMAKE_CURRENT_LIST_DIR}/job_render.cc
  ${CMAKE_CURRENT_LIST_DIR}/remote_client.cc
  ${CMAKE_CURRENT_LIST_DIR}/slurm_agents.cc
  ${CMAKE_CURRENT_LIST_DIR}/stream_watch.cc)
target_include_directories(hvd_launcher PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(hvd_launcher
  PUBLIC hvd_contract hvd_agent_jobs hvd_agent_coordinator hvd_agent_process hvd_agent_rpc hvd_agent_client hvd_auth hvd
  PRIVATE hvd_agent_common hvd_support hvd_contract_env CLI11::CLI11 ${HVD_YAML_CPP} spdlog::spdlog
          hvd_warnings)
# --version and --check-build describe this build (cmake/HvdDependencies.cmake's detection).
target_compile_definitions(hvd_launcher PRIVATE
  HVD_VERSION_STRING="${PROJECT_VERSION}"
  HVD_BUILD_NCCL=$<BOOL:${HVD_HAVE_NCCL}>
  HVD_BUILD_NCCL_VERSION="${HVD_NCCL_VERSION}"
  HVD_BUILD_MPI=$<BOOL:${HVD_HAVE_MPI}>)

# hvdrun: embedded mode (coordinator, process supervision and the job store in one process) and
# remote mode (SubmitJob to the leader hvdagent).
add_executable(hvdrun ${CMAKE_CURRENT_LIST_DIR}/hvdrun_main.cc)
target_link_libraries(hvdrun PRIVATE hvd_launcher hvd_agent_common hvd_support hvd_contract_env spdlog::spdlog
                             hvd_warnings)
