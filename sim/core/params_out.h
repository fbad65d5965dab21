// --params-out: replica 0's dense variables, the gathered embedding tables and the
// optimizer slots, sent by the core that plays replica 0's logical core 0 and
// written by rank 0 as DIR/NAME.npy (float32, C order), so runs can be compared
// outside tpusim.
#pragma once

#include <string>
#include <vector>

#include "cluster/transport.h"
#include "embedding/row_matrix.h"
#include "model/mlp.h"
#include "optim/optimizer.h"
#include "sim/core/embedding_layer.h"
#include "sim/wire/params.h"

namespace tpusim::sim::core {

// An embedding table gathered for --params-out, written as embedding.NAME.npy.
struct GatheredTable {
  std::string name;
  embedding::RowMatrix values;  // [vocab, dim], rows in global id order
};

// Collective over `cores` (every core): each table in full on the core for which
// `root` is true (replica 0's logical core 0, which sends the params), nothing
// elsewhere.
std::vector<GatheredTable> GatherTables(const cluster::Transport& cores, bool root, EmbeddingLayer& layer);

// What replica 0's core writes: every model variable (trainable, then
// non-trainable), each table as "embedding.<table>", and each optimizer slot of
// trainable variable v as "slots/<v>/<slot>" from `slots(v index)`.
std::vector<wire::NamedArray> ParamsToWrite(const model::Mlp& model, const std::vector<GatheredTable>& tables,
                                            const std::vector<std::vector<optim::SlotView>>& slots);

}  // namespace tpusim::sim::core
