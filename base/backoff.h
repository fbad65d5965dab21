// Waiting by polling without starving the threads being waited for. The first
// polls of a wait only yield the CPU (a prompt answer costs nothing more); once a
// wait has lasted `spin`, each poll sleeps, for a time that doubles up to `cap`.
// In the threads layout hundreds of rank threads share a few cores with the
// ProcessLink thread that carries their messages, and pollers that only yield take
// the CPU from it. In the ranks layout a poller must stay in MPI (a large send
// moves only while its sender calls MPI), so there `sleeps` is false: it yields.
#pragma once

#include <algorithm>
#include <chrono>
#include <thread>

namespace tpusim {

class Backoff {
 public:
  using Clock = std::chrono::steady_clock;
  explicit Backoff(bool sleeps = true, std::chrono::microseconds spin = std::chrono::microseconds(100),
                   std::chrono::microseconds cap = std::chrono::microseconds(500))
      : sleeps_(sleeps), spin_(spin), cap_(cap) {}

  // One idle poll: yield, or sleep once the wait has lasted `spin`.
  void Pause() {
    const std::chrono::microseconds pause = Next(sleeps_);
    if (pause.count() == 0) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(pause);
    }
  }

  // One idle poll that waits on `ready`, a future or anything with wait_for, which
  // ends the pause the moment it is ready: the same schedule as Pause with
  // `sleeps` (when `sleeps` is true), or always yielding otherwise.
  template <typename Waitable>
  void PauseOn(Waitable& ready, bool sleeps) {
    const std::chrono::microseconds pause = Next(sleeps);
    if (pause.count() == 0) {
      std::this_thread::yield();
    } else {
      ready.wait_for(pause);
    }
  }

  // How long this poll pauses: 0 (yield) while the wait is younger than `spin` or
  // when not `sleeps`, then a sleep that doubles up to `cap`.
  std::chrono::microseconds Next(bool sleeps) {
    if (!sleeps) return std::chrono::microseconds(0);
    const Clock::time_point now = Clock::now();
    if (!waiting_) {
      waiting_ = true;
      since_ = now;
    }
    if (now - since_ < spin_) return std::chrono::microseconds(0);
    sleep_ = std::min(cap_, std::max(std::chrono::microseconds(20), sleep_ * 2));
    return sleep_;
  }

  // Progress was made: the next wait starts by yielding again.
  void Reset() {
    waiting_ = false;
    sleep_ = std::chrono::microseconds(0);
  }

 private:
  bool sleeps_;
  std::chrono::microseconds spin_;
  std::chrono::microseconds cap_;
  bool waiting_ = false;
  Clock::time_point since_;
  std::chrono::microseconds sleep_{0};
};

}  // namespace tpusim
