// One deliberate leak of 4242 bytes after MPI_Init and MPI_Finalize (test
// sanitizers.leak_check_sees_past_mpi): LeakSanitizer, with the suppressions and unwinder of the
// sanitizer build, must report it and nothing of the MPI stack's.
#include <mpi.h>

#include <cstdio>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  char* leaked = new char[4242];
  leaked[0] = 'x';
  MPI_Finalize();
  std::printf("leaking %d bytes at %p\n", 4242, static_cast<void*>(leaked));
  return 0;
}
