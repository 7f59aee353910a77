# The GPU backend. Everything here compiles without the CUDA toolkit; only the
# dlopen-based loaders of libnccl.so.2 and libcuda.so.1 need its headers (HVD_HAVE_NCCL), and
# libhvd never links against CUDA or NCCL.
include(${CMAKE_CURRENT_LIST_DIR}/api.cmake OPTIONAL)       # NcclApi / CudaApi loaders
include(${CMAKE_CURRENT_LIST_DIR}/comm.cmake OPTIONAL)      # communicator bootstrap and cache
include(${CMAKE_CURRENT_LIST_DIR}/watchdog.cmake OPTIONAL)  # watchdog, hierarchical arithmetic
# Device buffers staged through pinned host memory over the CPU transports; the stream ordering
# it shares with the NCCL collectives.
target_sources(hvd PRIVATE ${CMAKE_CURRENT_LIST_DIR}/staged.cc
                           ${CMAKE_CURRENT_LIST_DIR}/device_stream.cc)
# Device buffers over NCCL (through NcclApi, so it compiles and is tested without CUDA).
target_sources(hvd PRIVATE ${CMAKE_CURRENT_LIST_DIR}/nccl_collectives.cc)
# Which collectives a device buffer takes (NCCL or host-staged), the communicators and watchdog.
target_sources(hvd PRIVATE ${CMAKE_CURRENT_LIST_DIR}/device_backend.cc)
