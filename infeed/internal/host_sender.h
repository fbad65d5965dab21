// The enqueue loop of an infeed host that builds batches (infeed_transport.h).
#pragma once

#include "cluster/rank_layout.h"
#include "cluster/transport.h"
#include "infeed/infeed_plan.h"
#include "infeed/infeed_transport.h"

namespace tpusim::infeed::internal {

// Runs the enqueue loop of infeed host `host` (one that builds batches) until
// every step is sent and every credit is back. Throws tpusim::Error when a step fails.
HostFeedStats RunHostSender(const InfeedPlan& plan, const cluster::RankLayout& layout, const cluster::Transport& world,
                            const HostPlan& host, const TransportOptions& options, const BatchFiller& fill);

}  // namespace tpusim::infeed::internal
