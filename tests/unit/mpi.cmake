# MPI through its plugin: the loader, this build's plugin, and MpiCollectives against
# a fake plugin table. No MPI is started.
hvd_test(NAME mpi_test LABEL unit TIMEOUT 60 SOURCES ${CMAKE_CURRENT_LIST_DIR}/mpi_test.cc)
target_compile_definitions(mpi_test PRIVATE HVD_TEST_HAVE_MPI=$<BOOL:${HVD_HAVE_MPI}>)
# Mismatched arguments across ranks (threads over a fake MPI world) fail every rank.
hvd_test(NAME mpi_mismatch_test LABEL unit TIMEOUT 60
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/mpi_mismatch_test.cc)

# "libhvd itself must not link libmpi": programs that mpirun did not start never load MPI.
add_test(NAME hvd_needs_no_mpi_library
         COMMAND sh -c [[
out=$(readelf -d "$1") || { echo "readelf -d $1 failed"; exit 1; }
needed=$(printf '%s\n' "$out" | grep '(NEEDED)')
[ -n "$needed" ] || { echo "no NEEDED entries in readelf -d $1:"; printf '%s\n' "$out"; exit 1; }
printf '%s\n' "$needed"
case "$needed" in *libmpi*|*libopen-pal*|*libopen-rte*) echo "$1 needs MPI at load time"; exit 1 ;; esac
]] sh $<TARGET_FILE:hvd>)
set_tests_properties(hvd_needs_no_mpi_library PROPERTIES LABELS unit TIMEOUT 30)
