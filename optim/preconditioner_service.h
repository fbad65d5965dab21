// The host side of Lingvo's asynchronous Shampoo preconditioner pipeline
// (docs/reference/training.md §3.6): Lingvo's process-wide PreconditionerCaptain as an object a
// host rank owns. The host hands it statistics tagged with the global step they
// were gathered at; it drops a request whose key already has statistics of that
// step (Lingvo's dedupe), computes the inverse p-th root in float64 on a
// Boost.Asio thread pool (optim/inverse_root.h), and reports every finished root,
// accepted or rejected, to whoever polls. Neither call blocks on a root: Submit
// only queues work and TakeFinished only drains what is done, so the host's
// infeed, relay and outfeed keep moving while roots compute.
//
// The settings of the pipeline around the service (when results are assigned,
// which host owns which key) are part of the run's Shampoo config and live here
// too, so that optim/ holds the whole of Shampoo's configuration.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <Eigen/Core>

#include "base/clock.h"
#include "optim/inverse_root.h"

namespace tpusim::optim {

// When a root computed from loop k's statistics is assigned on the cores.
enum class PreconditionerMode {
  kSync,   // in the post-loop that ends loop k (the cores wait; staleness 0 loops)
  kDelay,  // in the post-loop that ends loop k + delay_loops (the cores wait if late)
  kAsync,  // Lingvo: each post-loop assigns whatever has finished, never waits
};

// Which host computes which key.
enum class PreconditionerPlacement {
  kHost0,   // Lingvo: one host (the first with a training core) computes every key
  kSpread,  // each key on one host, balanced by cost ~ dim^3 (distributed Shampoo)
};

struct PreconditionerServiceConfig {
  PreconditionerMode mode = PreconditionerMode::kAsync;
  int64_t delay_loops = 1;  // kDelay only, >= 0
  PreconditionerPlacement placement = PreconditionerPlacement::kHost0;
  int threads = 0;  // root workers per host; 0 = what the infeed leaves free
  InverseRootMethod method = InverseRootMethod::kAuto;
  bool operator==(const PreconditionerServiceConfig&) const = default;
};

// Parse "sync|delay|async", "host0|spread", "auto|svd|eigen|newton"; throw
// tpusim::Error "<key>: '<text>' is not one of ..." otherwise.
PreconditionerMode ParsePreconditionerMode(std::string_view text, std::string_view key);
PreconditionerPlacement ParsePreconditionerPlacement(std::string_view text, std::string_view key);
InverseRootMethod ParseInverseRootMethod(std::string_view text, std::string_view key);
std::string_view PreconditionerModeName(PreconditionerMode mode);
std::string_view PreconditionerPlacementName(PreconditionerPlacement placement);
// Throws tpusim::Error naming `<key_prefix>.<field>` for a negative delay or threads.
void ValidatePreconditionerServiceConfig(const PreconditionerServiceConfig& config, std::string_view key_prefix);

// One statistics matrix to invert.
struct RootRequest {
  std::string key;
  int64_t step = 0;            // global step the statistics were gathered at
  Eigen::MatrixXd statistics;  // [n, n]
  double exponent = -0.25;     // -1/(2r)
  double matrix_epsilon = 1e-6;
  double inverse_failure_threshold = 0.05;
};

// A finished root. A request whose statistics are not all finite is rejected
// without computing (the old preconditioner stays, as Lingvo's diff test would
// decide); so is one whose diff reaches the threshold.
struct RootResult {
  std::string key;
  int64_t step = 0;
  bool accepted = false;
  bool finite = true;  // the statistics were all finite
  InverseRootMethod method = InverseRootMethod::kSvd;
  double diff = 0.0;
  double start_s = 0.0;  // clock seconds (Clock::NowUs * 1e-6)
  double end_s = 0.0;
  double cpu_s = 0.0;     // the worker's thread CPU computing it (the modeled
                          // extra_delay_us waits, so it is not in it)
  int worker = 0;         // index of the pool thread that ran it
  Eigen::MatrixXd value;  // the root when accepted, else empty
  std::string error;      // why the computation itself failed, if it did
};

class PreconditionerService {
 public:
  struct Options {
    int threads = 1;  // >= 1
    InverseRootMethod method = InverseRootMethod::kAuto;
    int64_t extra_delay_us = 0;  // tests only: each root also sleeps this long
    Clock* clock = nullptr;      // stamps start/end; null = a SteadyClock
    // A request replaces a queued (not yet started) one of the same key instead
    // of queueing behind it. Right for async assignment, which only ever wants
    // the newest root; with few workers it keeps a backlog of stale statistics
    // from growing without bound. (Lingvo's captain queues every job on 64
    // threads.) Sync and delay assignment need every root, so they keep it off.
    bool supersede = false;
  };

  // Throws tpusim::Error for threads < 1.
  explicit PreconditionerService(const Options& options);
  // Waits for roots still running; their results are dropped.
  ~PreconditionerService();
  PreconditionerService(const PreconditionerService&) = delete;
  PreconditionerService& operator=(const PreconditionerService&) = delete;

  // Queues a root unless the key already has statistics of the same step (then
  // returns false and does nothing). Thread-safe; never blocks on a root.
  bool Submit(RootRequest request);
  // Roots finished since the last call, in completion order. Thread-safe.
  std::vector<RootResult> TakeFinished();
  // Drops every queued root that has not started; returns how many.
  int CancelQueued();
  // Roots submitted (and not superseded or cancelled) and not yet taken by
  // TakeFinished.
  int outstanding() const;
  // Queued roots replaced by a newer request of their key (supersede mode).
  int64_t superseded() const;
  // Roots being computed right now.
  int running() const { return running_.load(std::memory_order_relaxed); }
  int threads() const { return threads_; }

 private:
  struct Pool;
  RootResult Compute(const RootRequest& request, int worker) const;
  void Run(const std::string& key);

  int threads_;
  InverseRootMethod method_;
  int64_t extra_delay_us_;
  bool supersede_;
  std::unique_ptr<SteadyClock> own_clock_;
  Clock* clock_;
  mutable std::mutex mu_;
  std::map<std::string, int64_t> last_step_;               // the captain's dedupe table
  std::map<std::string, std::deque<RootRequest>> queued_;  // not started, by key
  std::deque<RootResult> finished_;
  int outstanding_ = 0;
  int64_t superseded_ = 0;
  std::atomic<int> running_{0};
  std::unique_ptr<Pool> pool_;  // last: joined first
};

}  // namespace tpusim::optim
