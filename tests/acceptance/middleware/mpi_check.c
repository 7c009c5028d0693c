/* A two-or-more-rank MPI check for acceptance-middleware-mpi (issue 19):
 * a ping-pong of patterned messages between ranks 0 and 1 (8 B to 64 KiB,
 * every byte checked on both sides) and an MPI_Allreduce over all ranks
 * (the sum checked against the closed form). Prints one "mpi_check: ok"
 * line from rank 0 and exits 0 only if every check held.
 * With "bench" as its argument it also times ranks 0 and 1 afterwards (a
 * benchmark for docs/MIDDLEWARE.md, never a test): 2,000 8-byte round
 * trips (half the round trip, as perftest's latency) and 500 64 KiB ones
 * (bytes moved per second, both ways together, as fi_pingpong counts). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ranks 0 and 1: `n` round trips of `len` bytes; seconds on rank 0. */
static double round_trips(int rank, unsigned char* buf, int len, int n) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  for (int i = 0; i < n && rank < 2; ++i) {
    if (rank == 0) {
      MPI_Send(buf, len, MPI_BYTE, 1, 99, MPI_COMM_WORLD);
      MPI_Recv(buf, len, MPI_BYTE, 1, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(buf, len, MPI_BYTE, 0, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(buf, len, MPI_BYTE, 0, 99, MPI_COMM_WORLD);
    }
  }
  return MPI_Wtime() - t0;
}

static unsigned char pattern(int round, size_t i) { return (unsigned char)(round * 31 + i * 7 + 1); }

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int bad = 0;
  const size_t max = 64 * 1024;
  unsigned char* buf = malloc(max);
  int round = 0;
  for (size_t len = 8; len <= max && size >= 2 && rank < 2; len *= 8, ++round) {
    for (int rep = 0; rep < 10; ++rep) {
      if (rank == 0) {
        for (size_t i = 0; i < len; ++i) buf[i] = pattern(round, i);
        MPI_Send(buf, (int)len, MPI_BYTE, 1, round, MPI_COMM_WORLD);
        memset(buf, 0, len);
        MPI_Recv(buf, (int)len, MPI_BYTE, 1, round, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (size_t i = 0; i < len; ++i) bad += buf[i] != (unsigned char)~pattern(round, i);
      } else {
        memset(buf, 0, len);
        MPI_Recv(buf, (int)len, MPI_BYTE, 0, round, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (size_t i = 0; i < len; ++i) {
          bad += buf[i] != pattern(round, i);
          buf[i] = (unsigned char)~buf[i];
        }
        MPI_Send(buf, (int)len, MPI_BYTE, 0, round, MPI_COMM_WORLD);
      }
    }
  }
  long mine = rank + 1, sum = 0;
  MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  bad += sum != (long)size * (size + 1) / 2;
  int all_bad = 0;
  MPI_Reduce(&bad, &all_bad, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    if (all_bad == 0) printf("mpi_check: ok, %d ranks\n", size);
    else printf("mpi_check: %d bad bytes or sums, %d ranks\n", all_bad, size);
  }
  if (argc > 1 && strcmp(argv[1], "bench") == 0 && size >= 2) {
    const double lat = round_trips(rank, buf, 8, 2000);
    const double bw = round_trips(rank, buf, (int)max, 500);
    if (rank == 0)
      printf("mpi_check: bench 8 B %.1f us (half round trip), 64 KiB %.0f MB/s\n", lat / 2000 / 2 * 1e6,
             500.0 * 2 * max / bw / 1e6);
  }
  free(buf);
  MPI_Finalize();
  return all_bad == 0 ? 0 : 1;
}
