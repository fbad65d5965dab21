#include "sim/simulation.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <random>
#include <span>
#include <thread>
#include <utility>

#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/error.h"
#include "cluster/large_messages.h"
#include "cluster/message_tags.h"
#include "infeed/modeled_worker_pool.h"
#include "run/run_features.h"
#include "run/run_validation.h"
#include "run/target_host.h"
#include "run/watchdog_deadline.h"
#include "sim/core/checkpoint_stage.h"
#include "sim/core/core_loop.h"
#include "sim/core/embedding_server.h"
#include "sim/core/shampoo_stage.h"
#include "sim/core/trainer_stage.h"
#include "sim/host/host_loop.h"
#include "sim/host/input_pipeline.h"
#include "sim/host/pipeline_calibration.h"
#include "sim/host/simulator_ceiling.h"
#include "sim/wire/embedding_trailer.h"

namespace tpusim::sim {
namespace {

using json = nlohmann::json;

// How many ranks, and how many host ranks, share this rank's machine, `node`
// (collective over the world).
NodeShare ShareOfThisNode(const cluster::Transport& world, const run::Slice& slice, int node) {
  const int32_t mine = node;
  const std::vector<std::byte> all = world.Allgather(std::as_bytes(std::span(&mine, 1)));
  std::vector<int32_t> nodes(all.size() / sizeof(int32_t));
  std::memcpy(nodes.data(), all.data(), all.size());
  NodeShare share{0, 0};
  for (size_t r = 0; r < nodes.size(); ++r) {
    if (nodes[r] != mine) continue;
    ++share.ranks;
    if (slice.layout.is_host_rank(static_cast<int>(r))) ++share.host_ranks;
  }
  return share;
}

// The run's origin on this rank's steady clock: the moment rank 0 left the start
// barrier, carried by the wall clock (one clock on one machine, within NTP's
// milliseconds across machines), so that every rank's step times lie on one
// timeline. Each rank's own exit from the barrier would not do: the in-process
// barrier releases its ranks one after another, seconds apart on a 7,680-rank
// slice, which put the report's window 8 s wide around a 0.1 s run. Collective.
double CommonOrigin(const cluster::Transport& world) {
  double wall_at_origin = RealtimeSeconds();
  world.Broadcast(std::as_writable_bytes(std::span(&wall_at_origin, 1)), 0);
  return MonotonicSeconds() - (RealtimeSeconds() - wall_at_origin);
}

// A token of this run, drawn at rank 0, that names its shared-memory segments.
uint64_t RunToken(const cluster::Transport& world) {
  uint64_t token = 0;
  if (world.rank() == 0) {
    std::random_device random;
    token = (static_cast<uint64_t>(random()) << 32 | random()) ^ static_cast<uint64_t>(getpid());
  }
  world.Broadcast(std::as_writable_bytes(std::span(&token, 1)), 0);
  return token;
}

// The deadline of run.watchdog_s or its default (run/watchdog_deadline.h).
Watchdog::Options WatchdogOptions(const run::RunConfig& config, const run::Slice& slice, const cluster::RankRole& role,
                                  const cluster::Transport& world, Watchdog::AlarmHandler on_alarm) {
  Watchdog::Options o;
  const run::WatchdogDeadline deadline = run::WatchdogDeadlineOf(config, world.size());
  o.deadline_s = deadline.seconds;
  o.deadline_basis = deadline.basis;
  o.rank = world.rank();
  o.world_size = world.size();
  o.self = fmt::format("rank {}, {}", o.rank, role.Describe());
  o.describe = [&slice](int rank) { return slice.layout.RoleOf(rank, slice.assignment).Describe(); };
  o.board = JobBoardName();
  o.on_alarm = std::move(on_alarm);
  return o;
}

// Cores of `host` that belong to a replica: each pushes one outfeed record per step.
int OutfeedCoresOnHost(const run::Slice& slice, int host) {
  int n = 0;
  for (int o = 0; o < slice.topology.cores_per_host(); ++o) {
    if (slice.assignment.replica_core_at(host, o).replica >= 0) ++n;
  }
  return n;
}

// World ranks of every core in a replica: the destinations of every delivery.
std::vector<int> TrainingCoreRanks(const run::Slice& slice) {
  std::vector<int> ranks;
  for (int h = 0; h < slice.num_hosts(); ++h) {
    for (int o = 0; o < slice.topology.cores_per_host(); ++o) {
      if (slice.assignment.replica_core_at(h, o).replica >= 0) {
        ranks.push_back(slice.layout.core_rank(h, o));
      }
    }
  }
  return ranks;
}

// The rows of a step's batch a core's shard holds (dim 0 of its first feature).
int64_t RowsOf(const infeed::ShardRoute& route) {
  return route.slices.empty() ? 0 : route.slices[0].end[0] - route.slices[0].begin[0];
}

// Root workers when the config leaves it to us: the machine's hardware threads
// shared by the host ranks on it, minus the infeed's enqueue workers, at least one.
int ServiceThreads(const run::KeyTable& keys, int host_ranks_on_node, int parallelism) {
  const int configured = keys.service().threads;
  if (configured > 0) return configured;
  const int hardware = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int share = hardware / std::max(host_ranks_on_node, 1);
  return std::max(1, share - parallelism);
}

// W of a host's modeled workers (input.cost_mode: emulate): min(infeed.parallelism,
// floor(the target host's input vCPUs)).
int ModeledInputWorkers(const run::RunConfig& config, const run::Slice& slice) {
  return infeed::ModeledWorkers(config.infeed.parallelism, TargetHostOf(config, slice.topology).input_vcpus.value);
}

}  // namespace

RankRun::RankRun(const run::RunConfig& config, const run::Slice& slice, const infeed::InfeedPlan& plan,
                 const cluster::RankRole& role, cluster::Communicators& comms, const RankRunOptions& options,
                 RunObserver* observer)
    : config_(config),
      slice_(slice),
      role_(role),
      comms_(comms),
      options_(options),
      observer_(observer),
      loops_(MakeLoopPlan(config.train)),
      plan_(plan),
      keys_(run::BuildRunKeyTable(config, plan_, slice)),
      watchdog_(WatchdogOptions(config, slice, role, *comms.world, options.on_watchdog_alarm)) {
  node_share_ = ShareOfThisNode(*comms.world, slice, options.node);
  const uint64_t run_token = CreateSharedStorage();
  comms.world->Barrier();
  watchdog_.UnlinkBoardName();
  origin_s_ = CommonOrigin(*comms.world);
  OpenSharedStorage(run_token);
}

uint64_t RankRun::CreateSharedStorage() {
  if (!config_.checkpoint.saves()) return 0;
  const uint64_t token = RunToken(*comms_.world);
  if (role_.is_host()) {
    // Its bandwidth is the input's only when the writes share it; otherwise the
    // segment only tells when the cores write.
    const infeed::StorageConfig bandwidth =
        config_.checkpoint.shares_input_storage ? config_.input.storage : infeed::StorageConfig{};
    storage_.emplace(
        infeed::SharedStorage::Create(infeed::SharedStorage::Name(token, role_.host), bandwidth, storage_clock_));
  }
  return token;
}

// A core of another machine than its host's finds no segment: it runs without
// (the host then sees no writes) unless the writes share the input's storage.
void RankRun::OpenSharedStorage(uint64_t run_token) {
  if (run_token == 0) return;
  const std::string name = infeed::SharedStorage::Name(run_token, role_.host);
  if (!role_.is_host()) {
    infeed::SharedStorage opened = infeed::SharedStorage::Open(name, storage_clock_);
    if (opened.valid()) {
      storage_.emplace(std::move(opened));
    } else if (config_.checkpoint.shares_input_storage) {
      Fail(
          "checkpoint.shares_input_storage: world rank {} (host {} core {}) runs on another machine than its "
          "host's rank {}, and a host's storage is shared in that machine's memory; keep a host's ranks on "
          "one machine (mpirun --map-by ppr:{}:node)",
          comms_.world->rank(), role_.host, role_.ordinal, slice_.layout.host_rank(role_.host),
          1 + slice_.topology.cores_per_host());
    }
  }
  comms_.world->Barrier();
  if (role_.is_host()) infeed::SharedStorage::Unlink(name);
}

infeed::SharedStorage* RankRun::InputStorage() {
  return config_.checkpoint.shares_input_storage && storage_ ? &*storage_ : nullptr;
}

RankOutputs RankRun::outputs() const {
  RankOutputs o;
  if (role_.is_host()) {
    o.steps_csv = plan_.host_plan(role_.host) != nullptr;
    o.trace = true;
  } else if (role_.in_replica()) {
    o.placement_log = plan_.route_to(role_.host, role_.ordinal) != nullptr;
    o.steps_csv = o.trace = true;
  }
  return o;
}

RankMetrics RankRun::RunLoops(RankSinks& sinks) {
  RankMetrics mine = role_.is_host() ? RunHost(sinks) : RunCore(sinks);
  mine.rank = comms_.world->rank();
  mine.role = role_.Describe();
  return mine;
}

RankMetrics RankRun::RunHost(RankSinks& sinks) {
  host::InputPipeline input(config_, plan_, role_.host, slice_.num_hosts(), ModeledInputWorkers(config_, slice_),
                            InputStorage());
  input.StartAt(first_infeed_step());
  const host::HostLoopParts parts{plan_, loops_,      keys_,           slice_.layout, *comms_.world,
                                  input, sinks.trace, sinks.steps_csv, observer_,     storage_ ? &*storage_ : nullptr};
  return RunHostLoop(HostOptions(), parts);
}

host::HostLoopOptions RankRun::HostOptions() {
  host::HostLoopOptions o;
  o.host = role_.host;
  o.num_hosts = slice_.num_hosts();
  o.outfeed_cores = OutfeedCoresOnHost(slice_, o.host);
  o.transport = Transport();
  if (config_.embedding.enabled()) o.embedding = config_.embedding.config;
  o.seed = config_.input.seed;
  if (!keys_.OwnedBy(o.host).empty()) {
    shampoo::HostServiceOptions& s = o.shampoo.emplace();
    s.host = o.host;
    s.threads = ServiceThreads(keys_, node_share_.host_ranks, config_.infeed.parallelism);
    s.extra_delay_us = static_cast<int64_t>(config_.faults.preconditioner_delay_ms * 1e3);
    s.origin_s = origin_s_;
    s.num_loops = loops_.num_loops;
    s.core_ranks = TrainingCoreRanks(slice_);
  }
  o.faults = Faults();
  return o;
}

// The core's pieces are built in this order on every core, as the core loop
// always built them: the queue posts its credits before the trainer's collectives.
RankMetrics RankRun::RunCore(RankSinks& sinks) {
  if (!role_.in_replica()) return RunEmbeddingServer();
  const infeed::ShardRoute* route = plan_.route_to(role_.host, role_.ordinal);
  std::optional<infeed::CoreInfeedQueue> queue;
  if (route) {
    queue.emplace(plan_, *route, *comms_.world, slice_.layout.host_rank(role_.host), Transport());
  }
  std::optional<core::CoreTrainer> trainer;
  if (config_.model.enabled) trainer.emplace(config_, plan_, role_, comms_, &watchdog_);
  std::optional<shampoo::CoreClient> shampoo;
  if (trainer && !keys_.empty()) {
    shampoo.emplace(keys_, trainer->optimizer(), *comms_.world, ShampooClientOptions());
  }
  std::optional<core::CoreCheckpointer> checkpoint;
  if (trainer && (config_.checkpoint.saves() || options_.resume)) {
    checkpoint.emplace(CheckpointOptions(), *trainer, core::CheckpointGroups{*comms_.replica, *comms_.logical_core},
                       sinks.trace);
    if (options_.resume) checkpoint->Restore(options_.resume->step_dir, options_.resume->manifest);
  }
  const core::DeviceTimeModel device(config_.device, config_.faults, config_.input.seed, role_.host, role_.ordinal,
                                     route ? RowsOf(*route) : 0, slice_.topology.hardware().core_peak_tflops);
  // The run's features as stages, in the order they act at a loop's end: the
  // preconditioners are assigned before a save, which holds every state the next
  // loop starts from; the gradient sums' sync split comes last.
  std::vector<std::unique_ptr<core::CoreStage>> stages;
  if (shampoo) stages.push_back(std::make_unique<core::ShampooStage>(*shampoo, sinks.trace, origin_s_));
  if (checkpoint) {
    stages.push_back(
        std::make_unique<core::CheckpointStage>(*checkpoint, first_infeed_step(), loops_.infeed_steps_per_loop()));
  }
  if (trainer) {
    const core::TrainerStage::Options o{role_, origin_s_, options_.params_out};
    stages.push_back(
        std::make_unique<core::TrainerStage>(*trainer, o, *comms_.world, *comms_.cores, watchdog_, sinks.trace));
  }
  std::vector<core::CoreStage*> borrowed;
  for (const auto& stage : stages) borrowed.push_back(stage.get());
  const core::CoreLoopParts parts{
      plan_,       loops_,    *comms_.world,       queue ? core::CoreInfeed(*queue) : core::CoreInfeed(),
      device,      watchdog_, sinks.placement_log, sinks.steps_csv,
      sinks.trace, borrowed};
  return RunCoreLoop(CoreOptions(route), parts);
}

core::CoreLoopOptions RankRun::CoreOptions(const infeed::ShardRoute* route) {
  core::CoreLoopOptions o;
  o.role = role_;
  o.host_rank = slice_.layout.host_rank(role_.host);
  o.origin_s = origin_s_;
  o.trains = config_.model.enabled;
  if (config_.infeed.verify && route && config_.input.source == run::InputSource::kTfRecord) {
    const run::InputConfig& input = config_.input;
    o.tfrecord_verifier = std::make_shared<infeed::TfRecordVerifier>(
        infeed::ExpandFilePatterns(input.files), ExampleFeatureSpecs(input), TfRecordOptionsOf(input), input.seed);
  } else if (config_.infeed.verify && route) {
    o.shard_values.emplace(MakeSyntheticData(config_),
                           [&config = config_](int64_t id) { return ValueExampleId(config, id); });
  }
  if (config_.embedding.enabled()) o.embedding = config_.embedding.config;
  o.verify_ids = config_.infeed.verify;
  o.seed = config_.input.seed;
  o.name_records = config_.input.source == run::InputSource::kTfRecord;
  o.faults = Faults();
  o.first_infeed_step = first_infeed_step();
  return o;
}

int64_t RankRun::first_infeed_step() const { return options_.resume ? options_.resume->manifest.infeed_step : 0; }

// This core's share of a save: where it stands among the training cores, taken
// in world-rank order (host by host).
core::CoreCheckpointOptions RankRun::CheckpointOptions() {
  core::CoreCheckpointOptions o;
  o.config = config_.checkpoint;
  if (o.config.shares_input_storage) o.config.storage = config_.input.storage;
  core::CheckpointShare& s = o.share;
  s.host = role_.host;
  s.ordinal = role_.ordinal;
  s.num_hosts = s.num_cores = 0;
  for (int h = 0; h < slice_.num_hosts(); ++h) {
    int on_host = 0;
    for (int c = 0; c < slice_.topology.cores_per_host(); ++c) {
      if (slice_.assignment.replica_core_at(h, c).replica < 0) continue;
      if (h == role_.host && c == role_.ordinal) {
        s.core_on_host = on_host;
        s.core_index = s.num_cores;
      }
      ++on_host;
      ++s.num_cores;
    }
    if (h == role_.host) s.host_index = s.num_hosts, s.cores_on_host = on_host;
    if (on_host > 0) ++s.num_hosts;
  }
  s.logical_core = role_.logical_core;
  s.cores_per_replica = slice_.assignment.num_cores_per_replica();
  o.link_bytes_per_s = slice_.topology.hardware().host_to_device_gbps * 1e9 / 8;
  o.extra_state_bytes = config_.model.extra_state_bytes;
  o.extra_state_sharded = config_.model.extra_state_sharded;
  o.micro_batches = config_.train.num_micro_batches;
  o.seed = config_.input.seed;
  o.fingerprint = StateFingerprint(config_);
  o.origin_s = origin_s_;
  o.faults = Faults();
  o.storage = storage_ ? &*storage_ : nullptr;
  return o;
}

shampoo::CoreClientOptions RankRun::ShampooClientOptions() {
  shampoo::CoreClientOptions o;
  o.host = role_.host;
  o.sends_statistics = run::StatisticsSenderOrdinal(slice_, role_.host) == role_.ordinal;
  o.nonfinite_statistics_loop = config_.faults.nonfinite_statistics_loop;
  o.num_loops = loops_.num_loops;
  o.watchdog = &watchdog_;
  for (int host : keys_.owners()) o.owner_ranks.push_back(slice_.layout.host_rank(host));
  return o;
}

// A core outside every replica: it serves its embedding shards, if the run has
// any, and writes no streamed output.
RankMetrics RankRun::RunEmbeddingServer() {
  core::EmbeddingServerOptions o;
  o.role = role_;
  o.fed = plan_.route_to(role_.host, role_.ordinal) != nullptr;
  o.origin_s = origin_s_;
  if (config_.model.enabled && config_.embedding.enabled()) o.embedding = config_.embedding.config;
  o.params_out = options_.params_out;
  o.faults = Faults();
  RankMetrics mine;
  mine.core = ServeEmbedding(std::move(o), {loops_, *comms_.cores, &watchdog_});
  return mine;
}

infeed::TransportOptions RankRun::Transport() {
  infeed::TransportOptions t;
  t.parallelism = config_.infeed.parallelism;
  t.queue_depth = config_.infeed.queue_depth;
  t.num_steps = loops_.infeed_steps;
  t.origin_s = origin_s_;
  t.watchdog = &watchdog_;
  t.sleep_when_idle = slice_.layout.hosts_per_process() > 0;
  t.core_sleeps_when_idle = slice_.layout.hosts_per_process() == 0 &&
                            node_share_.ranks > static_cast<int>(std::thread::hardware_concurrency());
  if (config_.embedding.enabled()) {
    if (!trailer_) trailer_ = std::make_unique<wire::EmbeddingTrailer>(config_.embedding.config);
    t.trailer = trailer_.get();
  }
  return t;
}

bool RankRun::cores_sleep_when_idle() { return Transport().core_sleeps_when_idle; }

FaultInjector RankRun::Faults() { return {config_.faults, comms_.world->rank(), &watchdog_}; }

Watchdog::Scope RankRun::EndOfRunDeadline() {
  const bool idle = role_.is_core() && !role_.in_replica() && !config_.embedding.enabled();
  return Watchdog::Wait(idle ? nullptr : &watchdog_, "the end of the run (baseline and gather)", -1, -1, "every rank",
                        2.0);
}

void RankRun::MeasureCeiling(RankMetrics& mine) {
  std::optional<infeed::SyntheticData> pool_values;
  if (role_.is_host() && plan_.host_plan(role_.host)) {
    pool_values.emplace(MakeSyntheticData(config_));
  }
  const infeed::TransportOptions run = Transport();  // the run's waits
  const host::CeilingOptions options{
      role_,     config_.infeed.queue_depth, run.sleep_when_idle, run.core_sleeps_when_idle,
      origin_s_, loops_.window_steps()};
  host::SimulatorCeiling ceiling(options, plan_, slice_.layout, *comms_.world);
  mine.simulator_ceiling = ceiling.Measure(pool_values ? &*pool_values : nullptr);
}

void RankRun::CalibratePipelines(RankMetrics& mine) {
  if (!config_.report.calibrate || config_.input.source == run::InputSource::kCached) return;
  for (int host : host::CalibratingHosts(plan_, slice_.num_hosts())) {
    if (role_.is_host() && role_.host == host) {
      CalibrateHere(mine);
    } else {
      AwaitCalibration(host);
    }
    comms_.world->Barrier();
  }
}

// One worker, whatever infeed.parallelism is: a target worker has its vCPU to
// itself, and two workers on this machine's two cores shared them with each
// other and with anything else running (v5litepod-4, 64 KiB synthetic rows, a
// linker beside it: 13,400-23,200 examples/s per host over six runs with two
// workers, 25,400-28,100 with one).
void RankRun::CalibrateHere(RankMetrics& mine) {
  const int workers = 1;
  try {
    host::InputPipeline input(config_, plan_, role_.host, slice_.num_hosts(), ModeledInputWorkers(config_, slice_));
    mine.calibration = host::CalibratePipeline(input, plan_, role_.host, workers);
    if (config_.embedding.enabled() && mine.calibration->note.empty()) {
      mine.calibration->sparse =
          host::CalibrateSparseEnqueue(config_.embedding.config, config_.input.seed, plan_, role_.host);
    }
  } catch (const Error& e) {
    mine.calibration = PipelineCalibration{
        role_.host, workers, 0, 0, 0, {}, {}, std::string("the pipeline could not be opened again: ") + e.what()};
  }
  // Posted to every rank before any is waited for: one blocking send at a time
  // made each word to another process wait a round trip through the process
  // link, and on 32 x v5litepod-256 (10,240 ranks, 16 processes) the 9,600 round
  // trips took most of a 360 s replay.
  const std::byte done{1};
  std::vector<cluster::Request> sends;
  for (int r = 0; r < comms_.world->size(); ++r) {
    if (r != comms_.world->rank()) {
      sends.push_back(comms_.world->Isend(std::span(&done, 1), r, cluster::kTagCalibrationDone));
    }
  }
  for (cluster::Request& send : sends) send.Wait();
}

// Waits without taking this machine's CPUs from the pipeline being measured
// (Transport::AwaitPending: a rank thread blocks on its mailbox, a rank of its
// own polls with growing pauses, as MPI's blocking probe and barrier spin).
// Polled in-process, the waiters' wake-ups were the load: a steady pause of 2 ms
// had v5litepod-256's 320 packed rank threads wake 160,000 times a second, which
// inflated the calibrating host's JPEG step build from ~3.2 to ~8 ms per example,
// and 10,240 threads polling every 100 ms kept thousands runnable.
void RankRun::AwaitCalibration(int host) {
  const int from = slice_.layout.host_rank(host);
  comms_.world->AwaitPending(from, cluster::kTagCalibrationDone);
  std::byte done{};
  comms_.world->Recv(std::span(&done, 1), from, cluster::kTagCalibrationDone);
}

std::vector<RankMetrics> RankRun::GatherAtRankZero(const RankMetrics& mine) {
  const std::vector<std::string> all = GatherStrings(*comms_.world, json(mine).dump());
  std::vector<RankMetrics> ranks;
  for (const std::string& s : all) ranks.push_back(json::parse(s).get<RankMetrics>());
  return ranks;
}

int64_t RankRun::ceiling_steps() const {
  return sim::host::CeilingSteps(plan_, config_.infeed.queue_depth, loops_.window_steps());
}

double RankRun::elapsed_s() const { return MonotonicSeconds() - origin_s_; }

}  // namespace tpusim::sim
