#include "infeed/token_bucket.h"

#include <algorithm>
#include <cmath>

namespace tpusim::infeed {

TokenBucket::TokenBucket(double rate_per_sec, double burst, Clock& clock)
    : rate_per_sec_(rate_per_sec), burst_(burst), clock_(clock), last_us_(clock.NowUs()) {}

void TokenBucket::Acquire(int64_t tokens) {
  if (rate_per_sec_ <= 0) return;
  clock_.SleepUs(ReserveUs(tokens));
}

// Refills for the time elapsed, takes the tokens (possibly going into debt) and
// returns how long the caller must wait for the debt to be repaid.
int64_t TokenBucket::ReserveUs(int64_t tokens) {
  std::lock_guard lock(mu_);
  int64_t now = clock_.NowUs();
  tokens_ = std::min(burst_, tokens_ + static_cast<double>(now - last_us_) * rate_per_sec_ * 1e-6);
  last_us_ = now;
  tokens_ -= static_cast<double>(tokens);
  if (tokens_ >= 0) return 0;
  return static_cast<int64_t>(std::ceil(-tokens_ / rate_per_sec_ * 1e6));
}

}  // namespace tpusim::infeed
