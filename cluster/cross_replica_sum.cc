#include "cluster/cross_replica_sum.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <numeric>
#include <string>
#include <type_traits>
#include <utility>

#include "base/clock.h"
#include "base/error.h"

namespace tpusim::cluster {
namespace {

constexpr int kReduceScatterTag = 1;
constexpr int kAllGatherTag = 2;

// "[[0,2],[1,3]]": the assignment as the user wrote it, for error messages.
std::string FormatGroups(const GroupAssignment& groups) {
  std::string text = "[";
  for (size_t g = 0; g < groups.size(); ++g) {
    text += g ? ",[" : "[";
    for (size_t i = 0; i < groups[g].size(); ++i) {
      text += (i ? "," : "") + std::to_string(groups[g][i]);
    }
    text += "]";
  }
  return text + "]";
}

GroupAssignment AllReplicas(int num_replicas) {
  std::vector<int> row(static_cast<size_t>(num_replicas));
  std::iota(row.begin(), row.end(), 0);
  return {std::move(row)};
}

// The bytes of elements [begin, end) of `data`.
template <typename T>
std::span<std::byte> Bytes(T* data, size_t begin, size_t end) {
  return std::as_writable_bytes(std::span<T>(data + begin, end - begin));
}

// acc += in, element-wise; the buffers never overlap. Fixed-length blocks let
// GCC vectorise at -O2 (its cheap cost model skips loops that would need a scalar
// epilogue or a runtime alias check); element-wise adds stay bitwise the same.
// int32 goes through uint32 so overflow wraps (as XLA's s32 add does) instead of
// being undefined behaviour.
template <typename T>
T WrappingAdd(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}

template <typename T>
void AddInto(T* __restrict acc, const T* __restrict in, size_t count) {
  constexpr size_t kBlock = 16;
  size_t i = 0;
  for (; i + kBlock <= count; i += kBlock) {
    for (size_t j = 0; j < kBlock; ++j) acc[i + j] = WrappingAdd(acc[i + j], in[i + j]);
  }
  for (; i < count; ++i) acc[i] = WrappingAdd(acc[i], in[i]);
}

int CheckedCount(size_t elements) {
  if (elements > static_cast<size_t>(INT_MAX)) {
    Fail("CrossReplicaSum::Sum: {} elements exceed MPI's int count limit {}", elements, INT_MAX);
  }
  return static_cast<int>(elements);
}

int PositiveMod(int value, int n) { return ((value % n) + n) % n; }

// The n + 1 element offsets cutting `size` elements into n ring segments as evenly
// as integers allow (a segment may be empty when size < n).
void SegmentOffsets(size_t size, int n, std::vector<size_t>& offsets) {
  offsets.resize(static_cast<size_t>(n) + 1);
  for (int s = 0; s <= n; ++s) offsets[static_cast<size_t>(s)] = size * static_cast<size_t>(s) / n;
}

// Every member's replica id, gathered so each member checks the same list and all
// of them throw together when it is wrong.
void CheckReplicaIds(const Transport& comm, int replica_id) {
  const int32_t mine = replica_id;
  std::vector<std::byte> gathered = comm.Allgather(std::as_bytes(std::span<const int32_t>(&mine, 1)));
  std::vector<int32_t> ids(static_cast<size_t>(comm.size()));
  std::memcpy(ids.data(), gathered.data(), gathered.size());
  std::vector<int> seen(ids.size(), 0);
  for (size_t rank = 0; rank < ids.size(); ++rank) {
    int id = ids[rank];
    if (id < 0 || id >= comm.size() || seen[static_cast<size_t>(id)]++) {
      Fail(
          "CrossReplicaSum: member {} of the logical-core communicator has replica id {}; "
          "the {} members must hold each replica id 0..{} exactly once",
          rank, id, comm.size(), comm.size() - 1);
    }
  }
}

}  // namespace

void ValidateGroupAssignment(const GroupAssignment& groups, int num_replicas) {
  const std::string text = FormatGroups(groups);
  std::vector<int> group_of(static_cast<size_t>(num_replicas), -1);
  for (size_t g = 0; g < groups.size(); ++g) {
    if (groups[g].empty()) Fail("group_assignment {}: group {} is empty", text, g);
    if (groups[g].size() != groups[0].size()) {
      Fail(
          "group_assignment {}: group {} has {} replicas but group 0 has {}; "
          "all groups must have the same size",
          text, g, groups[g].size(), groups[0].size());
    }
    for (size_t i = 0; i < groups[g].size(); ++i) {
      int id = groups[g][i];
      if (id < 0 || id >= num_replicas) {
        Fail("group_assignment {}: group_assignment[{}][{}] = {} is out of range [0, {})", text, g, i, id,
             num_replicas);
      }
      int& owner = group_of[static_cast<size_t>(id)];
      if (owner >= 0) {
        Fail("group_assignment {}: replica id {} appears more than once (groups {} and {})", text, id, owner, g);
      }
      owner = static_cast<int>(g);
    }
  }
  for (int id = 0; id < num_replicas && !groups.empty(); ++id) {
    if (group_of[static_cast<size_t>(id)] < 0) {
      Fail(
          "group_assignment {}: replica id {} is in no group; each of the {} replicas must "
          "appear exactly once",
          text, id, num_replicas);
    }
  }
}

void ValidateSlices(const GroupAssignment& groups, int num_replicas, int slices) {
  if (slices < 1 || num_replicas % slices != 0) {
    Fail("CrossReplicaSum: slices = {} must be at least 1 and divide the {} replicas", slices, num_replicas);
  }
  const GroupAssignment all = groups.empty() ? AllReplicas(num_replicas) : GroupAssignment{};
  const GroupAssignment& rows = groups.empty() ? all : groups;
  const int replicas_per_slice = num_replicas / slices;
  for (size_t g = 0; g < rows.size(); ++g) {
    std::vector<int> in_slice(static_cast<size_t>(slices), 0);
    for (int id : rows[g]) ++in_slice[static_cast<size_t>(id / replicas_per_slice)];
    const int most = *std::max_element(in_slice.begin(), in_slice.end());
    for (int k = 0; k < slices; ++k) {
      const int count = in_slice[static_cast<size_t>(k)];
      if (count == 0 || count == most) continue;
      Fail(
          "group_assignment {}: group {} has {} replicas in slice {} but {} in another; a group must have "
          "the same number of replicas in every slice it reaches ({} slices of {} replicas)",
          FormatGroups(rows), g, count, k, most, slices, replicas_per_slice);
    }
  }
}

CrossReplicaSum::CrossReplicaSum(const Transport& logical_core, int replica_id, CrossReplicaSumOptions options)
    : options_(std::move(options)) {
  if (!logical_core.valid()) {
    Fail(
        "CrossReplicaSum: this rank has no logical-core communicator (a host rank or a core "
        "outside every replica)");
  }
  if (options_.ring_chunk_bytes == 0) Fail("CrossReplicaSum: ring_chunk_bytes must be positive");
  ValidateGroupAssignment(options_.group_assignment, logical_core.size());
  ValidateSlices(options_.group_assignment, logical_core.size(), options_.slices);
  CheckReplicaIds(logical_core, replica_id);
  if (options_.group_assignment.empty()) {
    options_.group_assignment = AllReplicas(logical_core.size());
  }
  int position = 0;
  for (size_t g = 0; g < options_.group_assignment.size(); ++g) {
    const std::vector<int>& row = options_.group_assignment[g];
    for (size_t i = 0; i < row.size(); ++i) {
      if (row[i] != replica_id) continue;
      group_index_ = static_cast<int>(g);
      position = static_cast<int>(i);
    }
  }
  members_ = options_.group_assignment[static_cast<size_t>(group_index_)];
  // The group's rank order is the row order, so ring positions follow the row.
  group_ = logical_core.Split(group_index_, position);
  if (options_.slices > 1) MakeSliceRings(logical_core, replica_id, position);
  // Reserved up front so ordinary runs never reallocate the log inside Sum.
  durations_seconds_.reserve(4096);
}

// Two more splits of the logical core, made by every member: colors g * S + slice
// (the group's members in one slice, in row order) and g * group_size + i (the i-th
// of the group's members in each slice, in slice order). Groups may reach different
// numbers of slices, so i is spaced by the group size, which no i reaches.
void CrossReplicaSum::MakeSliceRings(const Transport& logical_core, int replica_id, int position) {
  const int slices = options_.slices;
  const int replicas_per_slice = logical_core.size() / slices;
  slice_index_ = replica_id / replicas_per_slice;
  std::vector<int> in_slice(static_cast<size_t>(slices), 0);
  int index_in_slice = 0;
  for (size_t i = 0; i < members_.size(); ++i) {
    const int slice = members_[i] / replicas_per_slice;
    if (slice == slice_index_ && static_cast<int>(i) < position) ++index_in_slice;
    ++in_slice[static_cast<size_t>(slice)];
  }
  group_slices_ = static_cast<int>(std::count_if(in_slice.begin(), in_slice.end(), [](int c) { return c > 0; }));
  slice_ring_ = logical_core.Split(group_index_ * slices + slice_index_, position);
  cross_slice_ring_ = logical_core.Split(group_index_ * group_size() + index_in_slice, slice_index_);
}

void CrossReplicaSum::Sum(std::span<float> data) { SumTimed(data); }
void CrossReplicaSum::Sum(std::span<double> data) { SumTimed(data); }
void CrossReplicaSum::Sum(std::span<int32_t> data) { SumTimed(data); }

template <typename T>
void CrossReplicaSum::SumTimed(std::span<T> data) {
  CheckedCount(data.size());
  const MonotonicTime start = MonotonicNow();
  if (group_->size() > 1) {
    if (options_.algorithm == CrsAlgorithm::kMpi) {
      group_->AllreduceInPlace(data, ReduceOp::kSum);
    } else if (slice_ring_) {
      HierarchicalSum(data);
    } else {
      SegmentOffsets(data.size(), group_->size(), segment_offsets_);
      ReduceScatter(*group_, data, segment_offsets_);
      AllGather(*group_, data, segment_offsets_);
    }
  }
  durations_seconds_.push_back(SecondsSince(start));
  bytes_summed_ += static_cast<int64_t>(data.size_bytes());
}

// The flat ring's phases with the slice's members as the ring, and between them
// the ring all-reduce of this member's finished segment (its shard) across the
// slices. A member's shard is segment (p + 1) mod n of the slice ring, which is the
// same segment of the same offsets for every member at ring position p, since
// every slice cuts the same size into n segments: the cross-slice ring's members
// hold the same elements. That ring ends with identical bits on its members, and
// the all-gather copies the shards unchanged, so every member of every slice ends
// with the same bits. A group inside one slice has a cross-slice ring of one, so
// this is the flat ring over its members.
template <typename T>
void CrossReplicaSum::HierarchicalSum(std::span<T> data) {
  const Transport& slice = *slice_ring_;
  MonotonicTime start = MonotonicNow();
  SegmentOffsets(data.size(), slice.size(), segment_offsets_);
  ReduceScatter(slice, data, segment_offsets_);
  phases_.reduce_scatter_seconds += SecondsSince(start);

  start = MonotonicNow();
  const size_t own = static_cast<size_t>((slice.rank() + 1) % slice.size());
  std::span<T> shard = data.subspan(segment_offsets_[own], segment_offsets_[own + 1] - segment_offsets_[own]);
  SegmentOffsets(shard.size(), cross_slice_ring_->size(), shard_offsets_);
  size_t sent = ReduceScatter(*cross_slice_ring_, shard, shard_offsets_);
  sent += AllGather(*cross_slice_ring_, shard, shard_offsets_);
  phases_.dcn_bytes += static_cast<int64_t>(sent);
  phases_.cross_slice_all_reduce_seconds += SecondsSince(start);

  start = MonotonicNow();
  AllGather(slice, data, segment_offsets_);
  phases_.all_gather_seconds += SecondsSince(start);
}

// The classic ring over ring ranks 0..n-1. Reduce-scatter: at step k rank p
// passes its running partial of segment (p-k) mod n to p+1 and adds what p-1
// sends for segment (p-k-1) mod n to its own values. Segment s therefore becomes
// (((x_s + x_{s+1}) + x_{s+2}) + ... + x_{s-1}) (indices mod n) on rank s-1, an
// order fixed by ring position and independent of message timing; the all-gather
// then copies each finished segment unchanged to every rank, so every member ends
// with the same bits on every run. For the group's ring, ranks follow the row.
template <typename T>
size_t CrossReplicaSum::ReduceScatter(const Transport& ring, std::span<T> data, const std::vector<size_t>& offsets) {
  const int n = ring.size();
  const int p = ring.rank();
  size_t sent = 0;
  for (int k = 0; k < n - 1; ++k) {
    sent += ReduceScatterStep(ring, data, offsets, PositiveMod(p - k, n), PositiveMod(p - k - 1, n));
  }
  return sent;
}

// One reduce-scatter step, pipelined: every chunk's receive and send is posted at
// once and each chunk is added as soon as it lands, so additions overlap the
// transfer of later chunks.
template <typename T>
size_t CrossReplicaSum::ReduceScatterStep(const Transport& ring, std::span<T> data, const std::vector<size_t>& offsets,
                                          int send_segment, int recv_segment) {
  const int n = ring.size();
  const int next = (ring.rank() + 1) % n;
  const int prev = PositiveMod(ring.rank() - 1, n);
  const size_t chunk = std::max<size_t>(1, options_.ring_chunk_bytes / sizeof(T));
  const size_t send_begin = offsets[static_cast<size_t>(send_segment)];
  const size_t send_end = offsets[static_cast<size_t>(send_segment) + 1];
  const size_t recv_begin = offsets[static_cast<size_t>(recv_segment)];
  const size_t recv_end = offsets[static_cast<size_t>(recv_segment) + 1];
  T* incoming = reinterpret_cast<T*>(Scratch((recv_end - recv_begin) * sizeof(T)).data());
  requests_.clear();
  for (size_t at = recv_begin; at < recv_end; at += chunk) {
    requests_.push_back(ring.Irecv(Bytes(incoming, at - recv_begin, std::min(at + chunk, recv_end) - recv_begin), prev,
                                   kReduceScatterTag, "MPI_Irecv (ring reduce-scatter)"));
  }
  const size_t num_recvs = requests_.size();
  for (size_t at = send_begin; at < send_end; at += chunk) {
    requests_.push_back(ring.Isend(Bytes(data.data(), at, std::min(at + chunk, send_end)), next, kReduceScatterTag,
                                   "MPI_Isend (ring reduce-scatter)"));
  }
  for (size_t c = 0; c < num_recvs; ++c) {
    requests_[c].Wait();
    const size_t at = recv_begin + c * chunk;
    AddInto(data.data() + at, incoming + (at - recv_begin), std::min(chunk, recv_end - at));
  }
  for (size_t c = num_recvs; c < requests_.size(); ++c) requests_[c].Wait();
  return (send_end - send_begin) * sizeof(T);
}

// The all-gather: at step k rank p sends finished segment (p+1-k) mod n to its
// successor while the predecessor's segment (p-k) mod n lands directly in place
// (the two segments never overlap).
template <typename T>
size_t CrossReplicaSum::AllGather(const Transport& ring, std::span<T> data, const std::vector<size_t>& offsets) {
  const int n = ring.size();
  const int p = ring.rank();
  const int next = (p + 1) % n;
  const int prev = PositiveMod(p - 1, n);
  size_t sent = 0;
  for (int k = 0; k < n - 1; ++k) {
    const auto send = static_cast<size_t>(PositiveMod(p + 1 - k, n));
    const auto recv = static_cast<size_t>(PositiveMod(p - k, n));
    Request receive = ring.Irecv(Bytes(data.data(), offsets[recv], offsets[recv + 1]), prev, kAllGatherTag,
                                 "MPI_Irecv (ring all-gather)");
    Request sending = ring.Isend(Bytes(data.data(), offsets[send], offsets[send + 1]), next, kAllGatherTag,
                                 "MPI_Isend (ring all-gather)");
    receive.Wait();
    sending.Wait();
    sent += (offsets[send + 1] - offsets[send]) * sizeof(T);
  }
  return sent;
}

std::span<std::byte> CrossReplicaSum::Scratch(size_t bytes) {
  if (scratch_.size() < bytes) scratch_.resize(bytes);
  return {scratch_.data(), bytes};
}

std::vector<double> CrossReplicaSum::Fold() {
  const double calls = static_cast<double>(durations_seconds_.size());
  std::vector<double> call_range{calls, -calls};
  group_->AllreduceInPlace(std::span<double>(call_range), ReduceOp::kMin);
  if (call_range[0] != calls || -call_range[1] != calls) {
    Fail(
        "CrossReplicaSum::Fold: members of group {} made between {} and {} Sum calls; "
        "the min-duration method needs the same calls on every member",
        group_index_, call_range[0], -call_range[1]);
  }
  std::vector<double> fastest = durations_seconds_;
  group_->AllreduceInPlace(std::span<double>(fastest), ReduceOp::kMin);
  folded_.calls += static_cast<int64_t>(durations_seconds_.size());
  folded_.total_seconds += std::accumulate(durations_seconds_.begin(), durations_seconds_.end(), 0.0);
  folded_.compute_seconds += std::accumulate(fastest.begin(), fastest.end(), 0.0);
  durations_seconds_.clear();
  return fastest;
}

CrsTimingSummary CrossReplicaSum::Summarize() {
  Fold();
  CrsTimingSummary summary = folded_;
  summary.bytes = bytes_summed_;
  summary.reduce_scatter_seconds = phases_.reduce_scatter_seconds;
  summary.cross_slice_all_reduce_seconds = phases_.cross_slice_all_reduce_seconds;
  summary.all_gather_seconds = phases_.all_gather_seconds;
  summary.dcn_bytes = phases_.dcn_bytes;
  summary.sync_seconds = summary.total_seconds - summary.compute_seconds;
  if (summary.total_seconds > 0) {
    const double n = group_->size();
    summary.algbw_bytes_per_sec = static_cast<double>(summary.bytes) / summary.total_seconds;
    summary.busbw_bytes_per_sec = summary.algbw_bytes_per_sec * 2 * (n - 1) / n;
  }
  return summary;
}

void CrossReplicaSum::ResetTiming() {
  durations_seconds_.clear();
  bytes_summed_ = 0;
  phases_ = {};
  folded_ = {};
}

double ModeledRingAllReduceSeconds(size_t bytes, int group_size, const HardwareFigures& hw) {
  if (group_size < 1) Fail("ModeledRingAllReduceSeconds: group_size {} must be >= 1", group_size);
  if (group_size == 1) return 0;
  if (hw.ici_link_gbps <= 0) {
    Fail("ModeledRingAllReduceSeconds: hardware.ici_link_gbps = {} must be positive", hw.ici_link_gbps);
  }
  const double n = group_size;
  const double link_bytes_per_sec = hw.ici_link_gbps * 1e9 / 8;
  return 2 * (n - 1) / n * static_cast<double>(bytes) / link_bytes_per_sec;
}

double ModeledHierarchicalAllReduceSeconds(size_t bytes, int members_per_slice, int slices, const HardwareFigures& hw,
                                           int members_per_host) {
  if (members_per_slice < 1 || slices < 1 || members_per_host < 1) {
    Fail(
        "ModeledHierarchicalAllReduceSeconds: members_per_slice {}, slices {} and members_per_host {} must be "
        ">= 1",
        members_per_slice, slices, members_per_host);
  }
  const double ici_seconds = ModeledRingAllReduceSeconds(bytes, members_per_slice, hw);
  if (slices == 1) return ici_seconds;
  if (hw.dcn_gbps_per_host <= 0 || hw.dcn_latency_us < 0) {
    Fail(
        "ModeledHierarchicalAllReduceSeconds: hardware.dcn_gbps_per_host = {} must be positive and "
        "hardware.dcn_latency_us = {} not negative",
        hw.dcn_gbps_per_host, hw.dcn_latency_us);
  }
  const double s = slices;
  const double shard_bytes = static_cast<double>(bytes) / members_per_slice;
  const double share_bytes_per_sec = hw.dcn_gbps_per_host * 1e9 / 8 / members_per_host;
  return ici_seconds + 2 * (s - 1) / s * shard_bytes / share_bytes_per_sec + 2 * (s - 1) * hw.dcn_latency_us * 1e-6;
}

}  // namespace tpusim::cluster
