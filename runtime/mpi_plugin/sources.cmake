# libhvd_mpi.so, libhvd's MPI plugin (runtime/src/mpi/plugin_abi.h): the only part of the
# runtime that links libmpi, built only where CMake found MPI. libhvd opens it with dlopen
# next to itself, so one libhvd runs on hosts with and without MPI.
if(HVD_HAVE_MPI)
  add_library(hvd_mpi MODULE ${CMAKE_CURRENT_LIST_DIR}/mpi_plugin.cc)
  # ../include for hvd/types.hpp's enums only (the plugin checks its type codes against them).
  target_include_directories(hvd_mpi PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../src
                                             ${CMAKE_CURRENT_LIST_DIR}/../include)
  # Only hvd_mpi_plugin_get is exported; the C++ bindings of mpi.h are never wanted.
  target_compile_definitions(hvd_mpi PRIVATE OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)
  target_link_libraries(hvd_mpi PRIVATE MPI::MPI_C $<BUILD_INTERFACE:hvd_warnings>)
  set_target_properties(hvd_mpi PROPERTIES CXX_VISIBILITY_PRESET hidden
                                           VISIBILITY_INLINES_HIDDEN ON)
  # Whatever builds libhvd builds its plugin into the same folder.
  add_dependencies(hvd hvd_mpi)
endif()
