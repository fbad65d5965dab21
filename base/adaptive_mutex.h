// A std::mutex that spins briefly before it sleeps (glibc's adaptive type, up to ~100
// polls): for locks that threads on different CPUs hold for a few hundred
// nanoseconds, where a contended std::mutex sleeps in a futex and its unlock pays for
// the wake-up, system calls of ~1.3 us each on this VM. The in-process mailboxes, a
// host's package slots and free list and its enqueue workers' step claims use it: in
// alternating runs BM_InProcessHop at 256 KiB took 4.1-4.5 us a message with
// std::mutex and 3.6-3.8 us with this (4 Dec 2026). It is a std::mutex whose type is
// set at construction, so std::condition_variable and the std lock types take it.
#pragma once

#include <pthread.h>

#include <mutex>

namespace tpusim {

class AdaptiveMutex : public std::mutex {
 public:
  AdaptiveMutex() {
#ifdef PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(native_handle(), &attr);
    pthread_mutexattr_destroy(&attr);
#endif
  }
};

}  // namespace tpusim
