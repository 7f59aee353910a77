// mpi-init-barrier: the MPI peer of hvd-init-barrier for bench/launch.sh. MPI_Init,
// MPI_Barrier, MPI_Finalize, exit 0; measures what mpirun costs to start a job that
// synchronises once.
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  if (MPI_Init(&argc, &argv) != MPI_SUCCESS) {
    fprintf(stderr, "mpi-init-barrier: MPI_Init failed\n");
    return 1;
  }
  if (MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS) {
    fprintf(stderr, "mpi-init-barrier: MPI_Barrier failed\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
  }
  MPI_Finalize();
  return 0;
}
