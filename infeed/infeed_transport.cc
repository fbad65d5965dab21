// RunHostInfeed (infeed_transport.h): a host rank either builds and sends
// (internal/host_sender.cc) or relays (internal/host_relay.cc); the core's side is
// core_infeed_queue.cc.
#include "infeed/infeed_transport.h"

#include "infeed/internal/host_relay.h"
#include "infeed/internal/host_sender.h"

namespace tpusim::infeed {

HostFeedStats RunHostInfeed(const InfeedPlan& plan, const cluster::RankLayout& layout, const cluster::Transport& world,
                            int host, const TransportOptions& options, const BatchFiller& fill) {
  if (const HostPlan* hp = plan.host_plan(host)) {
    return internal::RunHostSender(plan, layout, world, *hp, options, fill);
  }
  return internal::RunHostRelay(plan, layout, world, host, options);
}

}  // namespace tpusim::infeed
