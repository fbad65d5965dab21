// A host's storage as all of its ranks see it (checkpoint.shares_input_storage, and
// the input pipeline's rate during checkpoint writes). The host's input reads and
// its cores' checkpoint writes run in different processes in the ranks layout, so
// what they share lives in a small POSIX shared-memory segment per host: one
// bandwidth budget (the token bucket of infeed/storage_model.h, kept as a
// theoretical arrival time so any process can take from it), and which save, if
// any, is being written right now and for how long writes have run in all.
//
// The host creates the segment before the run's start barrier, its cores open it
// after, and the host unlinks the name after a second barrier: the memory lives
// while a rank maps it and is freed by the kernel when the last one exits, killed
// or not. Only ranks on the host's machine can open it (a host's ranks belong on
// one machine: docs/design.md §2). A process-shared robust mutex guards the fields, so
// a rank killed while holding it does not stall the others.
#pragma once

#include <cstdint>
#include <string>

#include "base/clock.h"
#include "infeed/storage_model.h"

namespace tpusim::infeed {

// Which save is being written, and how long some write has run in all.
struct WriteActivity {
  double writing_s = 0;    // seconds with at least one write running, since the segment began
  int64_t save_step = -1;  // the global step of the save written last (-1: none yet)
};

class SharedStorage {
 public:
  struct Segment;  // what lies in shared memory (shared_storage.cc)

  // The segment's name for `host` of the run `run_token` (the same on every rank).
  static std::string Name(uint64_t run_token, int host);
  // Creates the segment `name` with the bandwidth of `config` (0: unlimited).
  // Throws Error when it exists or shared memory is unavailable.
  static SharedStorage Create(const std::string& name, const StorageConfig& config, Clock& clock);
  // Opens a segment another rank created; an invalid object (!valid()) when
  // there is none by that name on this machine.
  static SharedStorage Open(const std::string& name, Clock& clock);
  // Removes the name (the memory stays while mapped).
  static void Unlink(const std::string& name);

  SharedStorage(SharedStorage&& other) noexcept;
  SharedStorage& operator=(SharedStorage&& other) noexcept;
  SharedStorage(const SharedStorage&) = delete;
  SharedStorage& operator=(const SharedStorage&) = delete;
  ~SharedStorage();

  bool valid() const { return segment_ != nullptr; }

  // Takes `bytes` from the shared bandwidth, sleeping until they are paid for.
  // Takers are served in the order they ask, so a save's waves and the input's
  // reads interleave instead of one waiting for the other to finish.
  void Acquire(int64_t bytes);

  // A write of the save of `save_step` begins or ends (one of each per writer).
  void BeginWrite(int64_t save_step);
  void EndWrite();
  WriteActivity Activity() const;

 private:
  class Lock;
  SharedStorage(Segment* segment, Clock& clock) : segment_(segment), clock_(&clock) {}

  Segment* segment_ = nullptr;
  Clock* clock_ = nullptr;
};

}  // namespace tpusim::infeed
