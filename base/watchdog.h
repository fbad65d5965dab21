// A deadline on every blocking wait of a rank (run.watchdog_s). The rank opens a
// Scope around each wait — what it waits for, for which step, from which peer —
// and one background thread per process (the patrol, shared by every watchdog of
// the process) checks four times a second whether each open wait has lasted
// longer than the deadline. If so it raises an alarm: one line naming this
// rank's role, the wait and the peer (with the peer's role), handed to the
// caller's handler. The watchdog never ends the process itself; tpusim's app
// prints the line and exits with code 2, so mpirun stops the job within seconds
// instead of letting it hang.
//
// Every rank also publishes what it is doing on a board in shared memory (one
// slot per rank of the job on this machine: its pid, waiting for what since
// when, or busy since when). The rank that fires reads the board to name the
// likely culprit — a rank whose process has stopped running (its heartbeat, bumped
// by its process's patrol four times a second, stale: SIGSTOP, a debugger, a
// frozen VM), else a rank that has been busy, not waiting, for longer than the
// deadline (stalled) — and only the first rank of the job to fire has a line, so
// a job whose ranks all wait on one stalled peer ends with one line. The patrol
// also watches the board for a rank whose process is gone (killed, crashed)
// before it finished, and reports it by role, and for a rank whose heartbeat has
// been stale for the deadline, which it names with the state it last published;
// when mpirun stops a survivor with
// SIGTERM first, the survivor looks for the dead rank before it raises the alarm.
//
// Opening and closing a Scope is a few relaxed atomic stores: cheap enough for
// every wait of every step. The patrol never calls MPI.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace tpusim {

class Watchdog {
 public:
  // Why the watchdog fired: the rank cannot get past it.
  enum class AlarmKind {
    kDeadline,  // the open wait outlasted the deadline
    kPeerDied,  // a rank of this machine is gone before it finished
    kStopped,   // SIGTERM (mpirun stopping the job) and no dead rank to name
  };
  struct Alarm {
    AlarmKind kind = AlarmKind::kDeadline;
    // The one line to print (no newline); empty when another rank of the job has
    // printed its line already (only the first to fire speaks), and for kStopped.
    std::string line;
  };
  // Called once, on the patrol's thread, when it fires; meant to end the
  // process. If it returns, the watchdog stops watching (the wait stays open).
  using AlarmHandler = std::function<void(const Alarm&)>;

  struct Options {
    double deadline_s = 0;  // <= 0: no watchdog (scopes do nothing)
    // What the deadline is made of, quoted by the line ("run.watchdog_s = 5");
    // empty: "run.watchdog_s = DEADLINE".
    std::string deadline_basis;
    int rank = 0;
    int world_size = 1;
    std::string self;  // "rank 3, core 0/2 (replica 2, logical core 0)"
    // The role of another rank, for the message ("host 0"); called only on expiry.
    std::function<std::string(int rank)> describe;
    // Name of the job's shared-memory board (shm_open); empty: no board, every
    // expiring rank has a line.
    std::string board;
    // Required when deadline_s > 0.
    AlarmHandler on_alarm;
  };

  // Joins this process's patrol (starting it, the first time) when
  // options.deadline_s > 0; throws std::invalid_argument (a bug) if it then has
  // no on_alarm.
  explicit Watchdog(Options options);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Call once every rank of the job on this machine has constructed its watchdog
  // (after a barrier): the board's name goes, the ranks keep their mappings, and
  // the kernel frees the board when the last of them exits, so a job whose ranks
  // are killed or frozen leaves nothing in /dev/shm.
  void UnlinkBoardName() const;

  // Marks one wait; scopes do not nest (a rank waits for one thing at a time).
  // `what` must be a string literal ("the infeed shard of step"); `step` (or -1)
  // is printed after it; `peer` is the world rank waited for, or -1 with
  // `group` (a literal) naming who instead ("the other cores (all-to-all)").
  // `patience` multiplies the deadline for waits that may rightly last longer
  // (the end of a run, where ranks finish at different times).
  class Scope {
   public:
    Scope(Watchdog* dog, const char* what, int64_t step, int peer, const char* group = nullptr, double patience = 1.0);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Watchdog* dog_;
  };

  // A Scope on `dog`, which may be null (no watchdog).
  static Scope Wait(Watchdog* dog, const char* what, int64_t step, int peer, const char* group = nullptr,
                    double patience = 1.0) {
    return Scope(dog, what, step, peer, group, patience);
  }

  // Publishes the step this rank is working on (shown when it is the culprit).
  void SetStep(int64_t step);

  // The line printed on expiry of the wait now open after `waited_s`, with the
  // culprit found on the board (exposed for tests).
  std::string Message(double waited_s) const;

 private:
  struct Board;
  class Patrol;
  // One look: the alarm to raise now, if any.
  std::optional<Alarm> Check();
  Alarm Fire(double waited_s);
  void Publish(int state, const char* what, int64_t step);
  void Beat();
  std::string Culprit() const;
  std::string DeadlineBasis() const;
  std::string StateOf(int rank) const;
  // The first rank of this machine, one per other process not yet finished, for
  // which `test(slot of that rank, its pid)` holds, or -1.
  int FirstOtherProcessRank(const std::function<bool(const Board&, int rank, int32_t pid)>& test) const;
  // A rank of this machine whose process's heartbeat is older than `stale_s`, or -1.
  int FrozenRank(double stale_s) const;
  std::string Frozen(int rank) const;
  Alarm ReportFrozen(int rank);
  // A rank of this machine whose process is gone before it finished, or -1.
  int DeadRank() const;
  Alarm ReportDeath(int rank);
  // Whether this rank is the first of the job to fire (always, without a board).
  bool FirstToFire();

  Options options_;
  std::atomic<uint64_t> sequence_{0};  // odd while a wait is open
  std::atomic<int64_t> start_us_{0};
  std::atomic<const char*> what_{nullptr};
  std::atomic<const char*> group_{nullptr};
  std::atomic<int64_t> step_{-1};
  std::atomic<int> peer_{-1};
  std::atomic<double> patience_{1.0};
  std::atomic<int64_t> current_step_{-1};
  Board* board_ = nullptr;
  Patrol* patrol_ = nullptr;  // this process's, which looks at this watchdog; null without a deadline
};

// The name of this job's watchdog board on this machine, from the launcher's
// environment (Open MPI / PMIx job id) and the network namespace the process runs
// in; empty when there is no job id. A board is per machine: network namespaces on
// one computer are separate nodes to MPI (scripts/netns-cluster), so each gets its
// own board, as separate machines would — the ranks of one node share /dev/shm
// with the others', but not their fate when a link goes down.
std::string JobBoardName();

}  // namespace tpusim
