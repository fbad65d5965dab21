#include "optim/preconditioner_service.h"

#include <array>
#include <ctime>
#include <thread>
#include <utility>

#include <fmt/format.h>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

#include "base/error.h"
#include "base/spellings.h"

namespace tpusim::optim {
namespace {

// The calling thread's CPU seconds (CLOCK_THREAD_CPUTIME_ID): what a root costs,
// whatever else shares this machine's cores.
double ThreadCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

constexpr Spellings<PreconditionerMode, 3> kModes{{{"sync", PreconditionerMode::kSync},
                                                   {"delay", PreconditionerMode::kDelay},
                                                   {"async", PreconditionerMode::kAsync}}};
constexpr Spellings<PreconditionerPlacement, 2> kPlacements{
    {{"host0", PreconditionerPlacement::kHost0}, {"spread", PreconditionerPlacement::kSpread}}};
constexpr Spellings<InverseRootMethod, 4> kMethods{{{"auto", InverseRootMethod::kAuto},
                                                    {"svd", InverseRootMethod::kSvd},
                                                    {"eigen", InverseRootMethod::kEigen},
                                                    {"newton", InverseRootMethod::kNewton}}};

}  // namespace

PreconditionerMode ParsePreconditionerMode(std::string_view text, std::string_view key) {
  return ParseSpelling(kModes, text, key);
}

PreconditionerPlacement ParsePreconditionerPlacement(std::string_view text, std::string_view key) {
  return ParseSpelling(kPlacements, text, key);
}

InverseRootMethod ParseInverseRootMethod(std::string_view text, std::string_view key) {
  return ParseSpelling(kMethods, text, key);
}

std::string_view PreconditionerModeName(PreconditionerMode mode) { return SpellingOf(kModes, mode); }

std::string_view PreconditionerPlacementName(PreconditionerPlacement placement) {
  return SpellingOf(kPlacements, placement);
}

void ValidatePreconditionerServiceConfig(const PreconditionerServiceConfig& config, std::string_view key_prefix) {
  if (config.delay_loops < 0) {
    Fail("{}.delay_loops: {} must be >= 0", key_prefix, config.delay_loops);
  }
  if (config.threads < 0) {
    Fail("{}.threads: {} must be >= 0 (0 = what the infeed workers leave free)", key_prefix, config.threads);
  }
}

// The worker threads and which of them is which (for the trace's lanes).
struct PreconditionerService::Pool {
  explicit Pool(int threads) : pool(static_cast<size_t>(threads)) {}
  int WorkerIndex() {
    std::lock_guard lock(mu);
    auto [it, added] = index.emplace(std::this_thread::get_id(), static_cast<int>(index.size()));
    return it->second;
  }
  std::mutex mu;
  std::map<std::thread::id, int> index;
  boost::asio::thread_pool pool;  // last: joined before the index goes away
};

PreconditionerService::PreconditionerService(const Options& options)
    : threads_(options.threads),
      method_(options.method),
      extra_delay_us_(options.extra_delay_us),
      supersede_(options.supersede) {
  if (options.threads < 1) Fail("preconditioner service: threads {} must be >= 1", options.threads);
  if (options.clock) {
    clock_ = options.clock;
  } else {
    own_clock_ = std::make_unique<SteadyClock>();
    clock_ = own_clock_.get();
  }
  pool_ = std::make_unique<Pool>(threads_);
}

PreconditionerService::~PreconditionerService() {
  CancelQueued();
  pool_->pool.join();
}

bool PreconditionerService::Submit(RootRequest request) {
  const std::string key = request.key;
  {
    std::lock_guard lock(mu_);
    auto it = last_step_.find(key);
    if (it != last_step_.end() && it->second == request.step) return false;
    last_step_[key] = request.step;
    std::deque<RootRequest>& queue = queued_[key];
    if (supersede_ && !queue.empty()) {
      queue.back() = std::move(request);  // the queued task computes the newer one
      ++superseded_;
      return true;
    }
    queue.push_back(std::move(request));
    ++outstanding_;
  }
  boost::asio::post(pool_->pool, [this, key] { Run(key); });
  return true;
}

// One task of the pool: the oldest queued request of `key`, if still queued.
void PreconditionerService::Run(const std::string& key) {
  RootRequest request;
  {
    std::lock_guard lock(mu_);
    std::deque<RootRequest>& queue = queued_[key];
    if (queue.empty()) return;  // cancelled
    request = std::move(queue.front());
    queue.pop_front();
    running_.fetch_add(1, std::memory_order_relaxed);
  }
  RootResult result;
  try {
    result = Compute(request, pool_->WorkerIndex());
  } catch (const std::exception& e) {  // e.g. a non-square matrix: reject, keep going
    result.key = request.key;
    result.step = request.step;
    result.diff = INFINITY;
    result.error = e.what();
  }
  std::lock_guard lock(mu_);
  finished_.push_back(std::move(result));
  running_.fetch_sub(1, std::memory_order_relaxed);
}

int PreconditionerService::CancelQueued() {
  std::lock_guard lock(mu_);
  int cancelled = 0;
  for (auto& [key, queue] : queued_) {
    cancelled += static_cast<int>(queue.size());
    queue.clear();
  }
  outstanding_ -= cancelled;
  return cancelled;
}

int64_t PreconditionerService::superseded() const {
  std::lock_guard lock(mu_);
  return superseded_;
}

RootResult PreconditionerService::Compute(const RootRequest& request, int worker) const {
  RootResult result;
  result.key = request.key;
  result.step = request.step;
  result.worker = worker;
  result.start_s = static_cast<double>(clock_->NowUs()) * 1e-6;
  if (extra_delay_us_ > 0) clock_->SleepUs(extra_delay_us_);
  const double cpu_start_s = ThreadCpuSeconds();
  result.finite = request.statistics.allFinite();
  if (result.finite) {
    InverseRootOptions options;
    options.method = method_;
    options.max_diff = request.inverse_failure_threshold;
    InverseRootResult root = ComputeInverseRoot(request.statistics, request.exponent, request.matrix_epsilon, options);
    result.method = root.method;
    result.diff = root.diff;
    result.accepted = root.accepted && root.out.allFinite();
    if (result.accepted) result.value = std::move(root.out);
  } else {
    result.diff = INFINITY;
  }
  result.cpu_s = ThreadCpuSeconds() - cpu_start_s;
  result.end_s = static_cast<double>(clock_->NowUs()) * 1e-6;
  return result;
}

std::vector<RootResult> PreconditionerService::TakeFinished() {
  std::lock_guard lock(mu_);
  std::vector<RootResult> out(std::make_move_iterator(finished_.begin()), std::make_move_iterator(finished_.end()));
  finished_.clear();
  outstanding_ -= static_cast<int>(out.size());
  return out;
}

int PreconditionerService::outstanding() const {
  std::lock_guard lock(mu_);
  return outstanding_;
}

}  // namespace tpusim::optim
