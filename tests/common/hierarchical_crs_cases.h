// Test bodies for the hierarchical cross_replica_sum (slices > 1), written once
// against cluster::Transport like transport_cases.h: every member of `t` is one
// replica (replica id = its rank) of one logical core, and each body is what one
// member does. They run over the in-process transport (tests/cluster/transport_test.cc)
// and over MPI ranks (tests/mpi/cross_replica_sum_test.cc, transport_cases_test.cc).
#pragma once

#include "cluster/transport.h"

namespace tpusim::testing_cases {

// For every slice count S > 1 dividing the member count and every assignment that
// suits it (the default group, one member per slice, groups inside one slice,
// groups of the even and of the odd replicas in descending row order, groups
// spanning some of the slices, a group inside one slice beside groups spanning
// two): float, double and int32 sums of sizes 0, 1, below
// and above the group's size and not divisible by it, each against the flat ring
// (float within 1e-5 relative, double within 1e-12, int32 exact) and against the sum
// of every member's input; identical bits on every member of the group; and the
// phase figures (dcn_bytes over the group = 2(S'-1) x the bytes summed, S' the
// slices the group reaches). Nothing to check for one member.
void HierarchicalCrossReplicaSum(const cluster::Transport& t);

// Every member throws Error, before any message, for slices that do not divide the
// members (0, members + 1) and, with 3 or more replicas per slice, for groups with
// unequal members per slice.
void HierarchicalCrossReplicaSumErrors(const cluster::Transport& t);

}  // namespace tpusim::testing_cases
