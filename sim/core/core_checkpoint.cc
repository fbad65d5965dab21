#include "sim/core/core_checkpoint.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <exception>
#include <filesystem>

#include <fmt/format.h>

#include "base/atomic_file.h"
#include "base/byte_io.h"
#include "base/clock.h"
#include "base/crc32c.h"
#include "base/error.h"

namespace tpusim::sim::core {
namespace {

// Part `i` of `n` split into `parts` nearly equal pieces: its first element.
int64_t SplitPoint(int64_t n, int parts, int i) { return n / parts * i + std::min<int64_t>(i, n % parts); }

// The opaque extra state's byte at `offset`: a cheap pure function, so a
// restore can check what it read.
std::byte ExtraByte(int64_t offset) {
  return static_cast<std::byte>((static_cast<uint64_t>(offset) * 0x9E3779B97F4A7C15ull) >> 56);
}

void FillExtra(int64_t first, std::span<std::byte> out) {
  for (size_t i = 0; i < out.size(); ++i) out[i] = ExtraByte(first + static_cast<int64_t>(i));
}

void CheckExtra(int64_t first, std::span<const std::byte> in, const std::string& what) {
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != ExtraByte(first + static_cast<int64_t>(i))) {
      Fail("{}: extra state byte {} is not the one saved", what, first + static_cast<int64_t>(i));
    }
  }
}

template <typename T>
std::span<const std::byte> BytesOf(const T& value) {
  return std::as_bytes(std::span(&value, 1));
}

// The replicated state of a training core, one byte range: every model variable
// (trainable, then non-trainable), every optimizer slot, then `extra` opaque bytes.
class ReplicatedState {
 public:
  ReplicatedState(CoreTrainer& trainer, int64_t extra) : extra_(extra) {
    model::Mlp& model = trainer.mutable_model();
    for (auto* list : {&model.trainable(), &model.non_trainable()}) {
      for (model::Variable& v : *list) Add(v.value);
    }
    for (size_t v = 0; v < model.trainable().size(); ++v) {
      for (const optim::SlotView& slot : trainer.Slots(static_cast<int>(v))) Add(*slot.values);
    }
  }

  int64_t size() const { return arrays_bytes_ + extra_; }

  // Bytes [begin, begin + out.size()) of the state into `out`.
  void CopyOut(int64_t begin, std::span<std::byte> out) const {
    Walk(
        begin, static_cast<int64_t>(out.size()),
        [&](std::span<std::byte> array, int64_t at, int64_t n) {
          std::memcpy(out.data() + at, array.data(), static_cast<size_t>(n));
        },
        [&](int64_t extra_first, int64_t at, int64_t n) {
          FillExtra(extra_first, out.subspan(static_cast<size_t>(at), static_cast<size_t>(n)));
        });
  }

  // The inverse: `in` holds bytes [begin, begin + in.size()).
  void CopyIn(int64_t begin, std::span<const std::byte> in, const std::string& what) {
    Walk(
        begin, static_cast<int64_t>(in.size()),
        [&](std::span<std::byte> array, int64_t at, int64_t n) {
          std::memcpy(array.data(), in.data() + at, static_cast<size_t>(n));
        },
        [&](int64_t extra_first, int64_t at, int64_t n) {
          CheckExtra(extra_first, in.subspan(static_cast<size_t>(at), static_cast<size_t>(n)), what);
        });
  }

 private:
  void Add(Eigen::ArrayXf& values) {
    arrays_.push_back(std::as_writable_bytes(std::span(values.data(), static_cast<size_t>(values.size()))));
    arrays_bytes_ += static_cast<int64_t>(arrays_.back().size());
  }

  // Calls on_array(piece of an array, offset in the range, bytes) for every
  // array overlapping [begin, begin + n), then on_extra(first extra byte,
  // offset in the range, bytes) for the extra state's part of it.
  template <class OnArray, class OnExtra>
  void Walk(int64_t begin, int64_t n, OnArray&& on_array, OnExtra&& on_extra) const {
    const int64_t end = begin + n;
    int64_t offset = 0;
    for (std::span<std::byte> a : arrays_) {
      const int64_t lo = std::max(begin, offset), hi = std::min(end, offset + static_cast<int64_t>(a.size()));
      if (lo < hi)
        on_array(a.subspan(static_cast<size_t>(lo - offset), static_cast<size_t>(hi - lo)), lo - begin, hi - lo);
      offset += static_cast<int64_t>(a.size());
    }
    const int64_t lo = std::max(begin, arrays_bytes_), hi = std::min(end, arrays_bytes_ + extra_);
    if (lo < hi) on_extra(lo - arrays_bytes_, lo - begin, hi - lo);
  }

  std::vector<std::span<std::byte>> arrays_;
  int64_t arrays_bytes_ = 0;
  int64_t extra_ = 0;
};

std::span<std::byte> MatrixBytes(embedding::RowMatrix& m) {
  return std::as_writable_bytes(std::span(m.data(), static_cast<size_t>(m.size())));
}

constexpr std::array<const char*, 3> kTableParts{"params", "slot0", "slot1"};

// Calls visit(name, bytes) for every part (parameters and both slots) of every
// embedding table shard `layer` holds, in the one order saves write them and
// restores read them.
template <typename Visit>
void ForEachTablePart(EmbeddingLayer& layer, Visit visit) {
  for (size_t t = 0; t < layer.config().tables.size(); ++t) {
    std::array<embedding::RowMatrix*, 3> parts = layer.engine().mutable_shard(t).state();
    for (size_t i = 0; i < parts.size(); ++i) {
      visit(fmt::format("embedding/{}/{}", layer.config().tables[t].name, kTableParts[i]), MatrixBytes(*parts[i]));
    }
  }
}

// Seconds the storage takes for `bytes` as one stream of requests: the larger of
// its latency waves and its bytes over the bandwidth (infeed/storage_model.h).
double StorageSeconds(int64_t bytes, const infeed::StorageConfig& s) {
  if (bytes <= 0) return 0;
  const int64_t request = s.request_kib * 1024;
  const int64_t requests = (bytes + request - 1) / request;
  const int64_t waves = (requests + s.concurrency - 1) / s.concurrency;
  const double latency_s = static_cast<double>(waves) * s.latency_us * 1e-6;
  const double transfer_s = s.bandwidth_mb_s > 0 ? static_cast<double>(bytes) / (s.bandwidth_mb_s * 1e6) : 0.0;
  return std::max(latency_s, transfer_s);
}

void SleepFor(double seconds) {
  if (seconds > 0) std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}

}  // namespace

// A save whose files are (being) written: the bytes, where they go, what the
// manifest will say, and the writer thread in async mode.
struct CoreCheckpointer::Pending {
  std::vector<std::byte> bytes;
  std::string dir;
  size_t record = 0;  // index into saves_
  checkpoint::Manifest manifest;
  std::thread thread;
  std::atomic<bool> done{false};
  std::exception_ptr error;
  double begin_s = 0, end_s = 0;  // the writer's, since the run's start
};

CoreCheckpointer::CoreCheckpointer(CoreCheckpointOptions options, CoreTrainer& trainer, CheckpointGroups groups,
                                   TraceLog& trace)
    : options_(std::move(options)), trainer_(trainer), groups_(groups), trace_(trace) {
  last_global_step_ = trainer_.global_step();
  if (options_.config.shares_input_storage && options_.storage) {
    shared_writes_.emplace(options_.config.storage, clock_, options_.storage);
  }
  trace_.NameLane(kWriterLane, "checkpoint writer");
}

CoreCheckpointer::~CoreCheckpointer() {
  if (pending_ && pending_->thread.joinable()) pending_->thread.join();
}

double CoreCheckpointer::Now() const { return MonotonicSeconds() - options_.origin_s; }

void CoreCheckpointer::AllSum(std::vector<double>& values) const {
  groups_.replica.AllreduceInPlace(values, cluster::ReduceOp::kSum);
  groups_.logical_core.AllreduceInPlace(values, cluster::ReduceOp::kSum);
}

double CoreCheckpointer::AtLoopEnd(int64_t next_infeed_step) {
  const double start = Now();
  TryCommit(false);
  const int64_t step = trainer_.global_step();
  const int64_t every = options_.config.every_steps;
  const bool due = every > 0 && step / every > last_global_step_ / every;
  last_global_step_ = step;
  if (!due) return Now() - start;
  const bool running = pending_ != nullptr;  // the previous save's writes
  const double wait_start = Now();
  TryCommit(true);
  const double waited = running ? Now() - wait_start : 0.0;
  Save(next_infeed_step);
  saves_.back().wait_previous_s = waited;
  saves_.back().blocked_s += waited;
  trace_.Add(fmt::format("checkpoint save (step {})", step), start, Now() - start);
  return Now() - start;
}

double CoreCheckpointer::Finish() {
  const double start = Now();
  TryCommit(true);
  return Now() - start;
}

void CoreCheckpointer::Save(int64_t next_infeed_step) {
  CoreSaveRecord& record = saves_.emplace_back();
  record.global_step = trainer_.global_step();
  record.infeed_step = next_infeed_step;
  pending_ = std::make_unique<Pending>();
  pending_->record = saves_.size() - 1;
  pending_->bytes = TakeShare(next_infeed_step);
  pending_->dir = checkpoint::StepDir(options_.config.dir, record.global_step);
  record.bytes = static_cast<int64_t>(pending_->bytes.size());
  ExchangeManifest(record);
  ModelCopy(record);
  if (options_.config.mode == run::CheckpointMode::kSync) {
    Write(*pending_);
    TakeWriteTime(*pending_);
    record.blocked_s += record.write_s;
    TryCommit(true);
    return;
  }
  pending_->thread = std::thread([this, p = pending_.get()] { Write(*p); });
}

std::vector<std::byte> CoreCheckpointer::TakeShare(int64_t next_infeed_step) {
  const CheckpointShare& s = options_.share;
  checkpoint::StateWriter writer;
  const int64_t global_step = trainer_.global_step();
  writer.Add("global_step", BytesOf(global_step));
  writer.Add("infeed_step", BytesOf(next_infeed_step));
  const ReplicatedState state(trainer_, options_.extra_state_sharded ? 0 : options_.extra_state_bytes);
  const int64_t host_begin = SplitPoint(state.size(), s.num_hosts, s.host_index);
  const int64_t host_size = SplitPoint(state.size(), s.num_hosts, s.host_index + 1) - host_begin;
  const int64_t begin = host_begin + SplitPoint(host_size, s.cores_on_host, s.core_on_host);
  const int64_t end = host_begin + SplitPoint(host_size, s.cores_on_host, s.core_on_host + 1);
  const std::array<int64_t, 2> range{begin, state.size()};
  writer.Add("replicated_range", std::as_bytes(std::span(range)));
  std::vector<std::byte> share(static_cast<size_t>(end - begin));
  state.CopyOut(begin, share);
  writer.Add("replicated", share);
  share = {};
  AddTables(writer);
  AddShardedExtra(writer);
  return writer.Take();
}

void CoreCheckpointer::AddTables(checkpoint::StateWriter& writer) {
  if (!trainer_.embedding()) return;
  ForEachTablePart(*trainer_.embedding(),
                   [&writer](const std::string& name, std::span<std::byte> bytes) { writer.Add(name, bytes); });
}

CoreCheckpointer::ExtraShard CoreCheckpointer::ShardedExtra() const {
  if (!options_.extra_state_sharded) return {};
  const int64_t x = options_.extra_state_bytes;
  const CheckpointShare& s = options_.share;
  const int64_t first = SplitPoint(x, s.cores_per_replica, s.logical_core);
  return {first, SplitPoint(x, s.cores_per_replica, s.logical_core + 1) - first};
}

void CoreCheckpointer::AddShardedExtra(checkpoint::StateWriter& writer) const {
  const ExtraShard shard = ShardedExtra();
  if (shard.bytes == 0) return;
  std::vector<std::byte> bytes(static_cast<size_t>(shard.bytes));
  FillExtra(shard.first, bytes);
  writer.Add("extra_sharded", bytes);
}

// Collective: every core learns each host's share and every file's size and
// CRC-32C, the manifest's contents.
void CoreCheckpointer::ExchangeManifest(CoreSaveRecord& record) {
  const CheckpointShare& s = options_.share;
  const size_t hosts = static_cast<size_t>(s.num_hosts);
  std::vector<double> v(hosts + 4 * static_cast<size_t>(s.num_cores), 0.0);
  v[static_cast<size_t>(s.host_index)] = static_cast<double>(record.bytes);
  double* mine = &v[hosts + 4 * static_cast<size_t>(s.core_index)];
  mine[0] = static_cast<double>(record.bytes);
  mine[1] = Crc32c(pending_->bytes);
  mine[2] = s.host;
  mine[3] = s.ordinal;
  AllSum(v);
  record.bytes_per_host = static_cast<int64_t>(v[static_cast<size_t>(s.host_index)]);
  checkpoint::Manifest& m = pending_->manifest;
  m.global_step = record.global_step;
  m.infeed_step = record.infeed_step;
  m.seed = options_.seed;
  m.fingerprint = options_.fingerprint;
  for (int i = 0; i < s.num_cores; ++i) {
    const double* f = &v[hosts + 4 * static_cast<size_t>(i)];
    const int host = static_cast<int>(f[2]), ordinal = static_cast<int>(f[3]);
    m.files.push_back({checkpoint::StateFileName(host, ordinal), host, ordinal, static_cast<int64_t>(f[0]),
                       static_cast<uint32_t>(f[1])});
  }
}

// The blocking device-to-host copy of the host's share (modeled), and the
// write's modeled time through the storage.
void CoreCheckpointer::ModelCopy(CoreSaveRecord& record) {
  const double bytes = static_cast<double>(record.bytes_per_host);
  record.copy_s = options_.link_bytes_per_s > 0 ? bytes / options_.link_bytes_per_s : 0.0;
  record.write_s = StorageSeconds(record.bytes_per_host, options_.config.storage);
  record.blocked_s = record.copy_s;
  SleepFor(record.copy_s);
}

// The host's writer: the file to a temporary name, fsynced and renamed, paced to
// the modeled write time (or, on shared storage, by the bandwidth it takes).
// Records a failure instead of throwing (it may run on its own thread).
void CoreCheckpointer::Write(Pending& p) {
  p.begin_s = Now();
  if (options_.storage) options_.storage->BeginWrite(p.manifest.global_step);
  try {
    std::error_code ec;  // the folder was checked at set-up; it can still vanish or fill up
    std::filesystem::create_directories(p.dir, ec);
    if (ec) Fail("checkpoint {}: cannot create the folder: {}", p.dir, ec.message());
    const std::string path =
        (std::filesystem::path(p.dir) / checkpoint::StateFileName(options_.share.host, options_.share.ordinal))
            .string();
    AtomicFile file(path, "checkpoint " + path);
    WritePieces(file, p);
    file.Commit();
  } catch (...) {
    p.error = std::current_exception();
  }
  if (!shared_writes_) SleepFor(saves_[p.record].write_s - (Now() - p.begin_s));
  if (options_.storage) options_.storage->EndWrite();
  p.end_s = Now();
  p.done.store(true);
}

// The bytes in pieces, the fault of a kill mid-write halfway: two halves, or on
// shared storage the core's part of the host's requests in flight (the host's
// writers keep `concurrency` requests going, at least one each), every piece
// paid for before it is written, so the input's reads get their turns between.
void CoreCheckpointer::WritePieces(AtomicFile& file, const Pending& p) {
  const std::span<const std::byte> bytes(p.bytes);
  const size_t half = bytes.size() / 2;
  const infeed::StorageConfig& s = options_.config.storage;
  const int64_t in_flight = std::max(1, s.concurrency / options_.share.cores_on_host);
  const size_t piece =
      shared_writes_ ? static_cast<size_t>(s.request_kib * 1024 * in_flight) : std::max<size_t>(half, 1);
  bool past_half = false;
  for (size_t at = 0; at < bytes.size(); at += piece) {
    if (!past_half && at >= half) {
      options_.faults.MidCheckpointWrite(p.manifest.infeed_step);
      past_half = true;
    }
    const std::span<const std::byte> part = bytes.subspan(at, std::min(piece, bytes.size() - at));
    if (shared_writes_) shared_writes_->Pay(static_cast<int64_t>(part.size()));
    file.Write(part);
  }
}

// Collective: commits the pending save once every core's file is written
// (waiting for this core's own writer first when `wait`).
void CoreCheckpointer::TryCommit(bool wait) {
  if (!pending_) return;
  if (wait && pending_->thread.joinable()) pending_->thread.join();
  std::vector<double> state{pending_->done.load() ? 1.0 : 0.0, pending_->error ? 1.0 : 0.0};
  AllSum(state);
  if (state[1] > 0) {
    if (pending_->thread.joinable()) pending_->thread.join();
    if (pending_->error) std::rethrow_exception(pending_->error);
    Fail("checkpoint {}: another core's write failed", pending_->dir);
  }
  if (state[0] < options_.share.num_cores) return;
  if (pending_->thread.joinable()) pending_->thread.join();
  Commit();
}

// On shared storage the write lasts as long as the shared bandwidth makes it:
// the writer's time is the write's (the modeled time alone otherwise).
void CoreCheckpointer::TakeWriteTime(const Pending& p) {
  if (shared_writes_) saves_[p.record].write_s = p.end_s - p.begin_s;
}

void CoreCheckpointer::Commit() {
  TakeWriteTime(*pending_);
  CoreSaveRecord& record = saves_[pending_->record];
  record.write_begin_s = pending_->begin_s;
  record.write_end_s = pending_->end_s;
  record.committed = true;
  trace_.Add(fmt::format("checkpoint write (step {})", record.global_step), record.write_begin_s,
             record.write_end_s - record.write_begin_s, kWriterLane);
  if (options_.share.core_index == 0) {
    checkpoint::WriteManifest(pending_->dir, pending_->manifest);
    checkpoint::PruneCheckpoints(options_.config.dir, options_.config.keep);
  }
  pending_.reset();
}

void CoreCheckpointer::Restore(const std::string& step_dir, const checkpoint::Manifest& manifest) {
  ReplicatedState state(trainer_, options_.extra_state_sharded ? 0 : options_.extra_state_bytes);
  int64_t offset = 0;
  bool own = false;
  for (const checkpoint::ManifestFile& f : manifest.files) {
    const std::string path = (std::filesystem::path(step_dir) / f.name).string();
    const checkpoint::StateReader reader(checkpoint::ReadFileBytes(path), path);
    std::array<int64_t, 2> range{};
    reader.CopyTo("replicated_range", std::as_writable_bytes(std::span(range)));
    if (range[0] != offset || range[1] != state.size()) {
      Fail(
          "{}: holds replicated state from byte {} of {}, this run expects byte {} of {} (a checkpoint "
          "of another model or optimizer)",
          path, range[0], range[1], offset, state.size());
    }
    const std::span<const std::byte> share = reader.Section("replicated");
    state.CopyIn(offset, share, path);
    offset += static_cast<int64_t>(share.size());
    if (f.host == options_.share.host && f.ordinal == options_.share.ordinal) {
      RestoreOwn(reader, path);
      own = true;
    }
  }
  const std::string manifest_path = (std::filesystem::path(step_dir) / "manifest.json").string();
  if (offset != state.size())
    Fail("{}: its files hold {} of {} replicated state bytes", manifest_path, offset, state.size());
  if (!own) Fail("{}: lists no file of host {} core {}", manifest_path, options_.share.host, options_.share.ordinal);
}

void CoreCheckpointer::RestoreOwn(const checkpoint::StateReader& reader, const std::string& path) {
  int64_t global_step = 0;
  reader.CopyTo("global_step", std::as_writable_bytes(std::span(&global_step, 1)));
  trainer_.RestoreGlobalStep(global_step);
  last_global_step_ = global_step;
  if (trainer_.embedding()) {
    ForEachTablePart(*trainer_.embedding(),
                     [&reader](const std::string& name, std::span<std::byte> bytes) { reader.CopyTo(name, bytes); });
  }
  const ExtraShard shard = ShardedExtra();
  if (shard.bytes > 0) CheckExtra(shard.first, reader.Section("extra_sharded", static_cast<size_t>(shard.bytes)), path);
}

}  // namespace tpusim::sim::core
