#include "sim/outfeed.h"

#include <algorithm>
#include <chrono>

#include "base/error.h"

namespace tpusim::sim {
namespace {

double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

OutfeedHost::OutfeedHost(const cluster::Communicator& world, const LoopPlan& loops,
                         int records_per_step, int num_hosts, double start_s_offset)
    : world_(world), loops_(loops), records_per_step_(records_per_step), num_hosts_(num_hosts),
      start_(start_s_offset) {
  // Loops with nothing to collect (a host whose cores are outside every replica)
  // complete as soon as they are looked at.
}

void OutfeedHost::Poll() {
  for (;;) {
    int flag = 0;
    MPI_Status status;
    cluster::CheckMpi(MPI_Iprobe(MPI_ANY_SOURCE, kTagOutfeed, world_.get(), &flag, &status), "MPI_Iprobe (outfeed)");
    if (!flag && world_.rank() == 0) {
      cluster::CheckMpi(MPI_Iprobe(MPI_ANY_SOURCE, kTagLoopSummary, world_.get(), &flag, &status),
                        "MPI_Iprobe (loop summary)");
    }
    if (!flag) return;
    Receive(status);
  }
}

void OutfeedHost::Receive(const MPI_Status& status) {
  if (status.MPI_TAG == kTagLoopSummary) {
    LoopSummary s;
    cluster::CheckMpi(MPI_Recv(&s, sizeof(s), MPI_BYTE, status.MPI_SOURCE, kTagLoopSummary, world_.get(),
                               MPI_STATUS_IGNORE), "MPI_Recv (loop summary)", status.MPI_SOURCE);
    AddSummary(s);
    return;
  }
  if (status.MPI_TAG != kTagOutfeed) {
    Fail("host rank {}: unexpected message tag {} from rank {}", world_.rank(), status.MPI_TAG, status.MPI_SOURCE);
  }
  OutfeedRecord r;
  cluster::CheckMpi(MPI_Recv(&r, sizeof(r), MPI_BYTE, status.MPI_SOURCE, kTagOutfeed, world_.get(),
                             MPI_STATUS_IGNORE), "MPI_Recv (outfeed)", status.MPI_SOURCE);
  int64_t loop = r.step / loops_.infeed_steps_per_loop();
  pending_[loop].push_back(r);
  while (loops_completed_ < loops_.num_loops &&
         static_cast<int64_t>(pending_[loops_completed_].size()) ==
             loops_.infeed_steps_per_loop() * records_per_step_) {
    CompleteLoop(loops_completed_);
  }
}

void OutfeedHost::CompleteLoop(int64_t loop) {
  LoopOutfeed out{loop, std::move(pending_[loop])};
  pending_.erase(loop);
  // Dequeue order of §7.2: step-major, then replica id, then logical core.
  std::sort(out.records.begin(), out.records.end(), [](const OutfeedRecord& a, const OutfeedRecord& b) {
    return std::tie(a.step, a.replica, a.logical_core) < std::tie(b.step, b.replica, b.logical_core);
  });
  for (auto& hook : hooks_) hook->AfterLoop(out);
  LoopSummary s;
  s.loop = loop;
  s.hosts = 1;
  s.end_s = NowSeconds() - start_;
  for (const OutfeedRecord& r : out.records) {
    s.loss_sum += r.loss_sum;
    s.rows += r.rows;
    s.global_step = std::max(s.global_step, r.global_step);
  }
  ++loops_completed_;
  if (world_.rank() == 0) {
    AddSummary(s);
  } else {
    cluster::CheckMpi(MPI_Send(&s, sizeof(s), MPI_BYTE, 0, kTagLoopSummary, world_.get()), "MPI_Send (loop summary)", 0);
  }
}

void OutfeedHost::AddSummary(const LoopSummary& s) {
  LoopSummary& total = summaries_[s.loop];
  total.loop = s.loop;
  total.loss_sum += s.loss_sum;
  total.rows += s.rows;
  total.global_step = std::max(total.global_step, s.global_step);
  total.end_s = std::max(total.end_s, s.end_s);
  total.hosts += s.hosts;
  while (summaries_.count(summaries_done_) && summaries_[summaries_done_].hosts == num_hosts_) {
    if (on_loop_done) on_loop_done(summaries_[summaries_done_]);
    ++summaries_done_;
  }
}

bool OutfeedHost::Done() const {
  bool mine = loops_completed_ == loops_.num_loops;
  return world_.rank() == 0 ? mine && summaries_done_ == loops_.num_loops : mine;
}

void OutfeedHost::Finish() {
  if (records_per_step_ == 0) {
    while (loops_completed_ < loops_.num_loops) CompleteLoop(loops_completed_);
  }
  while (!Done()) {
    MPI_Status status;
    cluster::CheckMpi(MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, world_.get(), &status), "MPI_Probe (outfeed)");
    Receive(status);
  }
}

void SendOutfeed(const cluster::Communicator& world, int host_rank, const OutfeedRecord& record) {
  cluster::CheckMpi(MPI_Send(&record, sizeof(record), MPI_BYTE, host_rank, kTagOutfeed, world.get()),
                    "MPI_Send (outfeed)", host_rank);
}

}  // namespace tpusim::sim
