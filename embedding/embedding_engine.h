// The per-core embedding engine: the distributed lookup and gradient step of
// docs/reference/infeed.md §5.6 / docs/reference/training.md §7 over an injected all-to-all
// (cluster::Transport: MPI in tpusim, an in-process group in tests), whose members
// are the cores. Every table is sharded over the N cores by its own rule; each
// core owns one shard of every table.
//
// One micro-step, on every core (all calls are collective, same order on all cores):
//   const auto& acts = engine.Forward(pieces);   // pieces[f]: this core's COO of feature f
//   ... model computes dL/dacts (same shapes) ...
//   engine.Backward(grads);                      // sums per row, optimizer once per row
// Forward: requesters deduplicate their ids per table, send them to the owners, the
// owners reply with the rows, the requester combines. Backward: the requester sums
// coefficient * dL/dact per distinct row over its samples and features and sends one
// partial sum per row to the owner, which adds the partial sums of all cores into
// its accumulator (one entry per touched row, never a dense copy of the table).
// Gradients are not cross-replica-summed beforehand (docs/reference/training.md §7.3).
//
// Updates (EmbeddingConfig::update, docs/reference/training.md §7.3 step 4 "sum first, then one
// optimizer step per touched row per global step"): with k = MicroStepsPerUpdate
// the owner adds each micro-step's sums divided by k (as the dense accumulation
// wrapper does, g' = g/k) and, on every k-th Backward, applies the table optimizer
// once to every row touched in any of the k micro-steps, then clears the
// accumulator. Until then no table changes, so the lookups of micro-steps 2..k read
// the tables as they were at the start of the global step. k = 1 applies every step.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "cluster/transport.h"
#include "embedding/combiner.h"
#include "embedding/config.h"
#include "embedding/row_matrix.h"
#include "embedding/sharded_table.h"
#include "embedding/sparse_enqueue.h"

namespace tpusim {
class ByteReader;
}  // namespace tpusim

namespace tpusim::embedding {

// What one core did in the last step (reset by Forward).
struct EngineStepStats {
  int64_t ids_looked_up = 0;   // COO entries of this core's features that were looked up
  int64_t rows_requested = 0;  // distinct (table, row) pairs this core asked for
  int64_t rows_served = 0;     // rows this core, as owner, looked up for all cores
  int64_t rows_updated = 0;    // distinct rows this core applied the optimizer to
  // Distinct rows whose summed gradient this core holds after the step, waiting for
  // the global step's last micro-step (0 after an update).
  int64_t rows_pending = 0;
  // All-to-all payload to/from other cores, forward and backward (self excluded).
  int64_t bytes_sent = 0;
  int64_t bytes_received = 0;
  // Table memory this core touched as owner: the rows it looked up (rows x dim x 4
  // bytes read) and the rows it updated (parameters and optimizer slots, each read
  // and written). What the pod's HBM moves for the embedding (report/pod_projection.h).
  int64_t hbm_bytes = 0;
};

// Load balance over cores of one step, from every core's EngineStepStats.
struct EngineLoadSummary {
  int64_t max_rows_served = 0;
  double mean_rows_served = 0.0;
  int64_t total_bytes_sent = 0;
};
EngineLoadSummary Summarize(std::span<const EngineStepStats> per_core);

class EmbeddingEngine {
 public:
  // `cores` is borrowed and must outlive the engine; core = cores.rank(), N =
  // cores.size(). Throws Error if `config` is invalid.
  EmbeddingEngine(const EmbeddingConfig& config, const cluster::Transport& cores);
  EmbeddingEngine(const EmbeddingEngine&) = delete;
  EmbeddingEngine& operator=(const EmbeddingEngine&) = delete;

  // Collective. pieces[f] holds this core's ids of config.features[f]. Returns one
  // activation matrix per feature: [rows, dim] for a combined feature, [rows * L, dim]
  // (row b * L + p) for a sequence feature. The result is owned by the engine and
  // valid until the next Forward. Throws Error on a wrong number of pieces or an id
  // outside [0, vocab).
  const std::vector<RowMatrix>& Forward(std::span<const CooPiece> pieces);

  // Collective; accumulates the gradients of the activations returned by the last
  // Forward (same shapes, same order) and, on the last micro-step of an update,
  // applies the accumulated sums. learning_rates: one per table in config.tables
  // order (e.g. schedule(step) * learning_rate), empty = each table's configured
  // learning_rate; an update uses the rates of the call that applies it. Returns
  // whether the tables were updated. Throws Error without a preceding Forward or on
  // shape mismatches.
  bool Backward(std::span<const RowMatrix> activation_grads, std::span<const float> learning_rates = {});

  // Collective. Returns on `root` the full table `table` ([vocab, dim], rows in
  // global id order, e.g. for --params-out) and an empty matrix elsewhere; gradients
  // accumulated for an update not yet applied are not in it.
  RowMatrix GatherTable(size_t table, int root = 0);

  const EngineStepStats& stats() const { return stats_; }
  const ShardedTable& shard(size_t table) const { return shards_[table]; }
  ShardedTable& mutable_shard(size_t table) { return shards_[table]; }
  int core() const { return core_; }
  int num_cores() const { return num_cores_; }

 private:
  // Requester-side state of one table for the current step.
  struct TablePlan {
    std::unordered_map<int64_t, int64_t> index_of_id;  // id -> first-seen index
    std::vector<int64_t> unique_ids;                   // first-seen order
    std::vector<int64_t> offsets;                      // owner p's ids: [offsets[p], offsets[p+1])
    std::vector<int64_t> ids_by_owner;                 // unique ids grouped by owner
    RowMatrix rows;                                    // looked-up rows, ids_by_owner order (until the combine)
    RowMatrix partial;                                 // per-row gradient sums, same order (until they are sent)
  };
  // Requester-side state of one feature for the current step.
  struct FeaturePlan {
    std::vector<CombineTerm> terms;
    std::vector<int64_t> slot;  // entry -> row of its table's TablePlan::rows
    int64_t activation_rows = 0;
  };
  // Owner-side gradient sums of one table since the last update, one row of `sums`
  // (dim floats, local_rows order) per touched local row.
  struct Accumulator {
    std::unordered_map<int64_t, int64_t> index_of_row;
    std::vector<int64_t> local_rows;
    std::vector<float> sums;
    std::vector<float> row;  // receive buffer of one row
  };

  void PlanFeature(size_t f, const CooPiece& piece);
  void GroupByOwner(size_t t);
  std::vector<std::vector<std::byte>> BuildRequests() const;
  std::vector<std::vector<std::byte>> ServeRequests(const std::vector<std::vector<std::byte>>& requests);
  size_t ReplyBytes(std::span<const std::byte> request, int p) const;
  void ReceiveRows(const std::vector<std::vector<std::byte>>& replies);
  void CheckGradients(std::span<const RowMatrix> grads, std::span<const float> lrs) const;
  void SumPartials(std::span<const RowMatrix> grads);
  std::vector<std::vector<std::byte>> BuildGradientMessages() const;
  void AccumulateGradients(const std::vector<std::vector<std::byte>>& messages);
  void AccumulateFrom(size_t t, int p, ByteReader& reader);
  void ApplyAccumulated(std::span<const float> learning_rates);
  std::vector<std::vector<std::byte>> Exchange(std::vector<std::vector<std::byte>> send);

  EmbeddingConfig config_;
  const cluster::Transport& cores_;
  int core_;
  int num_cores_;
  std::vector<size_t> table_of_feature_;
  std::vector<ShardedTable> shards_;
  std::vector<TablePlan> tables_;
  std::vector<FeaturePlan> features_;
  std::vector<RowMatrix> activations_;
  // requests_[peer][table]: local rows peer asked for in the current step, in order.
  std::vector<std::vector<std::vector<int64_t>>> requests_;
  std::vector<Accumulator> accumulators_;
  int64_t micro_steps_per_update_;
  int64_t micro_steps_ = 0;  // Backward calls accumulated since the last update
  bool forward_done_ = false;
  EngineStepStats stats_;
};

}  // namespace tpusim::embedding
