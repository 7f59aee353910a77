/* A minimal libhvd program through the C ABI: every rank contributes its rank + 1 and checks
 * the sum, then gathers one value per rank. Run it with a launcher, e.g.
 *   build/bin/hvd-local-run -np 4 -- build/bin/hvd-example-allreduce-c */
#include <hvd/hvd.h>
#include <stdio.h>
#include <stdlib.h>

static int check(hvd_status status, const char* what) {
  if (status != HVD_OK) {
    fprintf(stderr, "%s failed (%s): %s\n", what, hvd_status_name(status), hvd_last_error());
    exit(1);
  }
  return 0;
}

int main(void) {
  check(hvd_init(), "hvd_init");
  int rank = 0, size = 0;
  check(hvd_rank(&rank), "hvd_rank");
  check(hvd_size(&size), "hvd_size");

  double value[4];
  for (int i = 0; i < 4; ++i) value[i] = (rank + 1) * (i + 1);
  check(hvd_allreduce(value, value, 4, HVD_FLOAT64, HVD_SUM), "hvd_allreduce");
  const double expected = size * (size + 1) / 2.0;
  for (int i = 0; i < 4; ++i) {
    if (value[i] != expected * (i + 1)) {
      fprintf(stderr, "rank %d: element %d is %g, expected %g\n", rank, i, value[i],
              expected * (i + 1));
      return 1;
    }
  }

  int64_t* counts = malloc(sizeof(int64_t) * size);
  int32_t* ranks = malloc(sizeof(int32_t) * size);
  for (int r = 0; r < size; ++r) counts[r] = 1;
  const int32_t mine = rank;
  check(hvd_allgather(&mine, 1, ranks, counts, HVD_INT32), "hvd_allgather");
  for (int r = 0; r < size; ++r) {
    if (ranks[r] != r) {
      fprintf(stderr, "rank %d: allgather slot %d holds %d\n", rank, r, ranks[r]);
      return 1;
    }
  }
  if (rank == 0) printf("allreduce and allgather correct on %d ranks\n", size);
  free(counts);
  free(ranks);
  check(hvd_shutdown(), "hvd_shutdown");
  return 0;
}
