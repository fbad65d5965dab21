#include "tests/common/transport_cases.h"

#include <chrono>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.h"
#include "base/huge_page_allocator.h"
#include "cluster/cross_replica_sum.h"
#include "cluster/device_assignment.h"
#include "cluster/message_tags.h"
#include "cluster/rank_layout.h"
#include "cluster/topology.h"
#include "cluster/topology_source.h"
#include "infeed/infeed_plan.h"
#include "infeed/infeed_transport.h"

namespace tpusim::testing_cases {
namespace {

using cluster::ReduceOp;
using cluster::Request;
using cluster::Transport;

std::vector<std::byte> Pattern(size_t n, int seed) {
  std::vector<std::byte> bytes(n);
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<std::byte>((i * 31 + static_cast<size_t>(seed)) & 0xff);
  return bytes;
}

}  // namespace

void TagMatchingAndOrder(const Transport& t) {
  ASSERT_GE(t.size(), 2);
  const size_t kBig = size_t{200} << 10;  // beyond any eager limit: a rendezvous
  if (t.rank() == 0) {
    std::vector<std::vector<std::byte>> out = {Pattern(10, 1), Pattern(20, 2), Pattern(30, 3), Pattern(kBig, 4),
                                               Pattern(40, 5)};
    const int tags[] = {5, 6, 5, 6, 5};
    std::vector<Request> sends;
    for (size_t i = 0; i < out.size(); ++i) sends.push_back(t.Isend(out[i], 1, tags[i]));
    const std::vector<std::byte> a = Pattern(3, 6), b = Pattern(5, 7);
    const std::span<const std::byte> gathered[] = {a, b};
    sends.push_back(t.IsendBlocks(gathered, 1, 7));
    for (Request& r : sends) r.Wait();
  } else if (t.rank() == 1) {
    cluster::Pending first6 = t.Probe(0, 6);
    EXPECT_EQ(first6.bytes, 20u);
    EXPECT_EQ(first6.source, 0);
    EXPECT_EQ(first6.tag, 6);
    std::vector<std::byte> in(20);
    t.Recv(in, 0, 6);
    EXPECT_EQ(in, Pattern(20, 2));
    in.assign(kBig, std::byte{0});
    Request big = t.Irecv(in, cluster::kAnySource, 6);
    big.Wait();
    EXPECT_EQ(big.received_bytes(), kBig);
    EXPECT_EQ(in, Pattern(kBig, 4));
    cluster::Pending any = t.Probe(cluster::kAnySource, cluster::kAnyTag);
    EXPECT_EQ(any.tag, 5);
    EXPECT_EQ(any.bytes, 10u);
    for (auto [bytes, seed] : {std::pair<size_t, int>{10, 1}, {30, 3}, {40, 5}}) {
      std::vector<std::byte> message(64);
      Request r = t.Irecv(message, 0, 5);
      r.Wait();
      ASSERT_EQ(r.received_bytes(), bytes);
      message.resize(bytes);
      EXPECT_EQ(message, Pattern(bytes, seed));
    }
    std::vector<std::byte> x(4), y(4);
    const std::span<std::byte> scattered[] = {x, y};
    Request r = t.IrecvBlocks(scattered, 0, 7);
    r.Wait();
    EXPECT_EQ(r.received_bytes(), 8u);
    std::vector<std::byte> joined(x);
    joined.insert(joined.end(), y.begin(), y.end());
    std::vector<std::byte> expected = Pattern(3, 6);
    const std::vector<std::byte> b = Pattern(5, 7);
    expected.insert(expected.end(), b.begin(), b.end());
    EXPECT_EQ(joined, expected);
    EXPECT_FALSE(t.TryProbe(cluster::kAnySource, cluster::kAnyTag).has_value());
  }
  t.Barrier();
}

void Collectives(const Transport& t) {
  const int n = t.size(), p = t.rank();
  std::vector<double> values{static_cast<double>(p), 1.0, static_cast<double>(-p)};
  t.AllreduceInPlace(std::span<double>(values), ReduceOp::kSum);
  EXPECT_EQ(values, (std::vector<double>{n * (n - 1) / 2.0, static_cast<double>(n), -n * (n - 1) / 2.0}));
  int32_t extreme[2] = {p, p};
  t.AllreduceInPlace(std::span<int32_t>(extreme, 1), ReduceOp::kMax);
  t.AllreduceInPlace(std::span<int32_t>(extreme + 1, 1), ReduceOp::kMin);
  EXPECT_EQ(extreme[0], n - 1);
  EXPECT_EQ(extreme[1], 0);

  std::vector<int> counts;
  std::vector<std::byte> gathered = t.Gatherv(Pattern(static_cast<size_t>(p + 1), p), n - 1, &counts);
  if (p == n - 1) {
    ASSERT_EQ(counts.size(), static_cast<size_t>(n));
    size_t at = 0;
    for (int q = 0; q < n; ++q) {
      EXPECT_EQ(counts[static_cast<size_t>(q)], q + 1);
      std::vector<std::byte> part(gathered.begin() + static_cast<std::ptrdiff_t>(at),
                                  gathered.begin() + static_cast<std::ptrdiff_t>(at) + q + 1);
      EXPECT_EQ(part, Pattern(static_cast<size_t>(q + 1), q));
      at += static_cast<size_t>(q + 1);
    }
  }
  std::vector<std::byte> shared = p == 0 ? Pattern(100, 9) : std::vector<std::byte>(100);
  t.Broadcast(shared, 0);
  EXPECT_EQ(shared, Pattern(100, 9));
  const int32_t mine = p * 10;
  std::vector<std::byte> all = t.Allgather(std::as_bytes(std::span<const int32_t>(&mine, 1)));
  ASSERT_EQ(all.size(), sizeof(int32_t) * static_cast<size_t>(n));
  for (int q = 0; q < n; ++q) {
    int32_t v;
    std::memcpy(&v, all.data() + sizeof(int32_t) * static_cast<size_t>(q), sizeof(v));
    EXPECT_EQ(v, q * 10);
  }
  // Even and odd members, each half ordered by descending rank; the last member
  // of an odd-sized group sits out.
  const bool out = n % 2 == 1 && p == n - 1;
  std::unique_ptr<Transport> half = t.Split(out ? -1 : p % 2, -p);
  if (out) {
    EXPECT_FALSE(half->valid());
    return;
  }
  ASSERT_TRUE(half->valid());
  EXPECT_EQ(half->size(), n / 2);
  EXPECT_EQ(half->rank(), (n / 2 - 1) - p / 2);
  double sum = p;
  half->AllreduceInPlace(std::span<double>(&sum, 1), ReduceOp::kSum);
  double expected = 0;
  for (int q = p % 2; q < n - (n % 2); q += 2) expected += q;
  EXPECT_EQ(sum, expected);
}

void CrossReplicaSum(const Transport& t) {
  const int n = t.size(), p = t.rank();
  const size_t count = 1001;
  for (cluster::CrsAlgorithm algorithm : {cluster::CrsAlgorithm::kRing, cluster::CrsAlgorithm::kMpi}) {
    cluster::CrossReplicaSumOptions options;
    options.algorithm = algorithm;
    options.ring_chunk_bytes = 256;  // several chunks per ring segment
    cluster::CrossReplicaSum crs(t, p, options);
    std::vector<float> data(count);
    for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>(p * 1000 + static_cast<int>(i));
    crs.Sum(std::span<float>(data));
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(data[i], static_cast<float>(1000 * n * (n - 1) / 2 + n * static_cast<int>(i))) << i;
    }
    std::vector<int32_t> ints(count, p + 1);
    crs.Sum(std::span<int32_t>(ints));
    EXPECT_EQ(ints.front(), n * (n + 1) / 2);
    EXPECT_EQ(ints.back(), n * (n + 1) / 2);
    cluster::CrsTimingSummary summary = crs.Summarize();
    EXPECT_EQ(summary.calls, 2);
    EXPECT_EQ(summary.bytes, static_cast<int64_t>(count * (sizeof(float) + sizeof(int32_t))));
  }
  if (n % 2 != 0 || n < 2) return;
  cluster::CrossReplicaSumOptions options;
  options.group_assignment.resize(2);
  for (int r = 0; r < n; ++r) options.group_assignment[static_cast<size_t>(r % 2)].push_back(r);
  cluster::CrossReplicaSum crs(t, p, options);
  std::vector<double> data{static_cast<double>(p), 1.0};
  crs.Sum(std::span<double>(data));
  double expected = 0;
  for (int r = p % 2; r < n; r += 2) expected += r;
  EXPECT_EQ(data[0], expected);
  EXPECT_EQ(data[1], n / 2);
  EXPECT_EQ(crs.group_index(), p % 2);
}

void AllToAll(const Transport& t) {
  const int n = t.size(), p = t.rank();
  std::vector<std::vector<std::byte>> send(static_cast<size_t>(n));
  for (int q = 0; q < n; ++q) send[static_cast<size_t>(q)] = Pattern(static_cast<size_t>(p + q + 1), p * 64 + q);
  std::vector<std::vector<std::byte>> received = t.AllToAll(std::move(send));
  ASSERT_EQ(received.size(), static_cast<size_t>(n));
  for (int q = 0; q < n; ++q) {
    EXPECT_EQ(received[static_cast<size_t>(q)], Pattern(static_cast<size_t>(p + q + 1), q * 64 + p)) << q;
  }
}

namespace {

// Row `row` of feature x for example `id`: exact small integers in float.
float Value(int64_t id, int64_t j) { return static_cast<float>((id * 7 + j) % 65536); }

struct InfeedSetup {
  cluster::Topology topology;
  cluster::DeviceAssignment assignment;
  cluster::RankLayout layout;
  infeed::InfeedPlan plan;
};

InfeedSetup MakeInfeedSetup(const std::string& name, bool per_host, int64_t feature_floats) {
  cluster::Topology topology = cluster::LoadTopology(cluster::ResolveTopology(name));
  cluster::DeviceAssignmentOptions da;
  da.computation_shape = cluster::ComputationShape(1, topology);
  da.num_replicas = topology.num_cores();
  cluster::DeviceAssignment assignment = cluster::DeviceAssignment::Build(topology, da);
  cluster::RankLayout layout(topology.num_hosts(), topology.cores_per_host());
  infeed::InfeedPlanOptions o;
  o.per_host = per_host;
  o.global_batch = 2 * topology.num_cores();
  o.features = {{"x", infeed::DType::kFloat32, {feature_floats}}};
  infeed::InfeedPlan plan = infeed::InfeedPlan::Build(assignment, topology.num_hosts(), topology.cores_per_host(), o);
  return {std::move(topology), std::move(assignment), layout, std::move(plan)};
}

void RunCore(const Transport& t, const InfeedSetup& s, const cluster::RankRole& role,
             const infeed::TransportOptions& options, int64_t floats) {
  const infeed::ShardRoute* route = s.plan.route_to(role.host, role.ordinal);
  if (!route) return;
  const int host_rank = s.layout.host_rank(role.host);
  infeed::CoreInfeedQueue queue(s.plan, *route, t, host_rank, options);
  // A piece that travels alone as bytes (not handed over in this process) lands in
  // the slot released last: with every step released before the next dequeue, in
  // the same memory step after step, which stays in the caches; a small one is
  // received a step ahead, so two slots take turns. In a slot on huge pages it
  // starts a page.
  const bool handed_over = s.plan.source_host(role.host, role.ordinal) == role.host && t.SharesMemoryWith(host_rank);
  const size_t piece_bytes = infeed::ShardCodec(s.plan.features(), *route).piece_bytes(0);
  const bool alone = !handed_over && piece_bytes >= infeed::kAloneBytes;
  const size_t turns = piece_bytes < infeed::kPiecesAheadBelow ? 2 : 1;
  std::vector<const std::byte*> pieces;
  for (int64_t step = 0; step < options.num_steps; ++step) {
    int occupancy = 0;
    infeed::ShardCodec::View v = queue.Dequeue(step, nullptr, &occupancy);
    EXPECT_LE(occupancy, options.queue_depth);
    ASSERT_EQ(v.header.step, step);
    pieces.push_back(v.tensor_bytes[0].data());
    if (alone && LargeBuffersOnHugePages() && piece_bytes >= kHugePageBytes) {  // the slot starts a huge page
      EXPECT_EQ(reinterpret_cast<uintptr_t>(pieces.back()) % 4096, 0u) << "at a page boundary";
    }
    if (alone && pieces.size() > turns) {
      EXPECT_EQ(pieces.back(), pieces[pieces.size() - 1 - turns]) << "step " << step;
      if (turns == 2) {
        EXPECT_NE(pieces.back(), pieces[pieces.size() - 2]) << "step " << step << " (two slots take turns)";
      }
    }
    const auto* x = reinterpret_cast<const float*>(v.tensor_bytes[0].data());
    for (size_t r = 0; r < v.example_ids.size(); ++r) {
      for (int64_t j = 0; j < floats; ++j) {
        ASSERT_EQ(x[static_cast<int64_t>(r) * floats + j], Value(v.example_ids[r], j)) << "step " << step;
      }
    }
    if (step % 4 == 3) {
      // Holding this step's slot: the host may have sent at most queue_depth - 1
      // later steps, all already matched by pre-posted slots.
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      EXPECT_FALSE(t.TryProbe(host_rank, cluster::kTagShard).has_value()) << "step " << step;
    }
    queue.Release(step);
  }
}

}  // namespace

void InfeedCredits(const Transport& t, const std::string& topology, bool per_host, int64_t feature_floats,
                   int64_t num_steps) {
  const InfeedSetup s = MakeInfeedSetup(topology, per_host, feature_floats);
  ASSERT_EQ(t.size(), s.layout.world_size());
  const cluster::RankRole role = s.layout.RoleOf(t.rank(), s.assignment);
  infeed::TransportOptions options;
  options.parallelism = 2;
  options.queue_depth = 2;
  options.num_steps = num_steps;
  options.window_first_step = num_steps / 2;  // the report's warm-up: the steps before it
  if (role.is_core()) {
    RunCore(t, s, role, options, feature_floats);
  } else {
    const infeed::HostPlan* hp = s.plan.host_plan(role.host);
    auto fill = [&](int64_t step, infeed::Batch& batch, std::span<int64_t> ids) {
      std::span<float> x = batch.at("x").data<float>();
      for (size_t r = 0; r < ids.size(); ++r) {
        ids[r] = step * 1000 + hp->first_row() + static_cast<int64_t>(r);
        for (int64_t j = 0; j < feature_floats; ++j) {
          x[r * static_cast<size_t>(feature_floats) + static_cast<size_t>(j)] = Value(ids[r], j);
        }
      }
    };
    infeed::HostFeedStats stats = infeed::RunHostInfeed(s.plan, s.layout, t, role.host, options, fill);
    if (hp) {
      EXPECT_EQ(stats.shards_sent, options.num_steps * static_cast<int64_t>(hp->shards.size()));
      // A core of this process reads its shard in the host's package (no copy);
      // over MPI, or through a relay, the bytes travel.
      int64_t handed_over = 0;
      for (const infeed::ShardRoute& r : hp->shards) {
        const bool direct = r.dst_host == role.host;
        handed_over += direct && t.SharesMemoryWith(s.layout.core_rank(r.dst_host, r.dst_ordinal)) ? 1 : 0;
      }
      EXPECT_EQ(stats.shards_handed_over, options.num_steps * handed_over);
      // The even split sends every row once: the device bytes are the batches' floats.
      EXPECT_EQ(stats.costs.examples, options.num_steps * hp->rows_per_step);
      EXPECT_EQ(stats.costs.device_bytes,
                options.num_steps * hp->rows_per_step * feature_floats * static_cast<int64_t>(sizeof(float)));
      EXPECT_GT(stats.costs.enqueue_cpu_s, 0);
      EXPECT_EQ(stats.costs.preprocessing_cpu_s, 0);  // the filler's stages are the pipeline's
      // Of them, the warm-up's: its steps' rows and bytes, and part of the CPU.
      EXPECT_EQ(stats.warmup_costs.examples, options.window_first_step * hp->rows_per_step);
      EXPECT_EQ(stats.warmup_costs.device_bytes * options.num_steps,
                stats.costs.device_bytes * options.window_first_step);
      EXPECT_GT(stats.warmup_costs.build_cpu_s, 0);
      EXPECT_LT(stats.warmup_costs.build_cpu_s, stats.costs.build_cpu_s);
      EXPECT_LE(stats.warmup_costs.enqueue_cpu_s, stats.costs.enqueue_cpu_s);
      const int64_t window = 2 * options.parallelism + options.queue_depth;
      EXPECT_EQ(stats.packages_allocated, std::min(num_steps, window + options.queue_depth + 1));
    } else {
      EXPECT_EQ(stats.shards_forwarded, options.num_steps * s.topology.cores_per_host());
    }
  }
  t.Barrier();
}

void InfeedWorkerFailure(const cluster::Transport& t) {
  const InfeedSetup s = MakeInfeedSetup("v4-8", true, 8);
  ASSERT_EQ(t.size(), s.layout.world_size());
  const cluster::RankRole role = s.layout.RoleOf(t.rank(), s.assignment);
  constexpr int64_t kFailingStep = 2;  // = queue_depth: steps before it need no credit
  infeed::TransportOptions options;
  options.parallelism = 2;
  options.queue_depth = 2;
  options.num_steps = 8;
  if (role.is_core()) {
    // The core takes the steps before the failing one and holds them (no credit
    // goes back, so no message is left unreceived when the host stops).
    const infeed::ShardRoute* route = s.plan.route_to(role.host, role.ordinal);
    if (!route) return;
    options.num_steps = kFailingStep;
    infeed::CoreInfeedQueue queue(s.plan, *route, t, s.layout.host_rank(role.host), options);
    for (int64_t step = 0; step < kFailingStep; ++step)
      EXPECT_EQ(queue.Dequeue(step, nullptr, nullptr).header.step, step);
  } else if (s.plan.host_plan(role.host)) {
    auto fill = [](int64_t step, infeed::Batch&, std::span<int64_t>) {
      if (step == kFailingStep) Fail("the input pipeline failed at step {}", step);
    };
    try {
      infeed::RunHostInfeed(s.plan, s.layout, t, role.host, options, fill);
      ADD_FAILURE() << "host " << role.host << ": a worker's failure did not reach the sender";
    } catch (const Error& e) {
      EXPECT_STREQ(e.what(), "the input pipeline failed at step 2");
    }
  }
  t.Barrier();
}

void InfeedCreditsPerHost(const cluster::Transport& t) { InfeedCredits(t, "v4-8", true, 8); }

void InfeedCreditsLargePieces(const cluster::Transport& t) { InfeedCredits(t, "v4-8", true, 16384); }

// Two rows of 2 MiB per core: pieces received when their step is dequeued.
void InfeedCreditsPiecesOnDemand(const cluster::Transport& t) {
  InfeedCredits(t, "v4-8", true, static_cast<int64_t>(infeed::kPiecesAheadBelow / sizeof(float)), 6);
}

void InfeedCreditsRelayed(const cluster::Transport& t) { InfeedCredits(t, "v4-32", false, 16384); }

}  // namespace tpusim::testing_cases
