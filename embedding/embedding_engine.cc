#include "embedding/embedding_engine.h"

#include <algorithm>
#include <utility>

#include "base/byte_io.h"
#include "base/error.h"

namespace tpusim::embedding {
namespace {

// Reads the all-to-all message that peer `p` sent.
ByteReader ReaderFrom(std::span<const std::byte> bytes, int p) {
  return ByteReader(bytes, fmt::format("embedding all-to-all: message from peer {}", p));
}

using Messages = std::vector<std::vector<std::byte>>;

void CheckId(const FeatureConfig& feature, int64_t vocab, int64_t entry, int64_t id) {
  if (id < 0 || id >= vocab) {
    Fail("embedding.features.{}: lookup id {} (entry {}) is outside [0, {})", feature.name, id, entry, vocab);
  }
}

int64_t PayloadBytes(const Messages& messages, int self) {
  int64_t bytes = 0;
  for (size_t p = 0; p < messages.size(); ++p) {
    if (static_cast<int>(p) != self) bytes += static_cast<int64_t>(messages[p].size());
  }
  return bytes;
}

}  // namespace

EngineLoadSummary Summarize(std::span<const EngineStepStats> per_core) {
  EngineLoadSummary summary;
  for (const EngineStepStats& s : per_core) {
    summary.max_rows_served = std::max(summary.max_rows_served, s.rows_served);
    summary.mean_rows_served += static_cast<double>(s.rows_served);
    summary.total_bytes_sent += s.bytes_sent;
  }
  if (!per_core.empty()) summary.mean_rows_served /= static_cast<double>(per_core.size());
  return summary;
}

EmbeddingEngine::EmbeddingEngine(const EmbeddingConfig& config, const cluster::Transport& cores)
    : config_(config),
      cores_(cores),
      core_(cores.rank()),
      num_cores_(cores.size()),
      micro_steps_per_update_(MicroStepsPerUpdate(config)) {
  Validate(config_);
  for (const FeatureConfig& feature : config_.features) {
    table_of_feature_.push_back(TableIndex(config_, feature.table));
  }
  for (const TableConfig& table : config_.tables) {
    shards_.emplace_back(table, TableSharding(table.vocab, num_cores_, table.sharding), core_);
  }
  tables_.resize(config_.tables.size());
  features_.resize(config_.features.size());
  activations_.resize(config_.features.size());
  accumulators_.resize(config_.tables.size());
  for (size_t t = 0; t < shards_.size(); ++t) {
    accumulators_[t].row.resize(static_cast<size_t>(shards_[t].dim()));
  }
  requests_.assign(static_cast<size_t>(num_cores_), std::vector<std::vector<int64_t>>(config_.tables.size()));
}

std::vector<std::vector<std::byte>> EmbeddingEngine::Exchange(Messages send) {
  stats_.bytes_sent += PayloadBytes(send, core_);
  Messages received = cores_.AllToAll(std::move(send));
  stats_.bytes_received += PayloadBytes(received, core_);
  return received;
}

// --- Forward ---------------------------------------------------------------------

const std::vector<RowMatrix>& EmbeddingEngine::Forward(std::span<const CooPiece> pieces) {
  if (pieces.size() != config_.features.size()) {
    Fail("embedding engine: core {} got {} feature pieces, {} features configured", core_, pieces.size(),
         config_.features.size());
  }
  stats_ = EngineStepStats{};
  forward_done_ = false;
  for (TablePlan& plan : tables_) {
    plan.index_of_id.clear();
    plan.unique_ids.clear();
  }
  for (size_t f = 0; f < pieces.size(); ++f) PlanFeature(f, pieces[f]);
  for (size_t t = 0; t < tables_.size(); ++t) GroupByOwner(t);
  ReceiveRows(Exchange(ServeRequests(Exchange(BuildRequests()))));
  for (size_t f = 0; f < features_.size(); ++f) {
    const FeaturePlan& plan = features_[f];
    ApplyCombine(plan.terms, plan.slot, tables_[table_of_feature_[f]].rows, plan.activation_rows, activations_[f]);
  }
  // The looked-up rows are in the activations now; held on, they would sit
  // beside the backward's partial sums and messages at the step's peak.
  for (TablePlan& plan : tables_) plan.rows = RowMatrix();
  forward_done_ = true;
  return activations_;
}

// Combine terms of the feature, and each entry's index among its table's distinct
// ids (turned into a row of TablePlan::rows by GroupByOwner).
void EmbeddingEngine::PlanFeature(size_t f, const CooPiece& piece) {
  const FeatureConfig& feature = config_.features[f];
  const TableConfig& table = config_.tables[table_of_feature_[f]];
  FeaturePlan& plan = features_[f];
  TablePlan& table_plan = tables_[table_of_feature_[f]];
  PlanCombine(feature, table.combiner, piece, plan.terms);
  plan.activation_rows = ActivationRows(feature, piece.rows);
  plan.slot.resize(static_cast<size_t>(piece.nnz()));
  for (int64_t e = 0; e < piece.nnz(); ++e) {
    const int64_t id = piece.embedding_indices[static_cast<size_t>(e)];
    CheckId(feature, table.vocab, e, id);
    // Truncated sequence positions are not looked up, so their rows are not touched
    // (which matters for lazy Adam, where a touched row moves even with g = 0).
    if (plan.terms[static_cast<size_t>(e)].target < 0) {
      plan.slot[static_cast<size_t>(e)] = -1;
      continue;
    }
    ++stats_.ids_looked_up;
    const auto [it, inserted] =
        table_plan.index_of_id.try_emplace(id, static_cast<int64_t>(table_plan.unique_ids.size()));
    if (inserted) table_plan.unique_ids.push_back(id);
    plan.slot[static_cast<size_t>(e)] = it->second;
  }
}

// Counting sort of the distinct ids by owner, so each owner's ids (and later its
// rows) are one contiguous block; entry slots are remapped to the sorted positions.
void EmbeddingEngine::GroupByOwner(size_t t) {
  TablePlan& plan = tables_[t];
  const TableSharding& sharding = shards_[t].sharding();
  plan.offsets.assign(static_cast<size_t>(num_cores_) + 1, 0);
  for (int64_t id : plan.unique_ids) ++plan.offsets[static_cast<size_t>(sharding.owner(id)) + 1];
  for (int p = 0; p < num_cores_; ++p) plan.offsets[p + 1] += plan.offsets[p];
  std::vector<int64_t> next(plan.offsets.begin(), plan.offsets.end() - 1);
  std::vector<int64_t> position(plan.unique_ids.size());
  plan.ids_by_owner.resize(plan.unique_ids.size());
  for (size_t u = 0; u < plan.unique_ids.size(); ++u) {
    const int64_t id = plan.unique_ids[u];
    position[u] = next[static_cast<size_t>(sharding.owner(id))]++;
    plan.ids_by_owner[static_cast<size_t>(position[u])] = id;
  }
  for (size_t f = 0; f < features_.size(); ++f) {
    if (table_of_feature_[f] != t) continue;
    for (int64_t& slot : features_[f].slot) {
      if (slot >= 0) slot = position[static_cast<size_t>(slot)];
    }
  }
  stats_.rows_requested += static_cast<int64_t>(plan.unique_ids.size());
}

// Message to owner p: for every table, the count and then the global ids it owns.
// Each message is sized once: grown table by table, a vector's capacity ends up
// to twice its bytes, and a step's messages to and from 128 cores were a third
// of a DLRM run's peak memory (heaptrack, 8 Dec).
Messages EmbeddingEngine::BuildRequests() const {
  Messages out(static_cast<size_t>(num_cores_));
  for (int p = 0; p < num_cores_; ++p) {
    size_t bytes = 0;
    for (const TablePlan& plan : tables_) {
      bytes += sizeof(int64_t) * static_cast<size_t>(1 + plan.offsets[p + 1] - plan.offsets[p]);
    }
    out[p].reserve(bytes);
    for (const TablePlan& plan : tables_) {
      const int64_t begin = plan.offsets[p];
      const int64_t count = plan.offsets[p + 1] - begin;
      Append(out[p], count);
      Append(out[p], std::span<const int64_t>(plan.ids_by_owner.data() + begin, static_cast<size_t>(count)));
    }
  }
  return out;
}

// Owner side: remembers who asked for which local rows (the backward messages carry
// only gradients, in the same order) and replies with the rows.
Messages EmbeddingEngine::ServeRequests(const Messages& requests) {
  Messages replies(static_cast<size_t>(num_cores_));
  for (int p = 0; p < num_cores_; ++p) {
    ByteReader reader = ReaderFrom(requests[p], p);
    replies[p].reserve(ReplyBytes(requests[p], p));
    for (size_t t = 0; t < shards_.size(); ++t) {
      const TableSharding& sharding = shards_[t].sharding();
      std::vector<int64_t>& rows = requests_[p][t];
      rows.resize(static_cast<size_t>(reader.Read<int64_t>()));
      reader.Read(rows.data(), rows.size());
      for (int64_t& id : rows) {
        if (id < 0 || id >= sharding.vocab() || sharding.owner(id) != core_) {
          Fail("embedding engine: core {} asked core {} for row {} of table {} it does not own", p, core_, id,
               config_.tables[t].name);
        }
        id = sharding.local_row(id);
      }
      const size_t offset = replies[p].size();
      replies[p].resize(offset + rows.size() * static_cast<size_t>(shards_[t].dim()) * sizeof(float));
      shards_[t].Lookup(rows, reinterpret_cast<float*>(replies[p].data() + offset));
      stats_.rows_served += static_cast<int64_t>(rows.size());
      stats_.hbm_bytes += static_cast<int64_t>(rows.size() * static_cast<size_t>(shards_[t].dim()) * sizeof(float));
    }
    reader.ExpectEnd();
  }
  return replies;
}

// The bytes of the reply to peer p's request: its rows of every table.
size_t EmbeddingEngine::ReplyBytes(std::span<const std::byte> request, int p) const {
  ByteReader reader = ReaderFrom(request, p);
  size_t bytes = 0;
  for (size_t t = 0; t < shards_.size(); ++t) {
    const auto count = static_cast<size_t>(reader.Read<int64_t>());
    reader.View<int64_t>(count);  // the ids, read again in ServeRequests
    bytes += count * static_cast<size_t>(shards_[t].dim()) * sizeof(float);
  }
  return bytes;
}

void EmbeddingEngine::ReceiveRows(const Messages& replies) {
  for (size_t t = 0; t < tables_.size(); ++t) {
    tables_[t].rows.resize(static_cast<int64_t>(tables_[t].ids_by_owner.size()), shards_[t].dim());
  }
  for (int p = 0; p < num_cores_; ++p) {
    ByteReader reader = ReaderFrom(replies[p], p);
    for (TablePlan& plan : tables_) {
      const int64_t dim = plan.rows.cols();
      const int64_t count = plan.offsets[p + 1] - plan.offsets[p];
      reader.Read(plan.rows.data() + plan.offsets[p] * dim, static_cast<size_t>(count * dim));
    }
    reader.ExpectEnd();
  }
}

// --- Backward --------------------------------------------------------------------

bool EmbeddingEngine::Backward(std::span<const RowMatrix> activation_grads, std::span<const float> learning_rates) {
  CheckGradients(activation_grads, learning_rates);
  forward_done_ = false;
  SumPartials(activation_grads);
  Messages gradients = BuildGradientMessages();
  for (TablePlan& plan : tables_) plan.partial = RowMatrix();  // in the messages now (see Forward)
  AccumulateGradients(Exchange(std::move(gradients)));
  const bool update = ++micro_steps_ == micro_steps_per_update_;
  if (update) {
    ApplyAccumulated(learning_rates);
    micro_steps_ = 0;
  }
  for (const Accumulator& acc : accumulators_) {
    stats_.rows_pending += static_cast<int64_t>(acc.local_rows.size());
  }
  return update;
}

void EmbeddingEngine::CheckGradients(std::span<const RowMatrix> grads, std::span<const float> lrs) const {
  if (!forward_done_) Fail("embedding engine: Backward on core {} without a Forward", core_);
  if (grads.size() != features_.size()) {
    Fail("embedding engine: {} activation gradients, {} features configured", grads.size(), features_.size());
  }
  for (size_t f = 0; f < grads.size(); ++f) {
    if (grads[f].rows() != activations_[f].rows() || grads[f].cols() != activations_[f].cols()) {
      Fail("embedding.features.{}: gradient shape [{}, {}] != activation shape [{}, {}]", config_.features[f].name,
           grads[f].rows(), grads[f].cols(), activations_[f].rows(), activations_[f].cols());
    }
  }
  if (!lrs.empty() && lrs.size() != config_.tables.size()) {
    Fail("embedding engine: {} learning rates for {} tables", lrs.size(), config_.tables.size());
  }
}

// Per distinct row: sum over entries of coefficient * dL/d(activation row).
void EmbeddingEngine::SumPartials(std::span<const RowMatrix> grads) {
  for (size_t t = 0; t < tables_.size(); ++t) {
    tables_[t].partial.setZero(static_cast<int64_t>(tables_[t].ids_by_owner.size()), shards_[t].dim());
  }
  for (size_t f = 0; f < features_.size(); ++f) {
    const FeaturePlan& plan = features_[f];
    RowMatrix& partial = tables_[table_of_feature_[f]].partial;
    for (size_t e = 0; e < plan.terms.size(); ++e) {
      if (plan.terms[e].target < 0) continue;
      partial.row(plan.slot[e]) += plan.terms[e].coefficient * grads[f].row(plan.terms[e].target);
    }
  }
}

// Message to owner p: for every table, the partial sums of the rows requested from p,
// in request order (the owner knows the ids from the forward request).
Messages EmbeddingEngine::BuildGradientMessages() const {
  Messages out(static_cast<size_t>(num_cores_));
  for (int p = 0; p < num_cores_; ++p) {
    size_t bytes = 0;
    for (const TablePlan& plan : tables_) {
      bytes += sizeof(float) * static_cast<size_t>((plan.offsets[p + 1] - plan.offsets[p]) * plan.partial.cols());
    }
    out[p].reserve(bytes);
    for (const TablePlan& plan : tables_) {
      const int64_t dim = plan.partial.cols();
      const int64_t count = plan.offsets[p + 1] - plan.offsets[p];
      Append(out[p],
             std::span<const float>(plan.partial.data() + plan.offsets[p] * dim, static_cast<size_t>(count * dim)));
    }
  }
  return out;
}

// Owner side: adds the partial sums of all cores per local row to the sums of the
// update in progress.
void EmbeddingEngine::AccumulateGradients(const Messages& messages) {
  for (int p = 0; p < num_cores_; ++p) {
    ByteReader reader = ReaderFrom(messages[p], p);
    for (size_t t = 0; t < shards_.size(); ++t) AccumulateFrom(t, p, reader);
    reader.ExpectEnd();
  }
}

// Adds peer p's partial sums of table t (one per row it requested), divided by the
// micro-steps per update, into the sums; a row seen first gets a zero sum.
void EmbeddingEngine::AccumulateFrom(size_t t, int p, ByteReader& reader) {
  Accumulator& acc = accumulators_[t];
  const int64_t dim = static_cast<int64_t>(acc.row.size());
  const float divisor = static_cast<float>(micro_steps_per_update_);
  for (int64_t local : requests_[p][t]) {
    reader.Read(acc.row.data(), acc.row.size());
    const auto [it, inserted] = acc.index_of_row.try_emplace(local, static_cast<int64_t>(acc.local_rows.size()));
    if (inserted) {
      acc.local_rows.push_back(local);
      acc.sums.resize(acc.sums.size() + acc.row.size(), 0.0f);
    }
    Eigen::Map<Eigen::RowVectorXf>(acc.sums.data() + it->second * dim, dim) +=
        Eigen::Map<const Eigen::RowVectorXf>(acc.row.data(), dim) / divisor;
  }
}

// One optimizer step per row touched since the last update, then an empty
// accumulator (its buffers keep their capacity for the next update).
void EmbeddingEngine::ApplyAccumulated(std::span<const float> learning_rates) {
  for (size_t t = 0; t < shards_.size(); ++t) {
    const float lr = learning_rates.empty() ? config_.tables[t].learning_rate : learning_rates[t];
    Accumulator& acc = accumulators_[t];
    const size_t dim = acc.row.size();
    for (size_t i = 0; i < acc.local_rows.size(); ++i) {
      shards_[t].Apply(acc.local_rows[i], acc.sums.data() + i * dim, lr);
    }
    stats_.rows_updated += static_cast<int64_t>(acc.local_rows.size());
    const int64_t arrays = 1 + SlotsOf(config_.tables[t].optimizer);  // parameters + slots
    stats_.hbm_bytes += 2 * arrays * static_cast<int64_t>(acc.local_rows.size() * dim * sizeof(float));
    acc.index_of_row.clear();
    acc.local_rows.clear();
    acc.sums.clear();
  }
}

// --- Gather ----------------------------------------------------------------------

RowMatrix EmbeddingEngine::GatherTable(size_t table, int root) {
  if (table >= shards_.size() || root < 0 || root >= num_cores_) {
    Fail("embedding engine: GatherTable({}, root {}) with {} tables and {} cores", table, root, shards_.size(),
         num_cores_);
  }
  const RowMatrix& params = *shards_[table].state()[0];  // throws for a modeled table
  Messages send(static_cast<size_t>(num_cores_));
  Append(send[root], std::span<const float>(params.data(), static_cast<size_t>(params.size())));
  Messages received = Exchange(std::move(send));
  if (core_ != root) return RowMatrix();
  const TableSharding& sharding = shards_[table].sharding();
  RowMatrix full(sharding.vocab(), shards_[table].dim());
  for (int p = 0; p < num_cores_; ++p) {
    ByteReader reader = ReaderFrom(received[p], p);
    for (int64_t r = 0; r < sharding.rows_on_shard(p); ++r) {
      reader.Read(full.row(sharding.global_id(p, r)).data(), static_cast<size_t>(full.cols()));
    }
    reader.ExpectEnd();
  }
  return full;
}

}  // namespace tpusim::embedding
