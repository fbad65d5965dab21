// main() for multi-rank GoogleTest binaries run under mpirun: every rank runs every
// test, only rank 0 prints the usual output (other ranks print only failures), and
// the exit code is non-zero on every rank if any rank failed.
#include <mpi.h>

#include <gtest/gtest.h>

#include "cluster/communicator.h"

namespace {

// Prints failures of non-zero ranks, tagged with the rank, so they are not lost.
class FailurePrinter : public testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const testing::TestPartResult& result) override {
    if (result.failed()) {
      fprintf(stderr, "[rank %d] %s:%d: %s\n", rank_, result.file_name() ? result.file_name() : "?",
              result.line_number(), result.summary());
    }
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  tpusim::cluster::MpiEnvironment mpi(&argc, &argv);
  testing::InitGoogleTest(&argc, argv);
  if (mpi.world_rank() != 0) {
    testing::TestEventListeners& listeners = testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(mpi.world_rank()));
  }
  int local = RUN_ALL_TESTS() == 0 ? 0 : 1;
  int any = 0;
  MPI_Allreduce(&local, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (mpi.world_rank() == 0 && any) fprintf(stderr, "multi-rank test failed on some rank\n");
  return any;
}
