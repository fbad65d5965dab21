#include "sim/run_setup.h"

#include "sim/wire/embedding_trailer.h"

namespace tpusim::sim {

infeed::TransportOptions RunTransportOptions(const RunSetup& run) {
  const RunConfig& config = run.ctx.config;
  infeed::TransportOptions t;
  t.parallelism = config.infeed.parallelism;
  t.queue_depth = config.infeed.queue_depth;
  t.num_steps = run.loops.infeed_steps;
  t.origin_s = run.origin_s;
  t.watchdog = run.watchdog;
  t.sleep_when_idle = run.ctx.slice.layout.hosts_per_process() > 0;
  if (config.embedding.enabled()) {
    t.trailer_capacity = [&embedding = config.embedding.config](const infeed::ShardRoute& route) {
      return TrailerCapacity(embedding, route);
    };
  }
  return t;
}

}  // namespace tpusim::sim
