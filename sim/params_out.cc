#include "sim/params_out.h"

#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/npy.h"
#include "cluster/large_messages.h"
#include "cluster/message_tags.h"

namespace tpusim::sim {

using json = nlohmann::json;

// Collective over every core: each table in full on the core that sends params to
// rank 0 (replica 0, logical core 0), nothing elsewhere.
std::vector<GatheredTable> GatherTables(const SimulationContext& ctx, EmbeddingLayer& layer) {
  bool root = ctx.role.replica == 0 && ctx.role.logical_core == 0;
  double root_rank = root ? ctx.comms.cores->rank() : -1;
  ctx.comms.cores->AllreduceInPlace(std::span<double>(&root_rank, 1), cluster::ReduceOp::kMax);
  std::vector<GatheredTable> tables;
  for (size_t t = 0; t < layer.config().tables.size(); ++t) {
    embedding::RowMatrix full = layer.GatherTable(t, static_cast<int>(root_rank));
    if (root) tables.push_back({layer.config().tables[t].name, std::move(full)});
  }
  return tables;
}

std::vector<NamedArray> ParamsToWrite(const model::Mlp& model,
                                      const std::vector<GatheredTable>& tables,
                                      const std::vector<std::vector<optim::SlotView>>& slots) {
  std::vector<NamedArray> arrays;
  for (const auto* list : {&model.trainable(), &model.non_trainable()}) {
    for (const model::Variable& v : *list) {
      arrays.push_back({v.spec.name, v.spec.shape,
                        {v.value.data(), static_cast<size_t>(v.value.size())}});
    }
  }
  for (const GatheredTable& t : tables) {
    arrays.push_back({"embedding." + t.name, {t.values.rows(), t.values.cols()},
                      {t.values.data(), static_cast<size_t>(t.values.size())}});
  }
  for (size_t v = 0; v < slots.size(); ++v) {
    for (const optim::SlotView& slot : slots[v]) {
      arrays.push_back({"slots/" + model.trainable()[v].spec.name + "/" + slot.name, slot.shape,
                        {slot.values->data(), static_cast<size_t>(slot.values->size())}});
    }
  }
  return arrays;
}

// name -> (shape, offset) as a JSON index, then every array's values, for rank 0.
void SendParams(const SimulationContext& ctx, const std::vector<NamedArray>& arrays) {
  if (ctx.options.params_out_dir.empty()) return;
  json index = json::array();
  std::vector<float> values;
  for (const NamedArray& a : arrays) {
    index.push_back({{"name", a.name}, {"shape", a.shape}, {"offset", values.size()}});
    values.insert(values.end(), a.values.begin(), a.values.end());
  }
  std::string header = index.dump();
  std::vector<std::byte> message(8 + header.size() + values.size() * sizeof(float));
  uint64_t header_size = header.size();
  std::memcpy(message.data(), &header_size, 8);
  std::memcpy(message.data() + 8, header.data(), header.size());
  std::memcpy(message.data() + 8 + header.size(), values.data(), values.size() * sizeof(float));
  cluster::SendBytes(*ctx.comms.world, message, 0, cluster::kTagParams);
}

// Rank 0: writes each variable of replica 0 as DIR/NAME.npy (float32, C order).
void ReceiveParams(const SimulationContext& ctx) {
  int source = ctx.slice.layout.core_rank(ctx.slice.assignment, 0, 0);
  std::vector<std::byte> message = cluster::ReceiveBytes(*ctx.comms.world, source, cluster::kTagParams);
  uint64_t header_size = 0;
  std::memcpy(&header_size, message.data(), 8);
  json index = json::parse(std::string(reinterpret_cast<const char*>(message.data()) + 8, header_size));
  const std::byte* values = message.data() + 8 + header_size;
  for (const json& v : index) {
    NpyArray array{"<f4", v["shape"].get<std::vector<int64_t>>(), {}};
    size_t bytes = static_cast<size_t>(array.num_elements()) * sizeof(float);
    const std::byte* begin = values + v["offset"].get<size_t>() * sizeof(float);
    array.data.assign(begin, begin + bytes);
    std::filesystem::path path = std::filesystem::path(ctx.options.params_out_dir) / (v["name"].get<std::string>() + ".npy");
    std::error_code ec;
    std::filesystem::create_directories(path.parent_path(), ec);
    if (ec) Fail("--params-out {}: cannot create {}: {}", ctx.options.params_out_dir, path.parent_path().string(), ec.message());
    WriteNpy(path.string(), array);  // atomically (base/npy.h)
  }
}

}  // namespace tpusim::sim
