#include "optim/preconditioner_service.h"

#include <array>
#include <thread>
#include <utility>

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <fmt/format.h>

#include "base/error.h"

namespace tpusim::optim {
namespace {

template <typename Enum, size_t N>
Enum ParseName(std::string_view text, std::string_view key,
               const std::array<std::pair<const char*, Enum>, N>& names) {
  std::string allowed;
  for (const auto& [name, value] : names) {
    if (text == name) return value;
    allowed += allowed.empty() ? name : std::string(", ") + name;
  }
  Fail("{}: '{}' is not one of {}", key, text, allowed);
}

constexpr std::array<std::pair<const char*, PreconditionerMode>, 3> kModes{
    {{"sync", PreconditionerMode::kSync},
     {"delay", PreconditionerMode::kDelay},
     {"async", PreconditionerMode::kAsync}}};
constexpr std::array<std::pair<const char*, PreconditionerPlacement>, 2> kPlacements{
    {{"host0", PreconditionerPlacement::kHost0}, {"spread", PreconditionerPlacement::kSpread}}};
constexpr std::array<std::pair<const char*, InverseRootMethod>, 4> kMethods{
    {{"auto", InverseRootMethod::kAuto},
     {"svd", InverseRootMethod::kSvd},
     {"eigen", InverseRootMethod::kEigen},
     {"newton", InverseRootMethod::kNewton}}};

template <typename Enum, size_t N>
const char* NameOf(Enum value, const std::array<std::pair<const char*, Enum>, N>& names) {
  for (const auto& [name, v] : names) {
    if (v == value) return name;
  }
  return "?";
}

}  // namespace

PreconditionerMode ParsePreconditionerMode(std::string_view text, std::string_view key) {
  return ParseName(text, key, kModes);
}

PreconditionerPlacement ParsePreconditionerPlacement(std::string_view text, std::string_view key) {
  return ParseName(text, key, kPlacements);
}

InverseRootMethod ParseInverseRootMethod(std::string_view text, std::string_view key) {
  return ParseName(text, key, kMethods);
}

const char* PreconditionerModeName(PreconditionerMode mode) { return NameOf(mode, kModes); }

const char* PreconditionerPlacementName(PreconditionerPlacement placement) {
  return NameOf(placement, kPlacements);
}

void ValidatePreconditionerServiceConfig(const PreconditionerServiceConfig& config,
                                         std::string_view key_prefix) {
  if (config.delay_loops < 0) {
    Fail("{}.delay_loops: {} must be >= 0", key_prefix, config.delay_loops);
  }
  if (config.threads < 0) {
    Fail("{}.threads: {} must be >= 0 (0 = what the infeed workers leave free)", key_prefix,
         config.threads);
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
    : threads_(options.threads), method_(options.method), extra_delay_us_(options.extra_delay_us) {
  if (options.threads < 1) Fail("preconditioner service: threads {} must be >= 1", options.threads);
  if (options.clock) {
    clock_ = options.clock;
  } else {
    own_clock_ = std::make_unique<SteadyClock>();
    clock_ = own_clock_.get();
  }
  pool_ = std::make_unique<Pool>(threads_);
}

PreconditionerService::~PreconditionerService() { pool_->pool.join(); }

bool PreconditionerService::Submit(RootRequest request) {
  {
    std::lock_guard lock(mu_);
    auto it = last_step_.find(request.key);
    if (it != last_step_.end() && it->second == request.step) return false;
    last_step_[request.key] = request.step;
    ++outstanding_;
  }
  boost::asio::post(pool_->pool, [this, request = std::move(request)] {
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
  });
  return true;
}

RootResult PreconditionerService::Compute(const RootRequest& request, int worker) const {
  RootResult result;
  result.key = request.key;
  result.step = request.step;
  result.worker = worker;
  result.start_s = static_cast<double>(clock_->NowUs()) * 1e-6;
  if (extra_delay_us_ > 0) clock_->SleepUs(extra_delay_us_);
  result.finite = request.statistics.allFinite();
  if (result.finite) {
    InverseRootOptions options;
    options.method = method_;
    options.max_diff = request.inverse_failure_threshold;
    InverseRootResult root =
        ComputeInverseRoot(request.statistics, request.exponent, request.matrix_epsilon, options);
    result.method = root.method;
    result.diff = root.diff;
    result.accepted = root.accepted && root.out.allFinite();
    if (result.accepted) result.value = std::move(root.out);
  } else {
    result.diff = INFINITY;
  }
  result.end_s = static_cast<double>(clock_->NowUs()) * 1e-6;
  return result;
}

std::vector<RootResult> PreconditionerService::TakeFinished() {
  std::lock_guard lock(mu_);
  std::vector<RootResult> out(std::make_move_iterator(finished_.begin()),
                              std::make_move_iterator(finished_.end()));
  finished_.clear();
  outstanding_ -= static_cast<int>(out.size());
  return out;
}

int PreconditionerService::outstanding() const {
  std::lock_guard lock(mu_);
  return outstanding_;
}

}  // namespace tpusim::optim
