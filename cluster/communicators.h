// The communicators a run needs, split once from MPI_COMM_WORLD after every rank
// knows its role: each host with its cores, all cores, the cores of one replica,
// and for CRS the cores that share a logical core across replicas (infeed.md §6).
#pragma once

#include "cluster/communicator.h"
#include "cluster/rank_layout.h"

namespace tpusim::cluster {

struct Communicators {
  Communicator world;
  Communicator host_group;    // host rank first, then its cores by ordinal
  Communicator cores;         // every core rank, ordered by world rank
  Communicator replica;       // cores of my replica, ordered by logical core
  Communicator logical_core;  // cores with my logical core, ordered by replica id

  // Collective over MPI_COMM_WORLD; every rank must call it with its own role.
  static Communicators Create(const RankRole& role);
};

}  // namespace tpusim::cluster
