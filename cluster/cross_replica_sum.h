// cross_replica_sum (docs/reference/infeed.md §6) between the cores that share one
// logical core: the replica groups of a `group_assignment`, one sub-transport per
// group (MPI or in-process), an in-place Sum with either the transport's allreduce or our own
// deterministic ring, per-call timing with the min-duration split into compute and
// sync, and a projection of the same all-reduce onto the real machine's ICI links.
// A multislice job (slices > 1) sums hierarchically as XLA does: a ring reduce-scatter
// inside each slice (ICI), a ring all-reduce of each shard across the slices (DCN) and
// a ring all-gather inside each slice; its projection adds the DCN phase.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <memory>

#include "cluster/topology.h"
#include "cluster/transport.h"

namespace tpusim::cluster {

// Rows of replica ids; row g lists the replicas of group g in the order that
// becomes their rank in the group communicator.
using GroupAssignment = std::vector<std::vector<int>>;

// Throws Error naming `group_assignment` unless every row is non-empty, all rows
// have the same length, every id lies in [0, num_replicas) and every replica id
// appears exactly once (XLA's cross-replica-mode rules). An empty assignment is
// valid and means one group of every replica. Pure, no MPI.
void ValidateGroupAssignment(const GroupAssignment& group_assignment, int num_replicas);

// Throws Error unless `slices` >= 1 divides `num_replicas` (the message names both)
// and every group of `group_assignment` (empty = one group of every replica) has the
// same number of members in each slice it reaches; the message then names the group.
// Replica ids are slice-major: replica r is in slice r / (num_replicas / slices). A
// group inside one slice is valid (it sums with the flat ring). Pure, no MPI; expects
// an assignment ValidateGroupAssignment accepts.
void ValidateSlices(const GroupAssignment& group_assignment, int num_replicas, int slices);

enum class CrsAlgorithm {
  kMpi,   // MPI_Allreduce on the group communicator (the baseline)
  kRing,  // our reduce-scatter + all-gather ring, bitwise reproducible
};

struct CrossReplicaSumOptions {
  // Empty (the default) = one group `[[0, 1, ..., R-1]]` of every replica.
  GroupAssignment group_assignment;
  CrsAlgorithm algorithm = CrsAlgorithm::kRing;
  // The ring pipelines each segment in chunks of at most this many bytes so the
  // addition of one chunk overlaps the arrival of the next.
  size_t ring_chunk_bytes = size_t{256} << 10;
  // Slices of a multislice job, joined by the data-centre network (DCN). With more
  // than one, kRing sums a group that spans slices hierarchically (reduce-scatter in
  // the slice, all-reduce of each shard across slices, all-gather in the slice);
  // kMpi stays one MPI_Allreduce over the group. See ValidateSlices for the rules.
  int slices = 1;
};

// Totals over the calls made so far, seen from one member of a group. Per call,
// compute = the shortest duration any member of the group measured for it and
// sync = this member's duration minus that minimum (the min-duration method: the
// fastest member waited least, so its time approximates the collective's own
// cost and the rest of everyone else's time is waiting for stragglers).
struct CrsTimingSummary {
  int64_t calls = 0;
  int64_t bytes = 0;  // payload bytes summed over calls (one member's buffer)
  double total_seconds = 0;
  double compute_seconds = 0;
  double sync_seconds = 0;
  double algbw_bytes_per_sec = 0;  // bytes / total_seconds
  double busbw_bytes_per_sec = 0;  // algbw * 2(n-1)/n, n = group size; 0 when n = 1
  // The hierarchical ring's phases (kRing with slices > 1; all 0 for one slice and for
  // kMpi), this member's own seconds summed over calls: the reduce-scatter in its
  // slice, the all-reduce of its shard across slices, the all-gather in its slice.
  double reduce_scatter_seconds = 0;
  double cross_slice_all_reduce_seconds = 0;
  double all_gather_seconds = 0;
  int64_t dcn_bytes = 0;  // payload bytes this member sent to other slices
};

// One replica's handle on cross_replica_sum. Not thread-safe; every member of a
// group must make the same sequence of Sum calls with the same sizes and types.
class CrossReplicaSum {
 public:
  // Collective over `logical_core`: its members are the cores sharing one logical
  // core, `replica_id` is this member's replica, and together the members hold
  // every replica id 0..size-1 exactly once. Every member must pass the same
  // `options`. Throws Error on a bad group_assignment (before any MPI call, so
  // every member throws) or when the members' replica ids are not 0..size-1.
  CrossReplicaSum(const Transport& logical_core, int replica_id, CrossReplicaSumOptions options = {});
  CrossReplicaSum(CrossReplicaSum&&) noexcept = default;
  CrossReplicaSum& operator=(CrossReplicaSum&&) noexcept = default;
  CrossReplicaSum(const CrossReplicaSum&) = delete;
  CrossReplicaSum& operator=(const CrossReplicaSum&) = delete;

  // Replaces `data` with the element-wise sum of `data` over the members of this
  // replica's group; a no-op (but timed) for groups of one. Collective over the
  // group. Throws Error when an MPI call fails or the size exceeds MPI's int count.
  // The ring result (flat or hierarchical) is identical bit for bit on every member
  // and on every run;
  // int32 wraps on overflow as XLA's does. No heap allocation once a call of the
  // same or larger byte size has been made (scratch is kept), apart from the
  // amortised growth of the timing log.
  void Sum(std::span<float> data);
  void Sum(std::span<double> data);
  void Sum(std::span<int32_t> data);

  int group_index() const { return group_index_; }
  int group_size() const { return group_->size(); }
  int rank_in_group() const { return group_->rank(); }
  const std::vector<int>& group_members() const { return members_; }  // replica ids
  CrsAlgorithm algorithm() const { return options_.algorithm; }
  int slice_index() const { return slice_index_; }  // this replica's slice
  // How many slices hold members of this replica's group (1 for one slice), and how
  // many members each of them holds.
  int group_slices() const { return group_slices_; }
  int members_per_slice() const { return group_size() / group_slices_; }

  // Wall duration of every Sum since the last Fold, in call order.
  const std::vector<double>& durations_seconds() const { return durations_seconds_; }
  int64_t bytes_summed() const { return bytes_summed_; }
  // Collective over the group: the fastest member's duration of every Sum since
  // the last Fold (the min-duration method's compute part of each call), in call
  // order, folded into the running totals; the per-call log is then emptied, so
  // memory stays bounded however long the run when callers fold regularly (tpusim
  // folds at every loop end). Throws Error when members made different numbers of
  // calls.
  std::vector<double> Fold();
  // Collective over the group: folds what is pending, then the totals since the
  // start (or ResetTiming).
  CrsTimingSummary Summarize();
  void ResetTiming();

 private:
  template <typename T>
  void SumTimed(std::span<T> data);
  void MakeSliceRings(const Transport& logical_core, int replica_id, int position);
  template <typename T>
  void HierarchicalSum(std::span<T> data);
  // The ring phases over `ring` on `data` cut into ring.size() segments at `offsets`
  // (n + 1 element offsets); each returns the payload bytes it sent.
  template <typename T>
  size_t ReduceScatter(const Transport& ring, std::span<T> data, const std::vector<size_t>& offsets);
  template <typename T>
  size_t AllGather(const Transport& ring, std::span<T> data, const std::vector<size_t>& offsets);
  template <typename T>
  size_t ReduceScatterStep(const Transport& ring, std::span<T> data, const std::vector<size_t>& offsets,
                           int send_segment, int recv_segment);
  std::span<std::byte> Scratch(size_t bytes);

  CrossReplicaSumOptions options_;
  std::unique_ptr<Transport> group_;
  // With slices > 1: the group's members in this replica's slice (row order), and
  // those at this replica's position in every slice (slice order).
  std::unique_ptr<Transport> slice_ring_;
  std::unique_ptr<Transport> cross_slice_ring_;
  int group_index_ = 0;
  int slice_index_ = 0;
  int group_slices_ = 1;
  std::vector<int> members_;
  std::vector<std::byte> scratch_;         // one incoming ring segment
  std::vector<Request> requests_;          // in-flight chunk sends and receives
  std::vector<size_t> segment_offsets_;    // the (slice) ring's segments
  std::vector<size_t> shard_offsets_;      // the cross-slice ring's segments of this member's shard
  std::vector<double> durations_seconds_;  // since the last Fold
  int64_t bytes_summed_ = 0;
  CrsTimingSummary phases_;  // the phase totals (reduce_scatter_seconds .. dcn_bytes)
  CrsTimingSummary folded_;  // totals of the folded calls
};

// Time an all-reduce of `bytes` per member over `group_size` chips would take on
// the real machine's ICI: 2(n-1)/n * bytes / (ici_link_gbps * 1e9 / 8), 0 for n = 1.
// Assumes the group is embedded as one ring along the torus whose hops are single
// ICI links used full duplex (each chip sends to its successor while receiving from
// its predecessor, one link direction each way), i.e. the bandwidth term of the
// classic ring; it ignores per-hop latency, several rings per torus dimension and
// the faster on-chip path between the two cores of a chip. Throws Error when
// group_size < 1, or when group_size > 1 and hw.ici_link_gbps is not positive.
double ModeledRingAllReduceSeconds(size_t bytes, int group_size, const HardwareFigures& hw);

// Time the hierarchical all-reduce of `bytes` per member would take on the real
// machine, for a group of `members_per_slice` members in each of `slices` slices:
//   ModeledRingAllReduceSeconds(bytes, members_per_slice, hw)      (the ICI reduce-scatter
//                                                                   and all-gather in a slice)
//   + 2(S-1)/S * (bytes / n) / dcn_share + 2(S-1) * dcn_latency_us  (the DCN ring over one shard)
// with n = members_per_slice, S = slices, and dcn_share = dcn_gbps_per_host * 1e9 / 8 /
// members_per_host bytes/s. Every member of a slice all-reduces its shard across slices
// at the same time, so the `members_per_host` members on one host (of every group that
// sums at once) share that host's DCN bandwidth equally; with one member per chip that
// is the host's share per chip. HardwareFigures holds no chip or core count per host,
// so the caller passes it (cores per host / cores per replica for a data-parallel
// run). Assumes the DCN ring's hops run at that share in both directions at once (each
// host sends and receives its shards concurrently), that the DCN phase does not overlap
// the ICI phases (XLA runs them in sequence), and that a ring step costs one one-way
// DCN latency; it ignores switch contention beyond the host's own links and ICI
// latency. 0 for one member in one slice. Throws Error when an argument is < 1, when
// slices > 1 and hw.dcn_gbps_per_host is not positive or hw.dcn_latency_us negative,
// or as ModeledRingAllReduceSeconds does.
double ModeledHierarchicalAllReduceSeconds(size_t bytes, int members_per_slice, int slices, const HardwareFigures& hw,
                                           int members_per_host);

}  // namespace tpusim::cluster
