# The NCCL / CUDA loaders against this host's libraries, and proof that libhvd does not need
# them to start.
hvd_test(NAME gpu_api_test LABEL unit TIMEOUT 60 SOURCES ${CMAKE_CURRENT_LIST_DIR}/gpu_api_test.cc)
target_compile_definitions(gpu_api_test PRIVATE HVD_TEST_HAVE_NCCL=$<BOOL:${HVD_HAVE_NCCL}>)

# "A binary built with the backend must start on a host with no driver and no NCCL": libhvd
# (and hvdrun, which links it) may not name the driver, the CUDA runtime or NCCL as a NEEDED
# library; they are dlopen'ed when asked for. readelf's output is captured first and matched
# afterwards (no `readelf | grep -q` under which an early grep exit could fail the writer).
foreach(binary hvd hvdrun)
  add_test(NAME ${binary}_needs_no_cuda_or_nccl_library
           COMMAND sh -c [[
out=$(readelf -d "$1") || { echo "readelf -d $1 failed"; exit 1; }
needed=$(printf '%s\n' "$out" | grep '(NEEDED)')
[ -n "$needed" ] || { echo "no NEEDED entries in readelf -d $1:"; printf '%s\n' "$out"; exit 1; }
printf '%s\n' "$needed"
case "$needed" in *libcuda*|*libnccl*) echo "$1 needs CUDA or NCCL at load time"; exit 1 ;; esac
]] sh $<TARGET_FILE:${binary}>)
  set_tests_properties(${binary}_needs_no_cuda_or_nccl_library PROPERTIES LABELS unit TIMEOUT 30)
endforeach()
