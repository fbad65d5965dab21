// The field lists of sim/metrics.h: StepParts' visitor against the steps CSV's
// header and the JSON keys (names and order users parse), the sums, and the
// strict JSON round trips of StepParts, CoreMetrics and HostMetrics (a missing
// field is a json::exception, an unknown one an Error).
#include "sim/metrics.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.h"

namespace tpusim::sim {
namespace {

using json = nlohmann::json;

// Each part set to its position in kStepParts plus one, through the visitor.
sim::StepParts Numbered() {
  sim::StepParts p;
  double n = 0;
  ForEachPart(p, [&n](std::string_view, double& seconds) { seconds = ++n; });
  return p;
}

TEST(StepPartsTest, VisitorYieldsEveryFieldOnceInTheListsOrder) {
  const sim::StepParts p = Numbered();
  EXPECT_EQ(p.infeed_wait_s, 1);
  EXPECT_EQ(p.compute_s, 2);
  EXPECT_EQ(p.embedding_lookup_s, 3);
  EXPECT_EQ(p.embedding_exchange_s, 4);
  EXPECT_EQ(p.crs_s, 5);
  EXPECT_EQ(p.crs_sync_s, 6);
  EXPECT_EQ(p.apply_s, 7);
  EXPECT_EQ(p.device_s, 8);
  EXPECT_EQ(p.outfeed_s, 9);
  EXPECT_EQ(p.post_loop_s, 10);
  EXPECT_EQ(p.step_s, 11);
  std::vector<std::string> names;
  ForEachPart(p, [&names](std::string_view name, const double&) { names.emplace_back(name); });
  EXPECT_EQ(names, (std::vector<std::string>{"infeed_wait_s", "compute_s", "embedding_lookup_s", "embedding_exchange_s",
                                             "crs_s", "crs_sync_s", "apply_s", "device_s", "outfeed_s", "post_loop_s",
                                             "step_s"}));
}

TEST(StepPartsTest, SumAddsEveryPart) {
  sim::StepParts sum = Numbered();
  sum += Numbered();
  double n = 0;
  ForEachPart(sum, [&n](std::string_view name, double seconds) { EXPECT_EQ(seconds, 2 * ++n) << name; });
}

// The header users parse: the columns as they have always been, in their order,
// and the ones added since only at the end (the host's CPU seconds, then the
// core's checkpoint columns).
TEST(StepsCsvTest, HeaderKeepsItsColumnsAndAddsOnlyAtTheEnd) {
  EXPECT_EQ(kStepsCsvHeader,
            "step,src_host,host,ordinal,replica,logical_core,start_s,infeed_wait_s,compute_s,"
            "embedding_lookup_s,embedding_exchange_s,crs_s,crs_sync_s,apply_s,device_s,outfeed_s,"
            "post_loop_s,idle_s,step_s,host_build_s,host_enqueue_s,host_sent_s,host_build_cpu_s,"
            "host_enqueue_cpu_s,host_read_s,host_read_cpu_s,host_crc_s,host_crc_cpu_s,host_parse_s,"
            "host_parse_cpu_s,host_decode_s,host_decode_cpu_s,host_resize_s,host_resize_cpu_s,host_batch_s,"
            "host_batch_cpu_s,checkpoint_s,checkpoint_blocked_s");
}

TEST(StepsCsvTest, HeaderIsTheFieldListWithIdleBeforeTheStep) {
  std::string parts;
  for (const sim::StepPart& part : sim::kStepParts) {
    if (std::string_view(part.name) == "step_s") parts += ",idle_s";
    parts += std::string(",") + part.name;
  }
  EXPECT_NE(kStepsCsvHeader.find("start_s" + parts + ",host_build_s"), std::string::npos);
}

TEST(StepsCsvTest, RowValuesFollowTheHeadersColumns) {
  sim::StepParts p;
  p.infeed_wait_s = 0.25;
  p.step_s = 1;
  std::vector<std::string> columns;
  std::vector<double> values;
  ForEachCsvPart(p, [&](std::string_view column, double seconds) {
    columns.emplace_back(column);
    values.push_back(seconds);
  });
  ASSERT_EQ(columns.size(), sim::kStepParts.size() + 1);
  EXPECT_EQ(columns[columns.size() - 2], "idle_s");
  EXPECT_EQ(values[values.size() - 2], 0.75);  // what the parts leave of the step
  EXPECT_EQ(values.back(), 1);
  EXPECT_EQ(values.front(), 0.25);
}

TEST(StepPartsJsonTest, KeysAreTheFieldNamesAndRoundTripExactly) {
  const sim::StepParts p = Numbered();
  const json j = p;
  ASSERT_EQ(j.size(), sim::kStepParts.size());
  for (const sim::StepPart& part : sim::kStepParts) EXPECT_EQ(j.at(part.name), p.*part.field) << part.name;
  const sim::StepParts back = json::parse(j.dump()).get<sim::StepParts>();
  ForEachPart(back, [&p](std::string_view name, const double& seconds) {
    EXPECT_EQ(seconds, json(p).at(name).get<double>()) << name;
  });
}

TEST(StepPartsJsonTest, MissingAndUnknownPartsAreErrors) {
  for (const sim::StepPart& part : sim::kStepParts) {
    json missing = Numbered();
    missing.erase(part.name);
    EXPECT_THROW(missing.get<sim::StepParts>(), json::exception) << part.name;
  }
  json unknown = Numbered();
  unknown["idle_s"] = 0;  // a CSV column, not a field
  EXPECT_THROW(unknown.get<sim::StepParts>(), Error);
}

sim::CoreMetrics FullCore() {
  sim::CoreMetrics c;
  c.host = 1;
  c.ordinal = 2;
  c.replica = 3;
  c.logical_core = 0;
  c.fed = c.trains = true;
  sim::CoreStepRecord r;
  r.parts = Numbered();
  r.bytes = 64;
  r.occupancy = 2;
  r.rows_served = 5;
  r.modeled_device_s = 0.125;
  c.Add(r, false);
  c.Add(r, true);
  c.crs = sim::CoreCrs{4, 1024, 0.5, 0.25, 0.25, 1e9, 2e9, 8};
  c.global_step = 9;
  c.param_checksums = {{"w", "00ff"}};
  c.non_finite_steps = 1;
  c.non_finite = sim::NonFiniteValue{7, 3, "loss"};
  c.stopped_on_non_finite = true;
  c.checkpoint_saves = {sim::CoreSaveRecord{4, 8, 100, 400, 0.5, 1.5, 0.25, 0.75, 2.0, 3.5, true}};
  c.checkpoint_final_wait_s = 0.125;
  return c;
}

sim::HostMetrics FullHost() {
  sim::HostMetrics h;
  h.host = 2;
  h.rows_per_step = 16;
  h.shards_sent = 8;
  h.bytes_sent = 4096;
  h.shards_forwarded = 1;
  h.credit_wait_s = 0.5;
  h.build_wait_s = 0.25;
  h.Add({0, 0.1, 0.2, 0.3}, false);
  h.Add({1, 0.1, 0.2, 0.6}, true);
  h.embedding_ids_enqueued = 12;
  h.loops = {{0, 10, 1.5, 0.75}};
  h.input_during_saves = {{20, 0.5, 96}};
  h.input_outside_saves_s = 2.5;
  h.examples_outside_saves = 640;
  sim::PipelineStages& p = h.pipeline.emplace();
  p.costs.file_read_cpu_s = 0.5;
  p.costs.enqueue_cpu_s = 0.25;
  p.costs.examples = 64;
  p.costs.device_bytes = 4096;
  p.bound_by = "enqueue";
  p.cost_mode = "burn";
  p.simulator_cpu_s_per_example = 0.75 / 64;
  return h;
}

// Round trip, then every field missing in turn, then one key too many.
template <class M>
void ExpectStrictRoundTrip(const M& m) {
  const json j = m;
  EXPECT_EQ(json(json::parse(j.dump()).get<M>()), j);
  for (const auto& item : j.items()) {
    json missing = j;
    missing.erase(item.key());
    EXPECT_THROW(missing.get<M>(), json::exception) << item.key();
  }
  json unknown = j;
  unknown["no_such_field"] = 1;
  EXPECT_THROW(unknown.get<M>(), Error);
}

TEST(MetricsJsonTest, CoreMetricsRoundTripStrictly) {
  ExpectStrictRoundTrip(FullCore());
  ExpectStrictRoundTrip(sim::CoreMetrics{});  // the optionals as null
  EXPECT_EQ(json(FullCore()).size(), 31u);    // + timeline, fed_by (the page), embedding_hbm_bytes
  EXPECT_EQ(json(FullCore())["checkpoint_saves"][0].size(), 11u);
  EXPECT_EQ(json(FullCore())["checkpoint_saves"][0]["write_s"], 1.5);
  EXPECT_EQ(json(FullCore())["modeled_device_s"], 0.125);  // the window's step only
}

TEST(MetricsJsonTest, HostMetricsRoundTripStrictly) {
  ExpectStrictRoundTrip(FullHost());
  EXPECT_EQ(json(FullHost()).size(), 20u);  // + sparse_enqueue
  EXPECT_EQ(json(FullHost())["input_during_saves"][0].size(), 3u);
  EXPECT_EQ(json(FullHost())["input_during_saves"][0]["examples"], 96);
}

}  // namespace
}  // namespace tpusim::sim
