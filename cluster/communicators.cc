#include "cluster/communicators.h"

namespace tpusim::cluster {

Communicators Communicators::Create(const RankRole& role) {
  Communicators c;
  c.world = Communicator::World();
  c.host_group = c.world.SplitComm(role.host, role.rank);
  c.cores = c.world.SplitComm(role.is_core() ? 0 : -1, role.rank);
  bool in_replica = role.is_core() && role.in_replica();
  c.replica = c.world.SplitComm(in_replica ? role.replica : -1, role.logical_core);
  c.logical_core = c.world.SplitComm(in_replica ? role.logical_core : -1, role.replica);
  return c;
}

}  // namespace tpusim::cluster
