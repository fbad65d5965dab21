#include "sim/core/core_loop.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "base/clock.h"
#include "base/process_memory.h"
#include "sim/wire/embedding_trailer.h"
#include "sim/wire/outfeed.h"

namespace tpusim::sim::core {
namespace {

// A core's embedding ids per step: decoded from its shard's trailer (and with
// infeed.verify checked against the ids its examples must have, so a misrouted
// piece fails loudly), or zero-row pieces for a core without infeed.
class CoreEmbeddingIds {
 public:
  CoreEmbeddingIds(const embedding::EmbeddingConfig& config, bool verify, uint64_t seed) : config_(config) {
    if (verify) expected_ = std::make_unique<wire::EmbeddingEnqueue>(config_, seed);
  }

  std::span<const embedding::CooPiece> Take(int64_t step, const infeed::ShardCodec::View* shard) {
    if (!shard) {
      sim::wire::EmptyPieces(config_, pieces_);
      return pieces_;
    }
    sim::wire::DecodeCoo(shard->trailer, config_, pieces_);
    if (expected_) {
      const infeed::PieceSlice& rows = shard->slices[0];
      std::span<const int64_t> ids = shard->example_ids.subspan(static_cast<size_t>(rows.begin[0]),
                                                                static_cast<size_t>(rows.end[0] - rows.begin[0]));
      sim::wire::CheckSamePieces(config_, step, pieces_, expected_->Pieces(step, ids));
    }
    return pieces_;
  }

 private:
  const embedding::EmbeddingConfig& config_;
  std::unique_ptr<wire::EmbeddingEnqueue> expected_;
  std::vector<embedding::CooPiece> pieces_;
};

// One column a number of the steps CSV, with a fixed precision.
void AppendColumn(std::string& row, double value) { fmt::format_to(std::back_inserter(row), ",{:.9f}", value); }

// The core loop of one training (or infeed-only) core of a replica.
class CoreLoop {
 public:
  CoreLoop(CoreLoopOptions options, const CoreLoopParts& parts)
      : options_(std::move(options)),
        parts_(parts),
        metrics_(CoreIdentity(options_.role, parts.infeed.fed(), options_.trains)),
        window_start_(parts.loops.window_first_step()) {
    if (options_.embedding) {
      embedding_ids_.emplace(*options_.embedding, options_.verify_ids, options_.seed);
    }
    loop_records_.reserve(static_cast<size_t>(parts.loops.infeed_steps_per_loop()));
  }

  RankMetrics Run() {
    const int64_t per_loop = parts_.loops.infeed_steps_per_loop();
    for (int64_t step = 0; step < parts_.loops.infeed_steps; ++step) {
      Step(step);
      if ((step + 1) % per_loop == 0) EndLoop(step / per_loop);
    }
    return Finish();
  }

 private:
  double Now() const { return MonotonicSeconds() - options_.origin_s; }

  // One infeed step: dequeue and audit, train, model device time, free the slot,
  // push the outfeed record (with the loop's statistics on its last step).
  void Step(int64_t step) {
    options_.faults.AtStep(step);
    CoreStepRecord& record = loop_records_.emplace_back();
    record.step = step;
    record.start_s = Now();
    std::optional<infeed::ShardCodec::View> shard =
        parts_.infeed.Dequeue(step, &record.parts.infeed_wait_s, &record.occupancy);
    if (shard) {
      parts_.trace.Add("infeed wait", record.start_s, record.parts.infeed_wait_s);
      Audit(*shard, record);
    }
    const infeed::ShardCodec::View* view = shard ? &*shard : nullptr;
    std::span<const embedding::CooPiece> ids;
    if (embedding_ids_) ids = embedding_ids_->Take(step, view);
    const cluster::RankRole& role = options_.role;
    wire::OutfeedRecord outfeed{step, role.replica, role.logical_core, 0, 0, 0};
    if (shard) outfeed.rows = shard->slices[0].end[0] - shard->slices[0].begin[0];
    CoreStep core_step{step, view, ids, record, outfeed};
    for (CoreStage* stage : parts_.stages) stage->OnStep(core_step);
    record.parts.device_s = ModelDeviceTime(step, record.modeled_device_s);
    parts_.infeed.Release(step);
    outfeed.done_s = Now();
    record.parts.outfeed_s = PushOutfeed(step, outfeed);
    record.parts.step_s = Now() - record.start_s;
  }

  void Audit(const infeed::ShardCodec::View& shard, CoreStepRecord& record) {
    const ShardValues* values = options_.shard_values ? &*options_.shard_values : nullptr;
    CheckShard(options_.role, parts_.plan, values, shard);
    if (options_.tfrecord_verifier) {
      const std::string why = options_.tfrecord_verifier->Check(parts_.plan.features(), shard);
      if (!why.empty()) Fail("infeed.verify: step {}: {}", shard.header.step, why);
    }
    if (parts_.placement_log.enabled()) {
      const nlohmann::json line = PlacementRecord(options_.role, parts_.plan, shard, options_.name_records);
      parts_.placement_log.WriteLine(fmt::format("{}\t{}", shard.header.step, line.dump()));
    }
    for (const auto& t : shard.tensor_bytes) record.bytes += static_cast<int64_t>(t.size());
    record.bytes += static_cast<int64_t>(shard.trailer.size());
    record.src_host = shard.header.src_host;
  }

  // Sleeps for the step's modeled device time; returns the seconds it took, and
  // the model's own seconds in `modeled_s` (the sleep can only overshoot them, by
  // as much as a loaded machine takes to wake the thread). A training core
  // stopped on a non-finite value models none.
  double ModelDeviceTime(int64_t step, double& modeled_s) {
    const bool stopped = std::any_of(parts_.stages.begin(), parts_.stages.end(),
                                     [](const CoreStage* stage) { return stage->DeviceIdle(); });
    const double seconds = stopped ? 0.0 : parts_.device.SecondsAt(step);
    modeled_s = std::max(seconds, 0.0);
    if (seconds <= 0) return 0;
    const double start = Now();
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    const double slept = Now() - start;
    parts_.trace.Add("modeled device time", start, slept);
    return slept;
  }

  double PushOutfeed(int64_t step, const wire::OutfeedRecord& record) {
    const double start = Now();
    const int64_t per_loop = parts_.loops.infeed_steps_per_loop();
    const bool last_of_loop = (step + 1) % per_loop == 0;
    options_.faults.BeforeOutfeed(step);
    std::vector<std::byte> payload;
    if (last_of_loop) {
      for (CoreStage* stage : parts_.stages) stage->AddLoopOutfeed(step / per_loop, payload);
    }
    {
      Watchdog::Scope wait(&parts_.watchdog, "the host to take the outfeed of step", step, options_.host_rank);
      SendOutfeed(parts_.world, options_.host_rank, record, payload);
    }
    const double seconds = Now() - start;
    parts_.trace.Add("outfeed", start, seconds);
    return seconds;
  }

  // The loop's end: every stage in turn (Shampoo's preconditioners, checkpoints,
  // the split of the gradient sums' sync time), then the loop's steps are folded
  // and streamed.
  void EndLoop(int64_t loop) {
    for (CoreStage* stage : parts_.stages) stage->OnLoopEnd(loop, loop_records_);
    for (const CoreStepRecord& r : loop_records_) {
      metrics_.Add(r, r.step >= window_start_);
      if (parts_.steps_csv.enabled()) parts_.steps_csv.WriteLine(CsvRow(r));
    }
    loop_records_.clear();
    if (loop == 0) peak_rss_after_first_loop_kib_ = PeakResidentKib();
  }

  // A core's columns of the steps CSV (kStepsCsvHeader): who, when, the parts.
  std::string CsvRow(const CoreStepRecord& r) const {
    const cluster::RankRole& role = options_.role;
    std::string row =
        fmt::format("{},{},{},{},{},{}", r.step, r.src_host, role.host, role.ordinal, role.replica, role.logical_core);
    AppendColumn(row, r.start_s);
    ForEachCsvPart(r.parts, [&row](std::string_view, double seconds) { AppendColumn(row, seconds); });
    AppendColumn(row, r.checkpoint_s);  // kCoreTailCsvColumns: the merge moves them last
    AppendColumn(row, r.checkpoint_blocked_s);
    return row;
  }

  RankMetrics Finish() {
    for (CoreStage* stage : parts_.stages) stage->Finish(metrics_);
    RankMetrics out;
    out.core = metrics_;
    out.trace_lanes = parts_.trace.lanes();
    out.peak_rss_after_first_loop_kib = peak_rss_after_first_loop_kib_;
    return out;
  }

  CoreLoopOptions options_;
  CoreLoopParts parts_;
  CoreMetrics metrics_;
  int64_t window_start_;
  std::optional<CoreEmbeddingIds> embedding_ids_;
  std::vector<CoreStepRecord> loop_records_;  // this loop's steps, folded at its end
  int64_t peak_rss_after_first_loop_kib_ = 0;
};

}  // namespace

RankMetrics RunCoreLoop(CoreLoopOptions options, const CoreLoopParts& parts) {
  return CoreLoop(std::move(options), parts).Run();
}

}  // namespace tpusim::sim::core
