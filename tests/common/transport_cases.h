// Test bodies written once against cluster::Transport and run over both
// implementations: every member of an in-process group on its own thread
// (tests/cluster/transport_test.cc, suite unit) and every rank of MPI_COMM_WORLD
// under mpirun (tests/mpi/transport_cases_test.cc, suite mpi). Each body is what
// one member does; it reports through GoogleTest assertions (thread-safe) and
// throws Error on transport failures.
#pragma once

#include <string>

#include "cluster/transport.h"

namespace tpusim::testing_cases {

// Tag matching and ordering: messages with one (source, tag) arrive in send
// order whatever tags are received first; probes see size, source and tag;
// blocks gather and scatter. Needs >= 2 members.
void TagMatchingAndOrder(const cluster::Transport& t);

// Collectives: allreduce, gather, broadcast, allgather and split.
void Collectives(const cluster::Transport& t);

// cross_replica_sum over every member as a replica: the default group, even/odd
// groups, ring and allreduce agreeing bit for bit on exact values, timing folds.
void CrossReplicaSum(const cluster::Transport& t);

// Ragged all-to-all: member p sends p + q + 1 bytes to member q, each naming both.
void AllToAll(const cluster::Transport& t);

// The infeed credit protocol on `topology` (members = its ranks, host ranks and
// core ranks as RankLayout places them): every host sends its shards under
// credits, every core dequeues and checks each row's bytes against its example
// id, and while a core holds a step no shard beyond its queue depth is on its
// way. `per_host` false sends through single-host mode (relayed by the other
// hosts); `feature_floats` >= 16384 makes a piece travel as its own message. Every
// host that builds batches allocates its packages once, before the first step: as
// many as it can hold at once (prefetch + queue depth + 1), or one per step if fewer.
void InfeedCredits(const cluster::Transport& t, const std::string& topology, bool per_host, int64_t feature_floats,
                   int64_t num_steps = 12);

// The three infeed cases every transport runs, and how many members each plays:
// v4-8 per host with small shards, v4-8 with pieces that travel alone, and v4-32 in
// single-host mode (relayed by the other hosts).
inline constexpr int kV4_8Members = 5;
inline constexpr int kV4_32Members = 20;
void InfeedCreditsPerHost(const cluster::Transport& t);
void InfeedCreditsLargePieces(const cluster::Transport& t);
void InfeedCreditsPiecesOnDemand(const cluster::Transport& t);  // kV4_8Members, 4 MiB shards
void InfeedCreditsRelayed(const cluster::Transport& t);

// v4-8 per host (kV4_8Members): every host's input pipeline fails at step 2 on an
// enqueue worker; the host's RunHostInfeed throws that error (after sending the
// steps before it, which its cores take), instead of hanging or losing it.
void InfeedWorkerFailure(const cluster::Transport& t);

}  // namespace tpusim::testing_cases
