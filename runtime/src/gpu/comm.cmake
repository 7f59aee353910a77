# NCCL communicators: bootstrap through the job store and the lazy per-job cache. Only hvd's own
# NcclApi types are used, so these compile without the CUDA toolkit.
target_sources(hvd PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/nccl_comm.cc
  ${CMAKE_CURRENT_LIST_DIR}/comm_cache.cc)
