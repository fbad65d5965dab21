#include "sim/pipeline_stages.h"

namespace tpusim::sim {
namespace {

// Every stage, by its name in the report, for both directions of the JSON.
template <typename Times, typename Fn>
void ForEachStage(Times& t, Fn&& fn) {
  fn("file_read_s", t.file_read_s);
  fn("preprocessing_s", t.preprocessing_s);
  fn("shuffle_s", t.shuffle_s);
  fn("enqueue_s", t.enqueue_s);
}

}  // namespace

void to_json(nlohmann::json& j, const PipelineStages& p) {
  nlohmann::json stages = nlohmann::json::object();
  ForEachStage(p.stages, [&stages](const char* name, double value) { stages[name] = value; });
  j = {{"stages", stages},
       {"costs", p.costs},
       {"window_costs", p.window_costs},
       {"bound_by", p.bound_by},
       {"cost_mode", p.cost_mode},
       {"modeled_workers", p.modeled_workers},
       {"simulator_cpu_s_per_example", p.simulator_cpu_s_per_example}};
  if (p.direct_io) j["direct_io"] = *p.direct_io;
  if (p.tfrecord) j["tfrecord"] = *p.tfrecord;
}

void from_json(const nlohmann::json& j, PipelineStages& p) {
  const nlohmann::json& stages = j.at("stages");
  ForEachStage(p.stages, [&stages](const char* name, double& value) { stages.at(name).get_to(value); });
  j.at("costs").get_to(p.costs);
  j.at("window_costs").get_to(p.window_costs);
  j.at("bound_by").get_to(p.bound_by);
  j.at("cost_mode").get_to(p.cost_mode);
  j.at("modeled_workers").get_to(p.modeled_workers);
  j.at("simulator_cpu_s_per_example").get_to(p.simulator_cpu_s_per_example);
  p.direct_io.reset();
  if (j.contains("direct_io")) p.direct_io = j["direct_io"].get<DirectIoStatus>();
  p.tfrecord.reset();
  if (j.contains("tfrecord")) p.tfrecord = j["tfrecord"].get<TfRecordStages>();
}

}  // namespace tpusim::sim
