// --params-out: replica 0's dense variables, the gathered embedding tables and the
// optimizer slots, sent by the core that plays replica 0's logical core 0 and
// written by rank 0 as DIR/NAME.npy (float32, C order), so runs can be compared
// outside tpusim.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "embedding/row_matrix.h"
#include "optim/optimizer.h"
#include "sim/embedding_layer.h"
#include "sim/model/mlp.h"
#include "sim/simulation.h"

namespace tpusim::sim {

// An embedding table gathered for --params-out, written as embedding.NAME.npy.
struct GatheredTable {
  std::string name;
  embedding::RowMatrix values;  // [vocab, dim], rows in global id order
};

// Collective over every core: each table in full on the core that sends params to
// rank 0 (replica 0, logical core 0), nothing elsewhere.
std::vector<GatheredTable> GatherTables(const SimulationContext& ctx, EmbeddingLayer& layer);

// One array --params-out writes as DIR/<name>.npy (float32, C order); a name
// with slashes makes folders ("slots/dense_0/w/accumulator").
struct NamedArray {
  std::string name;
  std::vector<int64_t> shape;
  std::span<const float> values;
};

// What replica 0's core writes: every model variable (trainable, then
// non-trainable), each table as "embedding.<table>", and each optimizer slot of
// trainable variable v as "slots/<v>/<slot>" from `slots(v index)`.
std::vector<NamedArray> ParamsToWrite(const model::Mlp& model,
                                      const std::vector<GatheredTable>& tables,
                                      const std::vector<std::vector<optim::SlotView>>& slots);

// The sending core: `arrays`, in one message to rank 0.
void SendParams(const SimulationContext& ctx, const std::vector<NamedArray>& arrays);

// Rank 0: receives them and writes DIR/NAME.npy. Throws Error on a write failure.
void ReceiveParams(const SimulationContext& ctx);

}  // namespace tpusim::sim
