# MPI through the plugin libhvd_mpi.so (plugin_abi.h, built from runtime/mpi_plugin/ where CMake
# finds MPI): its loader and the CPU collectives over it. libhvd itself never links MPI, so this
# compiles everywhere; without the plugin, asking for MPI is an error that says why.
target_sources(hvd PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/mpi_api.cc
  ${CMAKE_CURRENT_LIST_DIR}/mpi_collectives.cc)
if(HVD_HAVE_MPI)
  set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/mpi_api.cc PROPERTIES
                              COMPILE_DEFINITIONS HVD_HAVE_MPI=1)
endif()
