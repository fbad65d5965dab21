// Where the source tree keeps the topologies tpusim ships (configs/topologies).
#pragma once

#include <string>

#include "source_dir.h"

namespace tpusim::testing {

inline const std::string kTopologyDir = TPUSIM_SOURCE_DIR "/configs/topologies";

}  // namespace tpusim::testing
