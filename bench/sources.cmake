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
                         ${CMAKE_CURRENT_LIST_DIR}/bench_patterns.cc
                         ${CMAKE_CURRENT_LIST_DIR}/engine_bench.cc)
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

# --- Fusion benchmark (bench/fusion.sh) --------------------------------------------------------
# ResNet-50's 161 gradient tensors (bench/resnet50_parameters.tsv) allreduced once per step.
set(HVD_FUSION_BENCH_PARAMS ${CMAKE_CURRENT_LIST_DIR}/resnet50_parameters.tsv)
# hvd-fusion-bench: one named allreduceAsync per tensor through the engine, under hvdrun -np N
# (built once the engine's sources are in the tree, like hvd-train).
if(EXISTS ${PROJECT_SOURCE_DIR}/runtime/src/engine/sources.cmake)
  set(HVD_FUSION_BENCH ON)
  add_executable(hvd-fusion-bench ${CMAKE_CURRENT_LIST_DIR}/fusion_bench.cc)
  target_link_libraries(hvd-fusion-bench PRIVATE hvd hvd_warnings)
  target_compile_definitions(hvd-fusion-bench
    PRIVATE HVD_FUSION_BENCH_PARAMS="${HVD_FUSION_BENCH_PARAMS}")
endif()

# mpi-fusion-bench: one MPI_Allreduce per tensor, under mpirun -np N.
if(HVD_HAVE_MPI)
  add_executable(mpi-fusion-bench ${CMAKE_CURRENT_LIST_DIR}/mpi_fusion_bench.c)
  target_link_libraries(mpi-fusion-bench PRIVATE MPI::MPI_C hvd_warnings)
  target_compile_definitions(mpi-fusion-bench
    PRIVATE HVD_FUSION_BENCH_PARAMS="${HVD_FUSION_BENCH_PARAMS}")
endif()

# Smoke tests of hvd-fusion-bench, fused and unfused: np 2, 10 tensors, 2 steps; the program
# checks every element of the averages and exits non-zero on a wrong one.
if(HVD_BUILD_TESTS AND HVD_FUSION_BENCH)
  add_test(NAME bench_smoke_fusion
           COMMAND hvdrun -np 2 -- $<TARGET_FILE:hvd-fusion-bench> --max-tensors 10 --steps 2
                   --warmup 1)
  add_test(NAME bench_smoke_fusion_off
           COMMAND ${CMAKE_COMMAND} -E env HVD_FUSION_THRESHOLD=0 $<TARGET_FILE:hvdrun> -np 2 --
                   $<TARGET_FILE:hvd-fusion-bench> --max-tensors 10 --steps 2 --warmup 1)
  set_tests_properties(bench_smoke_fusion bench_smoke_fusion_off PROPERTIES LABELS mp
    TIMEOUT 120 FAIL_REGULAR_EXPRESSION "wrong=[1-9]")
endif()
# --- end of fusion benchmark -------------------------------------------------------------------

# --- Torch step benchmark (bench/torch_step.sh) ------------------------------------------------
# hvd-op-latency: one tiny named allreduce through the engine from C++ (submit, wait, round
# trip), the reference of hvd.torch's per-op cost (bench/torch_step.py latency), under hvdrun.
if(HVD_FUSION_BENCH)
  add_executable(hvd-op-latency ${CMAKE_CURRENT_LIST_DIR}/op_latency.cc)
  target_link_libraries(hvd-op-latency PRIVATE hvd hvd_warnings)
endif()
# --- end of torch step benchmark ---------------------------------------------------------------
