# NcclApi / CudaApi loaders. libhvd never links CUDA or NCCL: with their headers (HVD_HAVE_NCCL)
# the loaders dlopen libnccl.so.2 and libcuda.so.1 when first asked, so one libhvd starts on
# hosts with and without GPUs; without them, loadNccl / loadCuda say the backend is not built.
target_sources(hvd PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/nccl_api.cc
  ${CMAKE_CURRENT_LIST_DIR}/build_info.cc)
target_link_libraries(hvd PRIVATE ${CMAKE_DL_LIBS})
if(HVD_HAVE_NCCL)
  target_sources(hvd PRIVATE
    ${CMAKE_CURRENT_LIST_DIR}/dl_nccl_api.cc
    ${CMAKE_CURRENT_LIST_DIR}/dl_cuda_api.cc)
  # Headers only (types and signatures); nccl_api.cc drops its "not built" stubs.
  target_include_directories(hvd SYSTEM PRIVATE ${HVD_NCCL_INCLUDE_DIR} ${CUDAToolkit_INCLUDE_DIRS})
  target_compile_definitions(hvd PRIVATE HVD_HAVE_NCCL=1)
endif()
