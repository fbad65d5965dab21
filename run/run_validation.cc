#include "run/run_validation.h"

#include <unistd.h>

#include <algorithm>
#include <ranges>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/byte_size.h"
#include "base/error.h"
#include "embedding/coo_bytes.h"
#include "embedding/synthetic_ids.h"
#include "infeed/file_source.h"
#include "infeed/shard_message.h"
#include "infeed/tfrecord_source.h"
#include "model/mlp.h"
#include "optim/optimizer_config.h"
#include "run/input_sharding.h"
#include "run/model_inputs.h"
#include "run/run_features.h"
#include "run/shampoo_keys.h"
#include "run/table_storage.h"

namespace tpusim::run {
namespace {

constexpr double kMaxBatchSeconds = 3600;  // one host batch may take at most an hour to build
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Example ids are int64: step * global_batch + row must fit for every infeed step.
void CheckExampleIdsFit(const RunConfig& config, const LoopPlan& loops) {
  __int128 examples = static_cast<__int128>(loops.infeed_steps) * config.input.global_batch;
  if (examples > INT64_MAX) {
    Fail(
        "{}: train.steps: {} steps ({} infeed steps of input.global_batch {}) overflow the 64-bit "
        "example ids; at most {} infeed steps fit",
        config.source, config.train.steps, loops.infeed_steps, config.input.global_batch,
        INT64_MAX / config.input.global_batch);
  }
}

void CheckPartitionDimsNameFeatures(const RunConfig& config) {
  for (const auto& [name, dims] : config.infeed.partition_dims) {
    if (!config.input.features.count(name) && name != kLabelFeature) {
      Fail("{}: infeed.partition_dims.{}: no such feature (declared: {})", config.source, name,
           fmt::join(config.input.features | std::views::keys, ", "));
    }
  }
}

int64_t MaxRowsPerStep(const infeed::InfeedPlan& plan) {
  int64_t rows = 0;
  for (const infeed::HostPlan& h : plan.hosts()) rows = std::max(rows, h.rows_per_step);
  return rows;
}

// The most rows a core trains on per step (its shard of a host batch).
int64_t MaxCoreRowsPerStep(const infeed::InfeedPlan& plan) {
  int64_t rows = 0;
  for (const infeed::HostPlan& h : plan.hosts()) {
    for (const infeed::ShardRoute& r : h.shards) rows = std::max(rows, infeed::TrainedRows(r).count);
  }
  return rows;
}

// A host batch that takes hours to build looks like a hang; refuse it instead.
void CheckBatchTime(const RunConfig& config, const infeed::InfeedPlan& plan) {
  const double rows = static_cast<double>(MaxRowsPerStep(plan));
  const InputConfig& in = config.input;
  if (in.max_examples_per_sec > 0 && rows / in.max_examples_per_sec > kMaxBatchSeconds) {
    Fail(
        "{}: input.max_examples_per_sec: {} makes one host batch of {} rows take {:.0f} s; at "
        "least {:.4g} keeps a batch under an hour",
        config.source, in.max_examples_per_sec, rows, rows / in.max_examples_per_sec, rows / kMaxBatchSeconds);
  }
  if (in.cpu_us_per_example * rows > kMaxBatchSeconds * 1e6) {
    Fail(
        "{}: input.cpu_us_per_example: {} us x {} rows per host batch take {:.0f} s; at most {:.4g} "
        "keeps a batch under an hour",
        config.source, in.cpu_us_per_example, rows, in.cpu_us_per_example * rows * 1e-6, kMaxBatchSeconds * 1e6 / rows);
  }
}

// Host batches a host holds at once: built ahead of the enqueue (input.prefetch)
// or cycled (input.cache_steps), plus the queue's.
double HostBatchesHeld(const RunConfig& config) {
  const InputConfig& in = config.input;
  const double ahead = in.prefetch > 0 ? in.prefetch : 2.0 * config.infeed.parallelism + config.infeed.queue_depth;
  return ahead + (in.source == InputSource::kCached ? static_cast<double>(in.cache_steps) : 0.0);
}

// Optimizer slots per parameter, at most (adafactor counted unfactored).
int SlotsPerParameter(const optim::OptimizerConfig& o) {
  if (o.name == "momentum" || o.name == "adagrad") return 1;
  if (o.name == "adam" || o.name == "adafactor") return 2;
  if (o.name == "shampoo") return 4;  // grafting, momentum and (blocked) statistics, roughly
  int slots = 0;
  for (const optim::CompositeEntry& e : o.optimizer_map) slots = std::max(slots, SlotsPerParameter(e.optimizer));
  return slots;
}

// Trainable parameters of the MLP on `width` inputs (model/mlp.h).
double ModelParameters(const model::ModelConfig& m, double width) {
  double params = 0;
  for (int h : m.hidden) {
    params += width * h + h + (m.batch_norm ? 4.0 * h : 0.0);
    width = h;
  }
  return params + width + 1;
}

double ModelWidth(const RunConfig& config, const std::vector<infeed::FeatureSpec>& specs) {
  double width = static_cast<double>(embedding::EmbeddingWidth(config.embedding.config));
  for (const infeed::FeatureSpec& s : specs) {
    if (IsModelInput(config.input, s)) width += static_cast<double>(infeed::NumElements(s.shape));
  }
  return width;
}

// A core's model: values, gradients, the fused and adjusted gradient copies, the
// accumulator and the optimizer slots, plus forward/backward activations.
double CoreModelBytes(const RunConfig& config, double width, double rows) {
  const model::ModelConfig& m = config.model.config;
  double params = ModelParameters(m, width);
  double activations = width;
  for (int h : m.hidden) activations += 3.0 * h;
  return 4.0 * (params * (6 + SlotsPerParameter(config.train.optimizer)) + 2 * rows * (activations + 1));
}

// Each core owns a 1/num_cores row shard of every table, with its optimizer slots
// and gradient copy. A modeled table holds the rows the run is expected to touch
// (its features' distinct ids over `examples`), as one core's share, each row with
// twice its bytes (the held rows grow by doubling) and its hash entry.
double CoreEmbeddingBytes(const embedding::EmbeddingConfig& config, int num_cores, double examples) {
  constexpr double kHashEntryBytes = 64;
  double bytes = 0;
  for (size_t i = 0; i < config.tables.size(); ++i) {
    const embedding::TableConfig& t = config.tables[i];
    const double row = 4.0 * static_cast<double>(t.dim) * (2 + embedding::SlotsOf(t.optimizer));
    if (t.storage == embedding::TableStorage::kModeled) {
      bytes += ExpectedRowsHeld(config, i, examples) * (2 * row + kHashEntryBytes) / num_cores;
    } else {
      bytes += static_cast<double>(t.vocab) * row / num_cores;
    }
  }
  return bytes;
}

// A core's embedding buffers of one step on `rows` examples (embedding/
// embedding_engine.h), from the distinct rows U it asks each table for: the rows
// looked up, the owners' replies sent and received (then the partial sums and
// the gradient messages, no more at once), the owner's sums of the rows touched
// over an update, and per distinct id its request, plan and hash entries
// (~120 bytes); per real id its decoded COO, combine term and slot (~80 bytes).
// Against heaptrack and peak RSS (8 Dec) on the 320-ids DLRM over v5p-256: 1.8 /
// 4.4 GiB a process predicted with the rest of the estimate, 1.79 / 4.83
// measured, at global batch 16,384 / 65,536. Without it, 65,536 was estimated at
// 8.09 GiB and ran out of this machine's 24.
double CoreEmbeddingStepBytes(const embedding::EmbeddingConfig& config, double rows) {
  constexpr double kPerDistinctId = 120;
  constexpr double kPerRealId = 80;
  const double micro_steps = static_cast<double>(embedding::MicroStepsPerUpdate(config));
  double bytes = 0;
  for (size_t t = 0; t < config.tables.size(); ++t) {
    const double row = 4.0 * static_cast<double>(config.tables[t].dim);
    const double distinct = ExpectedRowsHeld(config, t, rows);
    bytes += distinct * (3 * row + kPerDistinctId) + ExpectedRowsHeld(config, t, rows * micro_steps) * row;
  }
  for (const embedding::FeatureConfig& f : config.features) {
    bytes += rows * static_cast<double>(f.max_ids) * (1 - f.padding_fraction) * kPerRealId;
  }
  return bytes;
}

// A TPU host's id generators: a Zipf CDF per feature over a table of at most
// kZipfCdfMaxVocab rows.
double HostIdGeneratorBytes(const embedding::EmbeddingConfig& config) {
  double bytes = 0;
  for (const embedding::FeatureConfig& f : config.features) {
    bytes +=
        static_cast<double>(embedding::ZipfCdfBytes(f, config.tables[embedding::TableIndex(config, f.table)].vocab));
  }
  return bytes;
}

void CheckMemory(const RunConfig& config, const MemoryEstimate& m, const Machine& machine) {
  if (m.total() <= machine.memory_bytes) return;
  // One line of about 300 characters: the parts that hold a share of the memory
  // (1 % or more), and the keys that shrink them.
  const auto counts = [&](double bytes) { return bytes >= 0.01 * m.total(); };
  std::vector<std::string> parts;
  if (counts(m.queues_bytes)) parts.push_back("infeed queues " + ByteSize(m.queues_bytes));
  if (counts(m.host_batches_bytes)) {
    parts.push_back(
        fmt::format("host batches {} ({:g} per host)", ByteSize(m.host_batches_bytes), HostBatchesHeld(config)));
  }
  if (counts(m.model_bytes)) parts.push_back("model " + ByteSize(m.model_bytes));
  if (counts(m.embedding_bytes)) parts.push_back("embedding tables " + ByteSize(m.embedding_bytes));
  if (counts(m.embedding_step_bytes)) {
    parts.push_back("embedding step buffers " + ByteSize(m.embedding_step_bytes));
  }
  Fail(
      "{}: memory: the run needs about {} ({}) but this machine has {}; lower input.global_batch, input.prefetch, "
      "infeed.queue_depth, infeed.parallelism, the shapes or the model",
      config.source, ByteSize(m.total()), fmt::join(parts, ", "), ByteSize(machine.memory_bytes));
}

void CheckModelWidth(const RunConfig& config, double width) {
  if (width > INT32_MAX) {
    Fail(
        "{}: model: {:.0f} input columns (float features and embedding activations) exceed the "
        "model's limit of {}",
        config.source, width, INT32_MAX);
  }
}

// Builds the model's variables and registers them with the optimizer exactly as a
// core does, so a composite pattern that matches twice or not at all, or a pattern
// that cannot be compiled, fails here and not on a core mid-run.
// The Shampoo key table is built the way the run builds it too.
void CheckTrainer(const RunConfig& config, const infeed::InfeedPlan& plan, const Slice& slice) {
  if (!config.model.enabled) return;
  InContext(config.source, [&] { CheckTrainable(config, plan); });
  CheckModelWidth(config, ModelWidth(config, plan.features()));
  model::Mlp model(config.model.config, std::max(TrainerInputWidth(config, plan), 1));
  std::unique_ptr<optim::Optimizer> optimizer =
      optim::MakeOptimizer(config.train.optimizer, config.source + ": train.optimizer");
  for (const model::Variable& v : model.trainable()) optimizer->AddVariable(v.spec);
  InContext(config.source, [&] { run::BuildRunKeyTable(config, plan, slice); });
}

// A tfrecord run reads the user's files: it trains on the dataset's own label
// feature (run/model_inputs.h); infeed.verify has the cores decode each row's
// record themselves (infeed/tfrecord_verifier.h).
void CheckTfRecordRun(const RunConfig& config, const infeed::InfeedPlan& plan) {
  if (!config.embedding.config.features.empty()) {
    Fail("{}: embedding.features: input.source: tfrecord carries no embedding ids", config.source);
  }
  const std::vector<std::string> files =
      InContext(config.source, [&] { return infeed::ExpandFilePatterns(config.input.files); });
  const int64_t readers = plan.per_host() ? static_cast<int64_t>(plan.hosts().size()) : 1;
  InContext(config.source, [&] { infeed::CheckFileSharding(files.size(), readers); });
}

void CheckDataset(const RunConfig& config, const infeed::InfeedPlan& plan) {
  if (config.input.source == InputSource::kTfRecord) CheckTfRecordRun(config, plan);
  if (config.input.source != InputSource::kFiles) return;
  infeed::DatasetShards shards = infeed::ScanDataset(config.input.data_dir, RunFeatureSpecs(config));
  int64_t readers = plan.per_host() ? static_cast<int64_t>(plan.hosts().size()) : 1;
  infeed::CheckDatasetFeedsHosts(config.input.data_dir, shards, readers, MaxRowsPerStep(plan));
}

// Whether `rank` (a role) runs on the machine: its MPI process is one of the machine's.
bool OnMachine(const Machine& machine, const cluster::RankLayout& layout, int rank) {
  const int process = layout.process_of(rank);
  return machine.ranks.empty() || std::find(machine.ranks.begin(), machine.ranks.end(), process) != machine.ranks.end();
}

// input.sharding (run/input_sharding.h): the plan of a batch placed by the mesh.
infeed::InfeedPlan BuildShardedPlan(const RunConfig& config, const Slice& slice) {
  infeed::InfeedPlanOptions options;
  options.global_batch = config.input.global_batch;
  options.features = RunFeatureSpecs(config);
  const cluster::DeviceMesh mesh = RunMesh(config.cluster, slice.topology, config.topology.generation, config.source);
  infeed::InfeedPlan plan = infeed::InfeedPlan::BuildSharded(
      slice.assignment, slice.num_hosts(), slice.topology.cores_per_host(), options, ShardingOptions(config, mesh));
  CheckHostsReadDistinctRows(config, plan);
  return plan;
}

}  // namespace

double ExampleBytes(const std::vector<infeed::FeatureSpec>& specs) {
  double bytes = 0;
  for (const infeed::FeatureSpec& s : specs) {
    bytes += static_cast<double>(infeed::NumElements(s.shape)) * static_cast<double>(infeed::DTypeSize(s.dtype));
  }
  return bytes;
}

Machine ThisMachine() {
  double pages = static_cast<double>(sysconf(_SC_PHYS_PAGES));
  double page_size = static_cast<double>(sysconf(_SC_PAGESIZE));
  return Machine{pages * page_size, {}};
}

infeed::InfeedPlan BuildInfeedPlan(const RunConfig& config, const Slice& slice) {
  if (ShardedByMesh(config)) return BuildShardedPlan(config, slice);
  infeed::InfeedPlanOptions options;
  options.per_host = config.infeed.per_host;
  options.partitioned = config.infeed.partitioned;
  options.per_core = config.infeed.per_core;
  options.partition_dims = config.infeed.partition_dims;
  options.global_batch = config.input.global_batch;
  options.features = RunFeatureSpecs(config);
  return infeed::InfeedPlan::Build(slice.assignment, slice.num_hosts(), slice.topology.cores_per_host(), options);
}

MemoryEstimate EstimateMemory(const RunConfig& config, const Slice& slice, const infeed::InfeedPlan& plan,
                              const Machine& machine) {
  MemoryEstimate m;
  const InfeedConfig& in = config.infeed;
  const cluster::RankLayout& layout = slice.layout;
  const double row_bytes = ExampleBytes(plan.features()) + sizeof(int64_t);
  for (const infeed::HostPlan& h : plan.hosts()) {
    if (!OnMachine(machine, layout, layout.host_rank(h.host))) continue;
    m.host_batches_bytes += HostBatchesHeld(config) * static_cast<double>(h.rows_per_step) * row_bytes +
                            static_cast<double>(config.input.shuffle_buffer) * row_bytes;
    m.embedding_bytes += HostIdGeneratorBytes(config.embedding.config);
  }
  for (const infeed::HostPlan& h : plan.hosts()) {
    for (const infeed::ShardRoute& r : h.shards) {
      double message = static_cast<double>(infeed::ShardCodec(plan.features(), r).message_bytes());
      if (config.embedding.enabled()) {
        message +=
            static_cast<double>(embedding::CooBytesCapacity(config.embedding.config, infeed::TrainedRows(r).count));
      }
      if (OnMachine(machine, layout, layout.core_rank(r.dst_host, r.dst_ordinal)))
        m.queues_bytes += in.queue_depth * message;
      if (r.dst_host != h.host && OnMachine(machine, layout, layout.host_rank(r.dst_host))) {
        m.host_batches_bytes += in.queue_depth * message;  // relayed in single-host mode
      }
    }
  }
  const double width = ModelWidth(config, plan.features());
  const double rows = static_cast<double>(MaxRowsPerStep(plan));
  const double core_rows = static_cast<double>(MaxCoreRowsPerStep(plan));
  const cluster::Topology& topo = slice.topology;
  const double examples =
      static_cast<double>(config.input.global_batch) * static_cast<double>(MakeLoopPlan(config.train).global_steps);
  // The same for every core, and a Zipf table's expected distinct ids cost ~10^4
  // powers each: counted inside the loop, v5p-12288's 6,144 cores took 72 s to validate.
  const double core_tables = CoreEmbeddingBytes(config.embedding.config, slice.num_cores(), examples);
  const double core_step =
      config.embedding.enabled() ? CoreEmbeddingStepBytes(config.embedding.config, core_rows) : 0.0;
  for (int host = 0; host < slice.num_hosts(); ++host) {
    for (int ordinal = 0; ordinal < topo.cores_per_host(); ++ordinal) {
      if (!OnMachine(machine, layout, layout.core_rank(host, ordinal))) continue;
      m.embedding_bytes += core_tables;
      m.embedding_step_bytes += core_step;
      bool trains = config.model.enabled && slice.assignment.replica_core_at(host, ordinal).replica >= 0;
      if (trains) m.model_bytes += CoreModelBytes(config, width, rows);
    }
  }
  return m;
}

std::vector<std::string> ConfigNotes(const RunConfig& config, const Slice& slice) {
  std::vector<std::string> notes;
  if (slice.num_slices() > 1) return notes;
  std::vector<std::string> keys;
  if (config.dcn.gbps_per_host) keys.push_back("dcn.gbps_per_host");
  if (config.dcn.latency_us) keys.push_back("dcn.latency_us");
  if (config.dcn.overlap != DcnOverlap::kNone) keys.push_back("dcn.overlap");
  if (!keys.empty()) {
    const bool one = keys.size() == 1;
    const std::string last = keys.back();
    keys.pop_back();
    const std::string named = one ? last : fmt::format("{} and {}", fmt::join(keys, ", "), last);
    notes.push_back(fmt::format("note: {} {} the network between slices; {} is one slice, so {} unused", named,
                                one ? "describes" : "describe", slice.topology.name(), one ? "it is" : "they are"));
  }
  return notes;
}

ValidatedRun ValidateRun(const RunConfig& config, const Machine& machine) {
  LoopPlan loops = MakeLoopPlan(config.train);
  CheckExampleIdsFit(config, loops);
  CheckPartitionDimsNameFeatures(config);
  cluster::Topology topology = cluster::LoadTopology(config.topology);
  cluster::DeviceAssignmentOptions options = AssignmentOptions(config.cluster, topology, config.source);
  Slice slice = InContext(config.source + ": cluster",
                          [&] { return BuildSlice(topology, options, config.cluster.hosts_per_process()); });
  CheckAgainstSlice(config, slice);
  if (!config.cluster.mesh.axes.empty()) {
    RunMesh(config.cluster, slice.topology, config.topology.generation, config.source);
  }
  PlaceByMesh(config, slice);
  TargetHost target_host = TargetHostOf(config, slice.topology);
  PreconditionerThreads(config.target_host, target_host, config.source);  // throws when too many
  infeed::InfeedPlan plan = InContext(config.source, [&] { return BuildInfeedPlan(config, slice); });
  CheckBatchTime(config, plan);
  MemoryEstimate memory = EstimateMemory(config, slice, plan, machine);
  CheckMemory(config, memory, machine);
  CheckTrainer(config, plan, slice);
  CheckCheckpoint(config, slice);
  CheckDataset(config, plan);
  return ValidatedRun{std::move(slice), std::move(plan), loops, memory, std::move(target_host)};
}

}  // namespace tpusim::run
