#include "sim/host/host_outfeed.h"

#include <algorithm>
#include <thread>
#include <tuple>

#include "base/backoff.h"
#include "base/clock.h"
#include "base/error.h"
#include "cluster/message_tags.h"

namespace tpusim::sim::host {

OutfeedHost::OutfeedHost(const cluster::Transport& world, const run::LoopPlan& loops, int records_per_step,
                         int num_hosts, double origin_s, bool sleep_when_idle)
    : world_(world),
      loops_(loops),
      records_per_step_(records_per_step),
      num_hosts_(num_hosts),
      origin_s_(origin_s),
      sleep_when_idle_(sleep_when_idle) {}

// Receives one pending outfeed record or (rank 0) loop summary; false if none.
bool OutfeedHost::ReceiveOne() {
  std::optional<cluster::Pending> pending = world_.TryProbe(cluster::kAnySource, cluster::kTagOutfeed);
  if (!pending && world_.rank() == 0) {
    pending = world_.TryProbe(cluster::kAnySource, cluster::kTagLoopSummary);
  }
  if (pending) Receive(*pending);
  return pending.has_value();
}

void OutfeedHost::Poll() {
  while (ReceiveOne()) {
  }
  for (wire::PostLoopHook* hook : hooks_) hook->Progress();
}

void OutfeedHost::Receive(const cluster::Pending& pending) {
  if (pending.tag == cluster::kTagLoopSummary) {
    LoopSummary s;
    world_.Recv(std::as_writable_bytes(std::span(&s, 1)), pending.source, cluster::kTagLoopSummary);
    AddSummary(s);
    return;
  }
  if (pending.tag != cluster::kTagOutfeed || pending.bytes < sizeof(wire::OutfeedRecord)) {
    Fail("host rank {}: unexpected message (tag {}, {} bytes) from rank {}", world_.rank(), pending.tag, pending.bytes,
         pending.source);
  }
  std::vector<std::byte> bytes(pending.bytes);
  world_.Recv(bytes, pending.source, cluster::kTagOutfeed);
  wire::OutfeedMessage m = sim::wire::DecodeOutfeed(bytes);
  const int64_t loop = m.record.step / loops_.infeed_steps_per_loop();
  pending_[loop].push_back(std::move(m));
  while (loops_completed_ < loops_.num_loops && static_cast<int64_t>(pending_[loops_completed_].size()) ==
                                                    loops_.infeed_steps_per_loop() * records_per_step_) {
    CompleteLoop(loops_completed_);
  }
}

void OutfeedHost::CompleteLoop(int64_t loop) {
  wire::LoopOutfeed out{loop, std::move(pending_[loop])};
  pending_.erase(loop);
  // Dequeue order of §7.2: step-major, then replica id, then logical core.
  std::sort(out.records.begin(), out.records.end(), [](const wire::OutfeedMessage& a, const wire::OutfeedMessage& b) {
    return std::tie(a.record.step, a.record.replica, a.record.logical_core) <
           std::tie(b.record.step, b.record.replica, b.record.logical_core);
  });
  for (wire::PostLoopHook* hook : hooks_) hook->AfterLoop(out);
  LoopSummary s;
  s.loop = loop;
  s.hosts = 1;
  s.end_s = MonotonicSeconds() - origin_s_;
  for (const wire::OutfeedMessage& m : out.records) {
    s.loss_sum += m.record.loss_sum;
    s.rows += m.record.rows;
    s.global_step = std::max(s.global_step, m.record.global_step);
    if (m.record.step + 1 != (loop + 1) * loops_.infeed_steps_per_loop()) continue;
    s.cores_first_done_s = s.cores_first_done_s > 0 ? std::min(s.cores_first_done_s, m.record.done_s) : m.record.done_s;
    s.cores_done_s = std::max(s.cores_done_s, m.record.done_s);
  }
  ++loops_completed_;
  if (world_.rank() == 0) {
    AddSummary(s);
  } else {
    world_.Send(std::as_bytes(std::span(&s, 1)), 0, cluster::kTagLoopSummary);
  }
}

void OutfeedHost::AddSummary(const LoopSummary& s) {
  LoopSummary& total = summaries_[s.loop];
  total.loop = s.loop;
  total.loss_sum += s.loss_sum;
  total.rows += s.rows;
  total.global_step = std::max(total.global_step, s.global_step);
  total.end_s = std::max(total.end_s, s.end_s);
  total.cores_done_s = std::max(total.cores_done_s, s.cores_done_s);
  if (s.cores_first_done_s > 0) {
    total.cores_first_done_s =
        total.cores_first_done_s > 0 ? std::min(total.cores_first_done_s, s.cores_first_done_s) : s.cores_first_done_s;
  }
  total.hosts += s.hosts;
  while (summaries_.count(summaries_done_) && summaries_[summaries_done_].hosts == num_hosts_) {
    if (on_loop_done) on_loop_done(summaries_[summaries_done_]);
    ++summaries_done_;
  }
}

bool OutfeedHost::Done() const {
  const bool mine = loops_completed_ == loops_.num_loops;
  const bool summaries = world_.rank() != 0 || summaries_done_ == loops_.num_loops;
  return mine && summaries &&
         std::all_of(hooks_.begin(), hooks_.end(), [](wire::PostLoopHook* h) { return h->Done(); });
}

void OutfeedHost::Finish(Watchdog* watchdog) {
  if (records_per_step_ == 0) {
    while (loops_completed_ < loops_.num_loops) CompleteLoop(loops_completed_);
  }
  Watchdog::Scope wait(watchdog, "the outfeed, loop summaries and post-loop work of loop", loops_completed_, -1,
                       "its cores, the other hosts or its root workers");
  Backoff backoff(sleep_when_idle_);
  while (!Done()) {
    Poll();
    backoff.Pause();
  }
}

}  // namespace tpusim::sim::host
