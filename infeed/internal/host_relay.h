// Single-host mode on a host that builds nothing: it relays shards from the infeed
// host to its own cores and the cores' credits back (infeed_transport.h).
#pragma once

#include "cluster/rank_layout.h"
#include "cluster/transport.h"
#include "infeed/infeed_plan.h"
#include "infeed/infeed_transport.h"

namespace tpusim::infeed::internal {

// Relays for host `host` until every shard and credit of the run has passed.
// Throws tpusim::Error on a message it cannot place.
HostFeedStats RunHostRelay(const InfeedPlan& plan, const cluster::RankLayout& layout, const cluster::Transport& world,
                           int host, const TransportOptions& options);

}  // namespace tpusim::infeed::internal
