// The dense float matrix type of the embedding module: row-major, so one table row
// or one activation row is contiguous and can be copied to and from the wire as is.
#pragma once

#include <Eigen/Core>

namespace tpusim::embedding {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

}  // namespace tpusim::embedding
