# --- Peer benchmarks (bench/compare.sh) --------------------------------------------------------
# memcpy-bw: the machine's single-core memcpy bandwidth, the reference figure of compare.sh.
add_executable(memcpy-bw ${CMAKE_CURRENT_LIST_DIR}/memcpy_bw.c)
target_link_libraries(memcpy-bw PRIVATE hvd_warnings)

# mpi-bench: Open MPI MPI_Allreduce with hvd-bench's flags and table format.
if(HVD_HAVE_MPI)
  add_executable(mpi-bench ${CMAKE_CURRENT_LIST_DIR}/mpi_bench.c)
  target_link_libraries(mpi-bench PRIVATE MPI::MPI_C hvd_warnings)
endif()
# --- end of peer benchmarks --------------------------------------------------------------------

# hvd-bench: nccl-tests style benchmark of hvd's collectives (allreduce, allgather, broadcast,
# reducescatter, alltoall); run under hvd-local-run.
add_executable(hvd-bench ${CMAKE_CURRENT_LIST_DIR}/hvd_bench.cc
                         ${CMAKE_CURRENT_LIST_DIR}/bench_options.cc
                         ${CMAKE_CURRENT_LIST_DIR}/bench_patterns.cc)
target_link_libraries(hvd-bench PRIVATE hvd_internal hvd_warnings)

# --- Launch benchmark (bench/launch.sh) --------------------------------------------------------
# hvd-init-barrier: hvd::init + barrier + shutdown, run under hvdrun -np N.
add_executable(hvd-init-barrier ${CMAKE_CURRENT_LIST_DIR}/hvd_init_barrier.cc)
target_link_libraries(hvd-init-barrier PRIVATE hvd hvd_warnings)

# mpi-init-barrier: MPI_Init + MPI_Barrier + MPI_Finalize, run under mpirun -np N.
if(HVD_HAVE_MPI)
  add_executable(mpi-init-barrier ${CMAKE_CURRENT_LIST_DIR}/init_barrier.c)
  target_link_libraries(mpi-init-barrier PRIVATE MPI::MPI_C hvd_warnings)
endif()
# --- end of launch benchmark -------------------------------------------------------------------
