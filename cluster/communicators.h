// The transports every rank of a run uses, split from one world (docs/design.md §2):
// MPI's world in the ranks layout, a group spanning processes in the threads and
// packed layouts. Only their implementation differs; the members and order are
// the same in every layout.
#pragma once

#include <memory>

#include "cluster/rank_layout.h"
#include "cluster/transport.h"

namespace tpusim::cluster {

struct Communicators {
  std::unique_ptr<Transport> world;
  std::unique_ptr<Transport> host_group;    // host rank first, then its cores by ordinal
  std::unique_ptr<Transport> cores;         // every core rank, ordered by world rank
  std::unique_ptr<Transport> replica;       // cores of my replica, ordered by logical core
  std::unique_ptr<Transport> logical_core;  // cores with my logical core, ordered by replica id

  // Collective over `world`; every member must call it with its own role.
  static Communicators Create(const RankRole& role, std::unique_ptr<Transport> world);
};

}  // namespace tpusim::cluster
