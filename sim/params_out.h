// --params-out: replica 0's dense variables and the gathered embedding tables,
// sent by the core that plays replica 0's logical core 0 and written by rank 0 as
// DIR/NAME.npy (float32, C order), so runs can be compared outside tpusim.
#pragma once

#include <string>
#include <vector>

#include "embedding/row_matrix.h"
#include "sim/embedding_layer.h"
#include "sim/model/mlp.h"
#include "sim/simulation.h"

namespace tpusim::sim {

inline constexpr int kTagParams = 402;

// An embedding table gathered for --params-out, written as embedding.NAME.npy.
struct GatheredTable {
  std::string name;
  embedding::RowMatrix values;  // [vocab, dim], rows in global id order
};

// Collective over every core: each table in full on the core that sends params to
// rank 0 (replica 0, logical core 0), nothing elsewhere.
std::vector<GatheredTable> GatherTables(const SimulationContext& ctx, EmbeddingLayer& layer);

// The sending core: replica 0's variables and `tables`, in one message to rank 0.
void SendParams(const SimulationContext& ctx, const model::Mlp& model,
                const std::vector<GatheredTable>& tables);

// Rank 0: receives them and writes DIR/NAME.npy. Throws Error on a write failure.
void ReceiveParams(const SimulationContext& ctx);

}  // namespace tpusim::sim
