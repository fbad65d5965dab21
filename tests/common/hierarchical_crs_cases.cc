#include "tests/common/hierarchical_crs_cases.h"

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/error.h"
#include "cluster/cross_replica_sum.h"
#include "tests/common/error_of.h"

namespace tpusim::testing_cases {
namespace {

using cluster::CrossReplicaSumOptions;
using cluster::GroupAssignment;
using cluster::Transport;
using ::testing::HasSubstr;

// The assignments a hierarchical sum over `slices` slices of `n` replicas is
// checked with; every one is valid for ValidateSlices.
std::vector<GroupAssignment> Assignments(int n, int slices) {
  const int m = n / slices;  // replicas per slice
  std::vector<GroupAssignment> all{{}};
  GroupAssignment by_position(static_cast<size_t>(m)), by_slice(static_cast<size_t>(slices));
  for (int r = 0; r < n; ++r) {
    by_position[static_cast<size_t>(r % m)].push_back(r);  // one member per slice
    by_slice[static_cast<size_t>(r / m)].push_back(r);     // each group inside one slice
  }
  if (m > 1) all.push_back(by_position);
  all.push_back(by_slice);
  if (m % 2 == 0) {  // even and odd replicas, row order against id order
    GroupAssignment parity(2);
    for (int r = n - 1; r >= 0; --r) parity[static_cast<size_t>(r % 2)].push_back(r);
    all.push_back(parity);
  }
  if (slices % 2 == 0 && slices > 2) {  // groups of two slices each
    GroupAssignment pairs(static_cast<size_t>(slices / 2));
    for (int r = 0; r < n; ++r) pairs[static_cast<size_t>(r / (2 * m))].push_back(r);
    all.push_back(pairs);
  }
  if (m == 2 && slices >= 3) {  // a group inside slice 0 beside groups of one member per slice
    GroupAssignment mixed{{0, 1}, {2, 4}, {3, 5}};
    for (int k = 3; k < slices; ++k) mixed.push_back({2 * k, 2 * k + 1});
    all.push_back(mixed);
  }
  return all;
}

template <typename T>
std::vector<T> RandomValues(size_t count, int seed) {
  std::mt19937 engine(static_cast<unsigned>(977 * seed + 13));
  std::vector<T> values(count);
  for (T& v : values) {
    if constexpr (std::is_integral_v<T>) {
      v = static_cast<T>(engine());  // wraps when summed
    } else {
      v = std::uniform_real_distribution<T>(0, 1)(engine);
    }
  }
  return values;
}

// Every member's `mine` (the same size everywhere), member-major.
template <typename T>
std::vector<T> AllgatherValues(const Transport& t, const std::vector<T>& mine) {
  std::vector<std::byte> bytes = t.Allgather(std::as_bytes(std::span<const T>(mine)));
  std::vector<T> all(mine.size() * static_cast<size_t>(t.size()));
  if (!bytes.empty()) std::memcpy(all.data(), bytes.data(), bytes.size());
  return all;
}

// The sum over the group's members of their inputs, added in double (int32 wrapping).
template <typename T>
std::vector<double> ReferenceSum(const std::vector<T>& all_inputs, const std::vector<int>& members, size_t count) {
  std::vector<double> sum(count, 0.0);
  std::vector<uint32_t> wrapped(count, 0);
  for (int q : members) {
    for (size_t i = 0; i < count; ++i) {
      const T v = all_inputs[static_cast<size_t>(q) * count + i];
      sum[i] += static_cast<double>(v);
      if constexpr (std::is_integral_v<T>) wrapped[i] += static_cast<uint32_t>(v);
    }
  }
  if constexpr (std::is_integral_v<T>) {
    for (size_t i = 0; i < count; ++i) sum[i] = static_cast<int32_t>(wrapped[i]);
  }
  return sum;
}

// The elements of `got` farther from `want` than `tolerance` relative, at most the
// first few named in `where`. No ASSERT: a member that left a body early would leave
// its peers waiting in the next collective.
template <typename T, typename U>
int CountFar(const std::vector<T>& got, const std::vector<U>& want, double tolerance, std::string& where) {
  int far = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = static_cast<double>(got[i]), w = static_cast<double>(want[i]);
    if (std::abs(g - w) <= tolerance * std::abs(w)) continue;
    if (far++ < 3) where += " [" + std::to_string(i) + "] " + std::to_string(g) + " vs " + std::to_string(w);
  }
  return far;
}

// One sum of `count` values: the hierarchical result against the flat ring's and
// the reference, and bit for bit against every other member of the group.
template <typename T>
void CheckOneSum(const Transport& t, cluster::CrossReplicaSum& flat, cluster::CrossReplicaSum& hierarchical,
                 size_t count) {
  const std::vector<T> input = RandomValues<T>(count, t.rank() * 7919 + static_cast<int>(count));
  std::vector<T> a = input, b = input;
  flat.Sum(std::span<T>(a));
  hierarchical.Sum(std::span<T>(b));
  const std::vector<double> reference = ReferenceSum(AllgatherValues(t, input), hierarchical.group_members(), count);
  const double tolerance = std::is_same_v<T, float> ? 1e-5 : (std::is_same_v<T, double> ? 1e-12 : 0.0);
  std::string where;
  EXPECT_EQ(CountFar(b, a, tolerance, where), 0) << "against the flat ring, " << count << " elements:" << where;
  where.clear();
  EXPECT_EQ(CountFar(b, reference, tolerance, where), 0) << "against the reference, " << count << " elements:" << where;
  const std::vector<T> results = AllgatherValues(t, b);
  for (int q : hierarchical.group_members()) {
    EXPECT_EQ(0, std::memcmp(results.data() + static_cast<size_t>(q) * count, b.data(), count * sizeof(T)))
        << "member " << q << " of the group ended with other bits; " << count << " elements";
  }
}

// The phases: the members of one group together send 2(S'-1) x the bytes summed
// across slices (each cross-slice ring moves its shard 2(S'-1)/S' times per member);
// the flat sum reports none.
void CheckPhases(const Transport& t, cluster::CrossReplicaSum& flat, cluster::CrossReplicaSum& hierarchical) {
  const cluster::CrsTimingSummary h = hierarchical.Summarize();
  const cluster::CrsTimingSummary f = flat.Summarize();
  EXPECT_EQ(f.dcn_bytes, 0);
  EXPECT_EQ(f.reduce_scatter_seconds + f.cross_slice_all_reduce_seconds + f.all_gather_seconds, 0.0);
  const std::vector<int64_t> dcn = AllgatherValues(t, std::vector<int64_t>{h.dcn_bytes});
  int64_t group_dcn = 0;
  for (int q : hierarchical.group_members()) group_dcn += dcn[static_cast<size_t>(q)];
  const int reached = hierarchical.group_slices();
  EXPECT_EQ(group_dcn, 2 * (reached - 1) * h.bytes) << "slices reached " << reached;
  if (hierarchical.group_size() > 1) {
    EXPECT_GT(h.reduce_scatter_seconds + h.cross_slice_all_reduce_seconds, 0.0);
  }
  EXPECT_LE(h.reduce_scatter_seconds + h.cross_slice_all_reduce_seconds + h.all_gather_seconds, h.total_seconds);
}

void CheckAssignment(const Transport& t, int slices, const GroupAssignment& groups) {
  SCOPED_TRACE(::testing::Message() << slices << " slices, group_assignment of " << groups.size() << " groups");
  CrossReplicaSumOptions options;
  options.group_assignment = groups;
  options.ring_chunk_bytes = 256;  // several chunks per segment at 1001 elements
  cluster::CrossReplicaSum flat(t, t.rank(), options);
  options.slices = slices;
  cluster::CrossReplicaSum hierarchical(t, t.rank(), options);
  const int members = hierarchical.group_size();
  EXPECT_EQ(hierarchical.slice_index(), t.rank() / (t.size() / slices));
  EXPECT_EQ(hierarchical.members_per_slice() * hierarchical.group_slices(), members);
  for (size_t count :
       {size_t{0}, size_t{1}, static_cast<size_t>(members - 1), static_cast<size_t>(members + 1), size_t{1001}}) {
    CheckOneSum<float>(t, flat, hierarchical, count);
    CheckOneSum<double>(t, flat, hierarchical, count);
    CheckOneSum<int32_t>(t, flat, hierarchical, count);
  }
  CheckPhases(t, flat, hierarchical);
}

}  // namespace

void HierarchicalCrossReplicaSum(const Transport& t) {
  const int n = t.size();
  for (int slices = 2; slices <= n; ++slices) {
    if (n % slices != 0) continue;
    for (const GroupAssignment& groups : Assignments(n, slices)) CheckAssignment(t, slices, groups);
  }
}

void HierarchicalCrossReplicaSumErrors(const Transport& t) {
  using tpusim::testing::ErrorOf;
  const int n = t.size();
  auto construct = [&t](int slices, GroupAssignment groups) {
    return [&t, slices, groups] {
      CrossReplicaSumOptions options;
      options.slices = slices;
      options.group_assignment = groups;
      cluster::CrossReplicaSum crs(t, t.rank(), options);
    };
  };
  const std::string replicas = std::to_string(n) + " replicas";
  EXPECT_THAT(ErrorOf(construct(n + 1, {})), HasSubstr("slices = " + std::to_string(n + 1)));
  EXPECT_THAT(ErrorOf(construct(n + 1, {})), HasSubstr(replicas));
  EXPECT_THAT(ErrorOf(construct(0, {})), HasSubstr("slices = 0"));
  if (n % 2 != 0 || n / 2 < 3) return;
  // Two slices of m >= 3: replicas m-1 and m trade groups, so group 0 holds m-1
  // replicas of slice 0 and one of slice 1.
  const int m = n / 2;
  GroupAssignment groups(2);
  for (int r = 0; r < n; ++r) groups[static_cast<size_t>((r / m) ^ (r == m - 1 || r == m ? 1 : 0))].push_back(r);
  const std::string message = ErrorOf(construct(2, groups));
  EXPECT_THAT(message, HasSubstr("group 0 has 1 replicas in slice 1 but " + std::to_string(m - 1)));
  EXPECT_THAT(message, HasSubstr("group_assignment [["));
  // The same assignment is fine for one slice.
  EXPECT_NO_THROW(construct(1, groups)());
}

}  // namespace tpusim::testing_cases
