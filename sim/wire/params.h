// --params-out's message, core to rank 0: every array replica 0's core writes
// (sim/core/params_out.h), as a JSON index of name, shape and offset followed by
// the float32 values, in one message; rank 0 writes each as DIR/NAME.npy.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "cluster/transport.h"

namespace tpusim::sim::wire {

// One array --params-out writes as DIR/<name>.npy (float32, C order); a name
// with slashes makes folders ("slots/dense_0/w/accumulator").
struct NamedArray {
  std::string name;
  std::vector<int64_t> shape;
  std::span<const float> values;
};

// The sending core: `arrays`, in one message to world rank `rank`.
void SendParams(const cluster::Transport& world, int rank, const std::vector<NamedArray>& arrays);

// Rank 0: receives them from world rank `source` and writes DIR/NAME.npy
// atomically (base/npy.h), making folders for names with slashes. Throws Error
// naming the path on a write failure.
void ReceiveParams(const cluster::Transport& world, int source, const std::string& dir);

}  // namespace tpusim::sim::wire
