#include "sim/core/embedding_layer.h"

#include <chrono>

#include "base/clock.h"
#include "base/error.h"

namespace tpusim::sim::core {
namespace {

using embedding::RowMatrix;

// A feature's activations [rows * L, dim] seen as one model row per example
// [rows, L * dim]: row-major storage makes that a reshape, not a copy.
Eigen::Map<const RowMatrix> PerExample(const RowMatrix& rows_by_dim, int64_t examples, int64_t width) {
  return Eigen::Map<const RowMatrix>(rows_by_dim.data(), examples, width);
}

}  // namespace

EmbeddingLayer::EmbeddingLayer(const embedding::EmbeddingConfig& config, const cluster::Transport& cores)
    : config_(config),
      engine_(config_, cores),
      width_(embedding::EmbeddingWidth(config_)),
      grads_(config_.features.size()) {}

void EmbeddingLayer::Forward(std::span<const embedding::CooPiece> pieces, Eigen::MatrixXf& inputs, int64_t first_col) {
  MonotonicTime start = MonotonicNow();
  const int64_t rows = inputs.rows();
  for (size_t f = 0; f < pieces.size(); ++f) {
    if (pieces[f].rows != rows) {
      Fail("embedding.features.{}: {} rows of ids for {} dense rows", config_.features[f].name, pieces[f].rows, rows);
    }
  }
  const std::vector<RowMatrix>& acts = engine_.Forward(pieces);
  int64_t col = first_col;
  for (size_t f = 0; f < acts.size(); ++f) {
    int64_t width = embedding::FeatureWidth(config_, f);
    inputs.middleCols(col, width) = PerExample(acts[f], rows, width);
    col += width;
  }
  log_.forward_s = SecondsSince(start);
  log_.engine = engine_.stats();
}

bool EmbeddingLayer::Backward(const Eigen::MatrixXf& input_grad, int64_t first_col) {
  MonotonicTime start = MonotonicNow();
  const int64_t rows = input_grad.rows();
  int64_t col = first_col;
  for (size_t f = 0; f < grads_.size(); ++f) {
    int64_t width = embedding::FeatureWidth(config_, f);
    int64_t dim = config_.tables[embedding::TableIndex(config_, config_.features[f].table)].dim;
    grads_[f].resize(rows * width / dim, dim);
    Eigen::Map<RowMatrix>(grads_[f].data(), rows, width) = input_grad.middleCols(col, width);
    col += width;
  }
  const bool updated = engine_.Backward(grads_);
  log_.backward_s = SecondsSince(start);
  log_.engine = engine_.stats();
  return updated;
}

}  // namespace tpusim::sim::core
