# Required: Threads, Boost (Asio, header-only), spdlog.
# Detected: CUDA toolkit + NCCL (HVD_HAVE_NCCL), Open MPI (HVD_HAVE_MPI).
find_package(Threads REQUIRED)
find_package(Boost 1.74 REQUIRED)
find_package(spdlog REQUIRED)

# --- CUDA / NCCL -------------------------------------------------------------------------------
set(HVD_HAVE_NCCL OFF)
if(NOT HVD_WITH_NCCL STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  find_path(HVD_NCCL_INCLUDE_DIR nccl.h
            HINTS ${CUDAToolkit_INCLUDE_DIRS} $ENV{NCCL_HOME}/include /usr/include /usr/local/cuda/include)
  find_library(HVD_NCCL_LIBRARY NAMES nccl
               HINTS ${CUDAToolkit_LIBRARY_DIR} $ENV{NCCL_HOME}/lib /usr/lib/x86_64-linux-gnu /usr/local/cuda/lib64)
  if(CUDAToolkit_FOUND AND HVD_NCCL_INCLUDE_DIR AND HVD_NCCL_LIBRARY)
    set(HVD_HAVE_NCCL ON)
    file(STRINGS ${HVD_NCCL_INCLUDE_DIR}/nccl.h _nccl_major REGEX "^#define NCCL_MAJOR")
    file(STRINGS ${HVD_NCCL_INCLUDE_DIR}/nccl.h _nccl_minor REGEX "^#define NCCL_MINOR")
    string(REGEX MATCH "[0-9]+" _nccl_major "${_nccl_major}")
    string(REGEX MATCH "[0-9]+" _nccl_minor "${_nccl_minor}")
    set(HVD_NCCL_VERSION "${_nccl_major}.${_nccl_minor}")
    message(STATUS "hvd: found CUDA ${CUDAToolkit_VERSION} and NCCL ${HVD_NCCL_VERSION} "
                   "(${HVD_NCCL_LIBRARY})")
  elseif(HVD_WITH_NCCL STREQUAL "ON")
    message(FATAL_ERROR "HVD_WITH_NCCL=ON but the CUDA toolkit or NCCL was not found")
  else()
    message(STATUS "hvd: CUDA/NCCL not found; the NCCL backend is not built")
  endif()
endif()

# --- Open MPI ----------------------------------------------------------------------------------
set(HVD_HAVE_MPI OFF)
if(NOT HVD_WITH_MPI STREQUAL "OFF")
  find_package(MPI QUIET COMPONENTS C)
  if(MPI_C_FOUND)
    set(HVD_HAVE_MPI ON)
    find_program(HVD_MPIRUN NAMES mpirun mpiexec HINTS ${MPI_C_COMPILER}/..)
    message(STATUS "hvd: found MPI ${MPI_C_VERSION} (mpirun: ${HVD_MPIRUN})")
  elseif(HVD_WITH_MPI STREQUAL "ON")
    message(FATAL_ERROR "HVD_WITH_MPI=ON but MPI was not found")
  else()
    message(STATUS "hvd: MPI not found; the MPI peer benchmark is not built")
  endif()
endif()
