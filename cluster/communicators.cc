#include "cluster/communicators.h"

namespace tpusim::cluster {

Communicators Communicators::Create(const RankRole& role, std::unique_ptr<Transport> world) {
  Communicators c;
  c.world = std::move(world);
  c.host_group = c.world->Split(role.host, role.rank);
  c.cores = c.world->Split(role.is_core() ? 0 : -1, role.rank);
  bool in_replica = role.is_core() && role.in_replica();
  c.replica = c.world->Split(in_replica ? role.replica : -1, role.logical_core);
  c.logical_core = c.world->Split(in_replica ? role.logical_core : -1, role.replica);
  return c;
}

}  // namespace tpusim::cluster
