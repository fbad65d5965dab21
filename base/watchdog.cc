#include "base/watchdog.h"

#include <fcntl.h>
#include <semaphore.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

namespace tpusim {
namespace {

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

constexpr auto kCheckEvery = std::chrono::milliseconds(250);

// States of a rank on the board.
constexpr int32_t kBusy = 0;
constexpr int32_t kWaiting = 1;
constexpr int32_t kFinished = 2;

// Set by SIGTERM (mpirun stopping the job): the patrol then looks for a dead
// rank to report and raises the alarm (kStopped when there is none).
std::atomic<bool> g_terminating{false};

// The semaphore the patrol of this process sleeps on, which SIGTERM posts (a
// signal handler may only post a semaphore: async-signal-safe) so that the
// patrol looks at once: mpirun kills the job's processes soon after its
// SIGTERM, and on a loaded machine a patrol that only looked every 250 ms could
// be killed before it named the dead rank.
std::atomic<sem_t*> g_patrol_wake{nullptr};

extern "C" void OnTerminate(int /*signal*/) {
  g_terminating.store(true);
  if (sem_t* wake = g_patrol_wake.load()) ::sem_post(wake);
}

// Whether this rank's watchdog should look at the other processes' ranks now (a
// dead or frozen one): what it would find is the same for every rank of this
// process on `board`, so one look per board per process per kCheckEvery is enough.
// Every rank looking made the looks quadratic: 7,680 ranks scanning 7,680 slots
// four times a second took a sixth of a v5p-12288 replay's CPU.
bool ClaimPeerLook(const std::string& board) {
  static std::mutex mutex;
  static std::unordered_map<std::string, int64_t> next_look_us;
  const int64_t now = NowUs();
  const int64_t period_us = std::chrono::duration_cast<std::chrono::microseconds>(kCheckEvery).count();
  std::lock_guard<std::mutex> lock(mutex);
  int64_t& next = next_look_us[board];
  if (now < next) return false;
  next = now + period_us * 3 / 4;  // a little early, so no period goes without a look
  return true;
}

// Sleeps until `wait` has passed or a post of `wake` wakes the thread.
void SleepOrWake(sem_t& wake, std::chrono::milliseconds wait) {
  timespec deadline{};
  ::clock_gettime(CLOCK_MONOTONIC, &deadline);
  deadline.tv_nsec += static_cast<long>(wait.count()) * 1'000'000;
  deadline.tv_sec += deadline.tv_nsec / 1'000'000'000;
  deadline.tv_nsec %= 1'000'000'000;
  ::sem_clockwait(&wake, CLOCK_MONOTONIC, &deadline);  // a timeout or EINTR is a wake too
}

}  // namespace

// The one thread per process that looks at every watchdog of the process four
// times a second: it bumps each one's heartbeat and checks its open wait. A
// thread per watchdog made a packed process of 640 ranks wake 2,560 times a
// second for nothing, and 32 x v5litepod-256's 10,240 ranks as many threads
// again as ranks, near this machine's limit of 32,768 (kernel.pid_max). A forked
// child (the tests' ranks of another process) starts its own patrol: the
// parent's thread is not in it.
class Watchdog::Patrol {
 public:
  static Patrol& OfThisProcess() {
    static std::mutex mutex;
    static Patrol* patrol = nullptr;  // never destroyed: its thread runs until the process ends
    std::lock_guard<std::mutex> lock(mutex);
    if (!patrol || patrol->pid_ != ::getpid()) patrol = new Patrol;
    return *patrol;
  }

  void Add(Watchdog* dog) {
    std::lock_guard<std::mutex> lock(mutex_);
    dogs_.push_back(dog);
  }
  // Returns once the patrol is not looking at `dog` and never will again, and
  // its alarm handler, if one is running, has returned.
  void Remove(Watchdog* dog) {
    std::unique_lock<std::mutex> lock(mutex_);
    std::erase(dogs_, dog);
    handled_.wait(lock, [&] { return std::find(alarmed_.begin(), alarmed_.end(), dog) == alarmed_.end(); });
  }

 private:
  Patrol() : pid_(::getpid()) {
    ::sem_init(&wake_, 0, 0);
    g_patrol_wake.store(&wake_);
    std::signal(SIGTERM, OnTerminate);
    std::thread([this] { Run(); }).detach();
  }

  // Looks four times a second, and at once on SIGTERM. A watchdog whose alarm
  // goes off is watched no more (its wait stays open); its handler runs on a
  // thread of its own, so a handler that blocks (on a slow stderr, on the job's
  // abort) neither stops the heartbeats of the process's other ranks nor delays
  // their alarms. A watchdog's destructor waits for its handler to return.
  [[noreturn]] void Run() {
    for (;;) {
      SleepOrWake(wake_, kCheckEvery);
      std::lock_guard<std::mutex> lock(mutex_);
      for (size_t i = 0; i < dogs_.size();) {
        Watchdog* dog = dogs_[i];
        dog->Beat();
        std::optional<Alarm> alarm = dog->Check();
        if (!alarm) {
          ++i;
          continue;
        }
        dogs_.erase(dogs_.begin() + static_cast<std::ptrdiff_t>(i));
        alarmed_.push_back(dog);
        std::thread([this, dog, alarm = std::move(*alarm)] { Raise(dog, alarm); }).detach();
      }
    }
  }

  void Raise(Watchdog* dog, const Alarm& alarm) {
    dog->options_.on_alarm(alarm);
    std::lock_guard<std::mutex> lock(mutex_);
    std::erase(alarmed_, dog);
    handled_.notify_all();
  }

  const pid_t pid_;
  sem_t wake_;
  std::mutex mutex_;
  std::vector<Watchdog*> dogs_;
  std::vector<Watchdog*> alarmed_;  // whose handler is running
  std::condition_variable handled_;
};

// One slot per rank in a shared-memory segment of the job (steady_clock is
// CLOCK_MONOTONIC, shared by every process of a machine).
struct Watchdog::Board {
  struct Slot {
    std::atomic<int64_t> since_us;  // 0: the rank never wrote (another machine)
    std::atomic<int64_t> step;
    // Bumped by the process's patrol at every look (kCheckEvery): it stops
    // only when the whole process does (SIGSTOP, a debugger, a frozen VM).
    std::atomic<int64_t> heartbeat_us;
    std::atomic<int32_t> state;  // kBusy, kWaiting, kFinished
    std::atomic<int32_t> pid;
    char what[40];  // best effort: may tear, it is only printed
  };
  // Padded so that the slots after it keep their 8-byte alignment (a
  // misaligned 64-bit atomic may tear or take a bus lock).
  struct alignas(alignof(Slot)) Header {
    std::atomic<int32_t> fired;
  };
  static_assert(sizeof(Header) % alignof(Slot) == 0);
  static_assert(std::atomic<int64_t>::is_always_lock_free);

  Header* header = nullptr;
  Slot* slots = nullptr;
  size_t bytes = 0;
  int size = 0;

  static Board* Open(const std::string& name, int world_size) {
    const int fd = ::shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
    if (fd < 0) return nullptr;
    auto* board = new Board;
    board->size = world_size;
    board->bytes = sizeof(Header) + sizeof(Slot) * static_cast<size_t>(world_size);
    // Every rank sizes it the same; zero-filled by the kernel.
    void* memory = ::ftruncate(fd, static_cast<off_t>(board->bytes)) == 0
                       ? ::mmap(nullptr, board->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                       : MAP_FAILED;
    ::close(fd);
    if (memory == MAP_FAILED) {
      delete board;
      return nullptr;
    }
    board->header = static_cast<Header*>(memory);
    board->slots = reinterpret_cast<Slot*>(static_cast<char*>(memory) + sizeof(Header));
    return board;
  }

  ~Board() {
    if (header) ::munmap(header, bytes);
  }
};

Watchdog::Watchdog(Options options) : options_(std::move(options)) {
  if (options_.deadline_s <= 0) return;
  if (!options_.on_alarm) throw std::invalid_argument("Watchdog: a deadline without on_alarm");
  if (!options_.board.empty()) board_ = Board::Open(options_.board, options_.world_size);
  if (board_ && options_.rank >= 0 && options_.rank < board_->size) {
    board_->slots[options_.rank].pid.store(static_cast<int32_t>(::getpid()));
  }
  Publish(kBusy, "", -1);
  Beat();
  patrol_ = &Patrol::OfThisProcess();
  patrol_->Add(this);
}

Watchdog::~Watchdog() {
  if (patrol_) patrol_->Remove(this);
  Publish(kFinished, "", -1);
  // The name goes now; ranks still running keep their mapping.
  if (board_) ::shm_unlink(options_.board.c_str());
  delete board_;
}

void Watchdog::UnlinkBoardName() const {
  if (board_) ::shm_unlink(options_.board.c_str());
}

void Watchdog::Publish(int state, const char* what, int64_t step) {
  if (!board_ || options_.rank < 0 || options_.rank >= board_->size) return;
  Board::Slot& slot = board_->slots[options_.rank];
  std::strncpy(slot.what, what, sizeof(slot.what) - 1);
  slot.step.store(step, std::memory_order_relaxed);
  slot.state.store(state, std::memory_order_relaxed);
  slot.since_us.store(NowUs(), std::memory_order_release);
}

void Watchdog::Beat() {
  if (!board_ || options_.rank < 0 || options_.rank >= board_->size) return;
  board_->slots[options_.rank].heartbeat_us.store(NowUs(), std::memory_order_release);
}

void Watchdog::SetStep(int64_t step) {
  current_step_.store(step, std::memory_order_relaxed);
  // Busy with a new step from now (unless inside a wait, which says more).
  if (options_.deadline_s > 0 && sequence_.load(std::memory_order_relaxed) % 2 == 0) {
    Publish(kBusy, "", step);
  }
}

Watchdog::Scope::Scope(Watchdog* dog, const char* what, int64_t step, int peer, const char* group, double patience)
    : dog_(dog && dog->options_.deadline_s > 0 ? dog : nullptr) {
  if (!dog_) return;
  // Fields first, then the sequence turns odd: the thread reads them only while
  // the sequence is odd and unchanged across its read.
  dog_->what_.store(what, std::memory_order_relaxed);
  dog_->group_.store(group, std::memory_order_relaxed);
  dog_->step_.store(step, std::memory_order_relaxed);
  dog_->peer_.store(peer, std::memory_order_relaxed);
  dog_->patience_.store(patience, std::memory_order_relaxed);
  dog_->start_us_.store(NowUs(), std::memory_order_relaxed);
  dog_->sequence_.fetch_add(1, std::memory_order_release);
  dog_->Publish(kWaiting, what, step);
}

Watchdog::Scope::~Scope() {
  if (!dog_) return;
  dog_->sequence_.fetch_add(1, std::memory_order_release);
  dog_->Publish(kBusy, "", dog_->current_step_.load(std::memory_order_relaxed));
}

// What rank r last published: "waiting for WHAT STEP" or "busy at step STEP".
std::string Watchdog::StateOf(int r) const {
  const Board::Slot& slot = board_->slots[r];
  char what[sizeof(slot.what)] = {};
  std::memcpy(what, slot.what, sizeof(what) - 1);
  const int64_t step = slot.step.load(std::memory_order_relaxed);
  const std::string at = step >= 0 ? fmt::format(" {}", step) : "";
  if (slot.state.load(std::memory_order_relaxed) == kWaiting) return fmt::format("waiting for {}{}", what, at);
  return step >= 0 ? fmt::format("busy at step {}", step) : "busy";
}

// The board holds every rank of this machine; the ranks of one process sit in
// consecutive slots and live or die together, so each other process is looked at
// once (this one is alive), and a finished rank is never a culprit.
int Watchdog::FirstOtherProcessRank(const std::function<bool(const Board&, int rank, int32_t pid)>& test) const {
  if (!board_) return -1;
  const int32_t self = static_cast<int32_t>(::getpid());
  int32_t looked_at = self;
  for (int r = 0; r < board_->size; ++r) {
    const Board::Slot& slot = board_->slots[r];
    const int32_t pid = slot.pid.load(std::memory_order_relaxed);
    if (pid <= 0 || pid == self || pid == looked_at || slot.state.load(std::memory_order_relaxed) == kFinished)
      continue;
    looked_at = pid;
    if (test(*board_, r, pid)) return r;
  }
  return -1;
}

// A rank of this machine, in another process, whose heartbeat has not moved for
// longer than `stale_s` while it has not finished: its process is stopped or
// frozen. -1 when there is none.
int Watchdog::FrozenRank(double stale_s) const {
  const int64_t now = NowUs();
  return FirstOtherProcessRank([&](const Board& board, int rank, int32_t) {
    const int64_t beat = board.slots[rank].heartbeat_us.load(std::memory_order_acquire);
    return beat > 0 && static_cast<double>(now - beat) * 1e-6 > stale_s;
  });
}

// "rank 3, core 0/2 (...): its process (pid 7) has not run for 5.1 s (stopped or
// frozen; last state: waiting for the cross-replica sum of step 6152)".
std::string Watchdog::Frozen(int r) const {
  const Board::Slot& slot = board_->slots[r];
  const double stale_s = static_cast<double>(NowUs() - slot.heartbeat_us.load(std::memory_order_acquire)) * 1e-6;
  std::string who = fmt::format("rank {}", r);
  if (options_.describe) who += ", " + options_.describe(r);
  return fmt::format(
      "{}: its process (pid {}) has not run for {:.1f} s (stopped or frozen; last "
      "state: {})",
      who, slot.pid.load(std::memory_order_relaxed), stale_s, StateOf(r));
}

// The rank this rank's wait is most likely stuck on: a frozen one first (its
// heartbeat stale for half the deadline), else the one of this machine that has
// been busy (not waiting) longest, if longer than the deadline: a stalled rank
// the others are all waiting for.
std::string Watchdog::Culprit() const {
  if (!board_) return "";
  if (const int frozen = FrozenRank(options_.deadline_s / 2); frozen >= 0) return "; " + Frozen(frozen);
  const int64_t now = NowUs();
  int worst = -1;
  int64_t worst_since = now;
  for (int r = 0; r < board_->size; ++r) {
    const Board::Slot& slot = board_->slots[r];
    const int64_t since = slot.since_us.load(std::memory_order_acquire);
    if (since == 0 || slot.state.load(std::memory_order_relaxed) != kBusy) continue;
    if (since < worst_since) {
      worst = r;
      worst_since = since;
    }
  }
  const double busy_s = static_cast<double>(now - worst_since) * 1e-6;
  if (worst < 0 || busy_s <= options_.deadline_s) return "";
  const int64_t step = board_->slots[worst].step.load(std::memory_order_relaxed);
  std::string who = fmt::format("rank {}", worst);
  if (options_.describe) who += ", " + options_.describe(worst);
  return fmt::format("; {} has been busy without waiting for {:.1f} s{}", who, busy_s,
                     step >= 0 ? fmt::format(" (at step {})", step) : "");
}

std::string Watchdog::DeadlineBasis() const {
  return options_.deadline_basis.empty() ? fmt::format("run.watchdog_s = {:g}", options_.deadline_s)
                                         : options_.deadline_basis;
}

std::string Watchdog::Message(double waited_s) const {
  const char* what = what_.load(std::memory_order_relaxed);
  const char* group = group_.load(std::memory_order_relaxed);
  const int64_t step = step_.load(std::memory_order_relaxed);
  const int peer = peer_.load(std::memory_order_relaxed);
  std::string waited_for = what ? what : "?";
  if (step >= 0) waited_for += fmt::format(" {}", step);
  std::string from;
  if (peer >= 0) {
    from = fmt::format(" from rank {}", peer);
    if (options_.describe) from += ", " + options_.describe(peer);
  } else if (group) {
    from = fmt::format(" from {}", group);
  }
  return fmt::format("tpusim: [{}] error: watchdog: waited {:.1f} s for {}{}{} ({}); stopping the job", options_.self,
                     waited_s, waited_for, from, Culprit(), DeadlineBasis());
}

// One look: a dead peer, mpirun stopping us, a peer frozen for the deadline, or
// the open wait past its deadline.
std::optional<Watchdog::Alarm> Watchdog::Check() {
  const bool terminating = g_terminating.load();
  const bool look = board_ && (terminating || ClaimPeerLook(options_.board));
  const int dead = look ? DeadRank() : -1;
  if (dead >= 0) return ReportDeath(dead);
  if (terminating) return Alarm{AlarmKind::kStopped, ""};  // nothing to add
  const int frozen = look ? FrozenRank(options_.deadline_s) : -1;
  if (frozen >= 0) return ReportFrozen(frozen);
  const uint64_t before = sequence_.load(std::memory_order_acquire);
  if (before % 2 == 0) return std::nullopt;  // no wait open
  const double waited_s = static_cast<double>(NowUs() - start_us_.load(std::memory_order_relaxed)) * 1e-6;
  if (waited_s <= options_.deadline_s * patience_.load(std::memory_order_relaxed)) {
    return std::nullopt;
  }
  // Still the same wait? (It may have closed and another opened meanwhile.)
  if (sequence_.load(std::memory_order_acquire) != before) return std::nullopt;
  return Fire(waited_s);
}

int Watchdog::DeadRank() const {
  return FirstOtherProcessRank([](const Board&, int, int32_t pid) { return ::kill(pid, 0) != 0 && errno == ESRCH; });
}

bool Watchdog::FirstToFire() {
  int32_t expected = 0;
  return !board_ || board_->header->fired.compare_exchange_strong(expected, 1);
}

// Only called with a board (DeadRank found the rank on it).
Watchdog::Alarm Watchdog::ReportDeath(int rank) {
  Alarm alarm{AlarmKind::kPeerDied, ""};
  if (!FirstToFire()) return alarm;
  const Board::Slot& slot = board_->slots[rank];
  const int64_t step = slot.step.load(std::memory_order_relaxed);
  std::string who = fmt::format("rank {}", rank);
  if (options_.describe) who += ", " + options_.describe(rank);
  alarm.line = fmt::format("tpusim: [{}] error: {} died: its process (pid {}) is gone{}; stopping the job",
                           options_.self, who, slot.pid.load(std::memory_order_relaxed),
                           step >= 0 ? fmt::format(" (last seen at step {})", step) : "");
  return alarm;
}

// Only called with a board (FrozenRank found the rank on it).
Watchdog::Alarm Watchdog::ReportFrozen(int rank) {
  Alarm alarm{AlarmKind::kDeadline, ""};
  if (!FirstToFire()) return alarm;
  alarm.line = fmt::format("tpusim: [{}] error: watchdog: {} ({}); stopping the job", options_.self, Frozen(rank),
                           DeadlineBasis());
  ::shm_unlink(options_.board.c_str());
  return alarm;
}

// The line (unless another rank of the job already has it); the first rank also
// takes the board's name away, as nobody new should join a job that is ending.
Watchdog::Alarm Watchdog::Fire(double waited_s) {
  Alarm alarm{AlarmKind::kDeadline, ""};
  if (!FirstToFire()) return alarm;
  alarm.line = Message(waited_s);
  if (board_) ::shm_unlink(options_.board.c_str());
  return alarm;
}

namespace {

// The inode of this process's network namespace ("net:[4026531992]" -> "4026531992"),
// or "" when /proc does not say.
std::string NetworkNamespaceId() {
  char link[64] = {};
  const ssize_t n = ::readlink("/proc/self/ns/net", link, sizeof(link) - 1);
  if (n <= 0) return "";
  std::string id(link, static_cast<size_t>(n));
  id.erase(std::remove_if(id.begin(), id.end(), [](char c) { return c < '0' || c > '9'; }), id.end());
  return id;
}

}  // namespace

std::string JobBoardName() {
  for (const char* variable : {"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid"}) {
    if (const char* id = std::getenv(variable)) {
      std::string name = std::string("/tpusim-watchdog-") + id;
      const std::string net = NetworkNamespaceId();
      if (!net.empty()) name += "-net" + net;
      std::replace_if(
          name.begin() + 1, name.end(), [](char c) { return c == '/' || c == '@'; }, '-');
      return name;
    }
  }
  return "";
}

}  // namespace tpusim
