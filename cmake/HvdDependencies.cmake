# Required: Threads, Boost (Asio, header-only), spdlog.
# Detected: CUDA toolkit + NCCL (HVD_HAVE_NCCL), Open MPI (HVD_HAVE_MPI).
#
# HVD_DEPS_DIR: a folder of header-only copies of Boost's headers the runtime includes, spdlog
# and fmt (scripts/gpu-deps.sh makes it from this machine's Debian packages), for building
# libhvd where those packages are missing (the GPU machine of scripts/gpu-check.sh). spdlog and
# fmt are then used header-only.
find_package(Threads REQUIRED)
set(HVD_DEPS_DIR "" CACHE PATH "header-only Boost/spdlog/fmt copies (scripts/gpu-deps.sh)")
if(HVD_DEPS_DIR)
  if(NOT EXISTS ${HVD_DEPS_DIR}/include/boost/asio.hpp OR
     NOT EXISTS ${HVD_DEPS_DIR}/include/spdlog/spdlog.h)
    message(FATAL_ERROR "HVD_DEPS_DIR=${HVD_DEPS_DIR} lacks include/boost or include/spdlog; "
                        "make it with scripts/gpu-deps.sh")
  endif()
  add_library(Boost::headers INTERFACE IMPORTED GLOBAL)
  set_target_properties(Boost::headers PROPERTIES
                        INTERFACE_INCLUDE_DIRECTORIES ${HVD_DEPS_DIR}/include)
  add_library(spdlog::spdlog INTERFACE IMPORTED GLOBAL)
  set_target_properties(spdlog::spdlog PROPERTIES
                        INTERFACE_INCLUDE_DIRECTORIES ${HVD_DEPS_DIR}/include
                        INTERFACE_COMPILE_DEFINITIONS "SPDLOG_HEADER_ONLY;FMT_HEADER_ONLY")
  message(STATUS "hvd: Boost, spdlog and fmt headers from ${HVD_DEPS_DIR}")
else()
  find_package(Boost 1.74 REQUIRED)
  find_package(spdlog REQUIRED)
endif()

# --- CUDA / NCCL -------------------------------------------------------------------------------
set(HVD_HAVE_NCCL OFF)
if(NOT HVD_WITH_NCCL STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  find_path(HVD_NCCL_INCLUDE_DIR nccl.h
            HINTS ${CUDAToolkit_INCLUDE_DIRS} $ENV{NCCL_HOME}/include /usr/include /usr/local/cuda/include)
  find_library(HVD_NCCL_LIBRARY NAMES nccl libnccl.so.2
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
