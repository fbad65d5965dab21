#include "sim/core/params_out.h"

namespace tpusim::sim::core {

std::vector<GatheredTable> GatherTables(const cluster::Transport& cores, bool root, EmbeddingLayer& layer) {
  double root_rank = root ? cores.rank() : -1;
  cores.AllreduceInPlace(std::span<double>(&root_rank, 1), cluster::ReduceOp::kMax);
  std::vector<GatheredTable> tables;
  for (size_t t = 0; t < layer.config().tables.size(); ++t) {
    embedding::RowMatrix full = layer.GatherTable(t, static_cast<int>(root_rank));
    if (root) tables.push_back({layer.config().tables[t].name, std::move(full)});
  }
  return tables;
}

std::vector<wire::NamedArray> ParamsToWrite(const model::Mlp& model, const std::vector<GatheredTable>& tables,
                                            const std::vector<std::vector<optim::SlotView>>& slots) {
  std::vector<wire::NamedArray> arrays;
  for (const auto* list : {&model.trainable(), &model.non_trainable()}) {
    for (const model::Variable& v : *list) {
      arrays.push_back({v.spec.name, v.spec.shape, {v.value.data(), static_cast<size_t>(v.value.size())}});
    }
  }
  for (const GatheredTable& t : tables) {
    arrays.push_back({"embedding." + t.name,
                      {t.values.rows(), t.values.cols()},
                      {t.values.data(), static_cast<size_t>(t.values.size())}});
  }
  for (size_t v = 0; v < slots.size(); ++v) {
    for (const optim::SlotView& slot : slots[v]) {
      arrays.push_back({"slots/" + model.trainable()[v].spec.name + "/" + slot.name,
                        slot.shape,
                        {slot.values->data(), static_cast<size_t>(slot.values->size())}});
    }
  }
  return arrays;
}

}  // namespace tpusim::sim::core
