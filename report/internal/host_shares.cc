#include "report/internal/host_shares.h"

namespace tpusim::report::internal {
namespace {

// What a host sent per step, and in the simulator ceiling's pass.
struct Sent {
  double examples = 0, bytes = 0, ceiling_examples = 0, ceiling_bytes = 0;
};

Sent SentOf(const sim::RankMetrics& r) {
  const sim::HostMetrics& h = *r.host;
  Sent s{static_cast<double>(h.rows_per_step),
         h.steps > 0 ? static_cast<double>(h.bytes_sent) / static_cast<double>(h.steps) : 0.0};
  if (r.simulator_ceiling) {
    s.ceiling_examples = static_cast<double>(r.simulator_ceiling->examples);
    s.ceiling_bytes = static_cast<double>(r.simulator_ceiling->bytes);
  }
  return s;
}

bool SentSteps(const sim::RankMetrics& r) { return r.host && r.host->steps > 0; }

double ShareOf(double total, double part, double whole) { return whole > 0 ? total * part / whole : 0.0; }

}  // namespace

void AddHostShares(const std::vector<sim::RankMetrics>& ranks, Report& report) {
  Sent all;
  for (const sim::RankMetrics& m : ranks) {
    if (!SentSteps(m)) continue;
    const Sent s = SentOf(m);
    all = {all.examples + s.examples, all.bytes + s.bytes, all.ceiling_examples + s.ceiling_examples,
           all.ceiling_bytes + s.ceiling_bytes};
  }
  const CeilingSection ceiling = report.simulator_ceiling.value_or(CeilingSection{});
  size_t row = 0;
  for (const sim::RankMetrics& m : ranks) {
    if (!m.host) continue;
    HostRow& h = report.hosts.at(row++);
    if (!SentSteps(m)) continue;
    const Sent s = SentOf(m);
    h.share = HostShare{ShareOf(report.totals.examples_per_s, s.examples, all.examples),
                        ShareOf(report.totals.bytes_per_s, s.bytes, all.bytes),
                        ShareOf(ceiling.examples_per_s, s.ceiling_examples, all.ceiling_examples),
                        ShareOf(ceiling.bytes_per_s, s.ceiling_bytes, all.ceiling_bytes)};
  }
}

}  // namespace tpusim::report::internal
