// The token bucket that caps a host's examples/s, on the injected clock
// (base/clock.h) so throttling is tested without real waiting.
#pragma once

#include <cstdint>
#include <mutex>

#include "base/clock.h"

namespace tpusim::infeed {

// Caps a rate (examples/s) with a token bucket holding at most `burst` tokens; starts
// empty so the first batch already pays for itself. Acquire reserves tokens under a
// lock and sleeps outside it, so concurrent callers share the rate fairly.
class TokenBucket {
 public:
  // rate_per_sec <= 0 means unlimited. Borrows `clock`, which must outlive this.
  TokenBucket(double rate_per_sec, double burst, Clock& clock);

  // Takes `tokens`, sleeping on the clock until the bucket has paid for them.
  void Acquire(int64_t tokens);

 private:
  int64_t ReserveUs(int64_t tokens);

  double rate_per_sec_;
  double burst_;
  Clock& clock_;
  std::mutex mu_;
  double tokens_ = 0;
  int64_t last_us_;
};

}  // namespace tpusim::infeed
