// The host's modeled workers (infeed/modeled_worker_pool.h) and the preprocessing
// cost paid to them (infeed/preprocess_cost.h), on fake clocks: no real waiting
// and no timing bounds. A gated clock holds every wait until the test lets it go,
// so how many waits run at once is counted, not timed.
#include "infeed/modeled_worker_pool.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "infeed/preprocess_cost.h"

namespace tpusim::infeed {
namespace {

// A fake clock whose SleepUntilUs blocks until the test opens the gate, counting
// the sleepers: how many there are now and the most there ever were.
class GatedClock final : public Clock {
 public:
  int64_t NowUs() const override { return fake_.NowUs(); }
  void SleepUs(int64_t us) override { fake_.SleepUs(us); }
  void SpinUs(int64_t us) override { fake_.SpinUs(us); }
  void SleepUntilUs(int64_t deadline_us) override {
    std::unique_lock lock(mu_);
    waits_us_.push_back(deadline_us - fake_.NowUs());
    ++sleeping_;
    most_ = std::max(most_, sleeping_);
    changed_.notify_all();
    changed_.wait(lock, [this] { return open_; });
    --sleeping_;
    lock.unlock();
    fake_.SleepUntilUs(deadline_us);
  }
  void Open() {
    std::lock_guard lock(mu_);
    open_ = true;
    changed_.notify_all();
  }
  // Blocks until `done(sleepers)` holds, rechecked when a sleeper arrives and
  // every millisecond (what else it reads does not notify this clock).
  template <typename F>
  void WaitUntil(F done) {
    std::unique_lock lock(mu_);
    while (!done(sleeping_)) changed_.wait_for(lock, std::chrono::milliseconds(1));
  }
  int most() const {
    std::lock_guard lock(mu_);
    return most_;
  }
  // How long each sleep was to last when it began, in the order they began.
  std::vector<int64_t> waits_us() const {
    std::lock_guard lock(mu_);
    return waits_us_;
  }

 private:
  FakeClock fake_;
  mutable std::mutex mu_;
  std::condition_variable changed_;
  int sleeping_ = 0;
  int most_ = 0;
  bool open_ = false;
  std::vector<int64_t> waits_us_;
};

// A fake clock whose timed sleeps wake `late_us` after their deadline, as a
// loaded machine's do.
class LateClock final : public Clock {
 public:
  explicit LateClock(int64_t late_us) : late_us_(late_us) {}
  int64_t NowUs() const override { return fake_.NowUs(); }
  void SleepUs(int64_t us) override { fake_.SleepUs(us); }
  void SpinUs(int64_t us) override { fake_.SpinUs(us); }
  void SleepUntilUs(int64_t deadline_us) override {
    if (deadline_us > fake_.NowUs()) fake_.SleepUntilUs(deadline_us + late_us_);
  }

 private:
  FakeClock fake_;
  int64_t late_us_;
};

TEST(ModeledWorkersTest, AreTheParallelismCappedByTheInputVcpus) {
  EXPECT_EQ(ModeledWorkers(16, 232), 16);  // a v4 host: 240 vCPUs less 2 per chip
  EXPECT_EQ(ModeledWorkers(16, 6.9), 6);   // whole vCPUs only
  EXPECT_EQ(ModeledWorkers(16, 16), 16);
  EXPECT_EQ(ModeledWorkers(4, std::numeric_limits<double>::infinity()), 4);
  EXPECT_EQ(ModeledWorkers(8, 0.5), 1);  // at least one
}

// Eight callers, three workers: exactly three waits start, the other five wait
// for a worker, and once the gate opens they all finish without a fourth wait
// ever running beside three.
TEST(ModeledWorkerPoolTest, NeverRunsMoreThanItsWorkersAtOnce) {
  GatedClock clock;
  ModeledWorkerPool pool(3, clock);
  std::vector<std::thread> callers;
  for (int i = 0; i < 8; ++i) callers.emplace_back([&pool] { pool.Charge(1000); });
  clock.WaitUntil([&pool](int sleeping) { return sleeping + pool.waiting() == 8; });
  EXPECT_EQ(pool.busy(), 3);
  EXPECT_EQ(pool.waiting(), 5);
  clock.Open();
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(clock.most(), 3);
  EXPECT_EQ(pool.busy(), 0);
  EXPECT_EQ(pool.charged_us(), 8000);
}

// Four workers asked at once: worker w starts its first charge w/4 of it late,
// so their waits end a quarter of a charge apart; what is charged is unchanged.
TEST(ModeledWorkerPoolTest, WorkersComeOnlineStaggeredOverTheirFirstCharge) {
  GatedClock clock;
  ModeledWorkerPool pool(4, clock);
  std::vector<std::thread> callers;
  for (int i = 0; i < 4; ++i) callers.emplace_back([&pool] { pool.Charge(1000); });
  clock.WaitUntil([](int sleeping) { return sleeping == 4; });
  clock.Open();
  for (std::thread& t : callers) t.join();
  std::vector<int64_t> waits = clock.waits_us();
  std::sort(waits.begin(), waits.end());
  EXPECT_EQ(waits, (std::vector<int64_t>{1000, 1250, 1500, 1750}));
  EXPECT_EQ(pool.charged_us(), 4000);
}

// One worker: while the first charge holds it, a second and then a third caller
// queue; they get it in that order (the costs tell the waits apart).
TEST(ModeledWorkerPoolTest, CallersGetWorkersInTheOrderTheyAsked) {
  GatedClock clock;
  ModeledWorkerPool pool(1, clock);
  std::vector<std::thread> callers;
  callers.emplace_back([&pool] { pool.Charge(1000); });
  clock.WaitUntil([](int sleeping) { return sleeping == 1; });
  for (int i = 2; i <= 5; ++i) {
    callers.emplace_back([&pool, i] { pool.Charge(1000 * i); });
    clock.WaitUntil([&pool, i](int) { return pool.waiting() == i - 1; });
  }
  clock.Open();
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(clock.waits_us(), (std::vector<int64_t>{1000, 2000, 3000, 4000, 5000}));
}

// One worker, charged 1000 us ten times on a clock that wakes 100 us late: each
// wait owes the last one's lateness, so the ten take 10 ms plus one lateness,
// not 10 x 1.1 ms.
TEST(ModeledWorkerPoolTest, ALateWakeUpIsTakenOffTheNextWait) {
  LateClock clock(100);
  ModeledWorkerPool pool(1, clock);
  for (int i = 0; i < 10; ++i) pool.Charge(1000);
  EXPECT_EQ(clock.NowUs(), 10 * 1000 + 100);
  EXPECT_EQ(pool.charged_us(), 10'000);
}

// Owing more than a charge costs: that charge does not wait and the rest stays owed.
TEST(ModeledWorkerPoolTest, ADebtLargerThanTheCostCarriesOver) {
  LateClock clock(1500);
  ModeledWorkerPool pool(1, clock);
  pool.Charge(1000);  // deadline 1000, wakes at 2500: owes 1500
  pool.Charge(1000);  // deadline 2000 has passed: no wait, owes 500
  EXPECT_EQ(clock.NowUs(), 2500);
  pool.Charge(1000);  // deadline 3000, wakes at 4500
  EXPECT_EQ(clock.NowUs(), 4500);
}

TEST(ModeledWorkerPoolTest, NothingToChargeTakesNoWorker) {
  FakeClock clock;
  ModeledWorkerPool pool(2, clock);
  pool.Charge(0);
  pool.Charge(-5);
  EXPECT_EQ(clock.NowUs(), 0);
  EXPECT_EQ(pool.charged_us(), 0);
}

// Emulated: 16 rows of 2000 us at a slow host's factor 1.5 are 48 ms, waited out
// on the pool (slept, never spun).
TEST(PreprocessCostTest, EmulatedWorkIsCostTimesRowsTimesFactorWaitedOnThePool) {
  FakeClock clock;
  ModeledWorkerPool pool(2, clock);
  PreprocessCost cost(2000, 0, clock, &pool);
  EXPECT_DOUBLE_EQ(cost.Pay(16, 1.5), 0.048);
  EXPECT_EQ(pool.charged_us(), 48'000);
  EXPECT_EQ(clock.slept_us(), 48'000);
  EXPECT_EQ(clock.spun_us(), 0);
  EXPECT_DOUBLE_EQ(cost.Pay(16), 0.032);
  EXPECT_EQ(pool.charged_us(), 80'000);
}

// Burnt: the same work spins the clock (this machine's CPU) and no pool sleeps.
TEST(PreprocessCostTest, BurntWorkStillSpins) {
  FakeClock clock;
  PreprocessCost cost(2000, 0, clock);
  EXPECT_DOUBLE_EQ(cost.Pay(16), 0.032);
  EXPECT_EQ(clock.spun_us(), 32'000);
  EXPECT_EQ(clock.slept_us(), 0);
}

// The rate cap is a wait in both modes, before the work.
TEST(PreprocessCostTest, TheRateCapSleepsBeforeTheWork) {
  FakeClock clock;
  ModeledWorkerPool pool(1, clock);
  PreprocessCost cost(10, 1000, clock, &pool);
  EXPECT_DOUBLE_EQ(cost.Pay(100), 0.001);  // 100 examples at 1000/s, then 1 ms of work
  EXPECT_EQ(clock.slept_us(), 100'000 + 1000);
  EXPECT_EQ(pool.charged_us(), 1000);
}

}  // namespace
}  // namespace tpusim::infeed
