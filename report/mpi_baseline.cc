#include "report/mpi_baseline.h"

#include <chrono>

#include "cluster/message_tags.h"
#include "infeed/shard_message.h"

namespace tpusim::sim {
namespace {

using cluster::kTagBaseline;
constexpr int kBaselineMessages = 16;

}  // namespace

MpiBaseline MeasureMpiBaseline(const cluster::Transport& world, const cluster::RankLayout& layout,
                               const cluster::RankRole& role, const infeed::InfeedPlan& plan) {
  world.Barrier();
  MpiBaseline result;
  if (role.is_core()) {
    const infeed::ShardRoute* route = plan.route_to(role.host, role.ordinal);
    if (!route || plan.source_host(role.host, role.ordinal) != role.host) return result;
    std::vector<std::byte> buffer(infeed::ShardCodec(plan.features(), *route).wire_bytes());
    for (int i = 0; i < kBaselineMessages + 1; ++i) {
      world.Recv(buffer, layout.host_rank(role.host), kTagBaseline);
    }
    return result;
  }
  const infeed::HostPlan* hp = plan.host_plan(role.host);
  if (!hp) return result;
  std::vector<std::vector<std::byte>> messages;
  std::vector<int> peers;
  for (const infeed::ShardRoute& r : hp->shards) {
    if (r.dst_host != role.host) continue;
    messages.emplace_back(infeed::ShardCodec(plan.features(), r).wire_bytes());
    peers.push_back(layout.core_rank(r.dst_host, r.dst_ordinal));
  }
  std::vector<cluster::Request> requests(messages.size());
  auto round = [&] {
    for (size_t i = 0; i < messages.size(); ++i) {
      requests[i] = world.Isend(messages[i], peers[i], kTagBaseline, "MPI_Isend (baseline)");
    }
    for (cluster::Request& r : requests) r.Wait();
  };
  round();  // warm-up: connections and registration
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kBaselineMessages; ++i) round();
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const auto& m : messages) result.bytes += static_cast<int64_t>(m.size()) * kBaselineMessages;
  return result;
}

}  // namespace tpusim::sim
