#include "model/mlp.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "base/error.h"
#include "base/synthetic.h"

namespace tpusim::model {
namespace {

using RowMajorMatrixXf = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstWeights = Eigen::Map<const RowMajorMatrixXf>;
using Weights = Eigen::Map<RowMajorMatrixXf>;

// A [in, out] C-order weight variable viewed as a matrix.
ConstWeights WeightsOf(const Variable& w) { return ConstWeights(w.value.data(), w.spec.shape[0], w.spec.shape[1]); }

// out = in · W + b, one row per example.
void Affine(const Eigen::Ref<const Eigen::MatrixXf>& in, const Variable& w, const Variable& b, Eigen::MatrixXf& out) {
  out.resize(in.rows(), w.spec.shape[1]);
  out.noalias() = in * WeightsOf(w);
  out.rowwise() += b.value.matrix().transpose();
}

// Gradients of an affine layer's variables given dL/dout.
void AffineGrad(const Eigen::Ref<const Eigen::MatrixXf>& in, const Eigen::MatrixXf& d_out, Variable& w, Variable& b) {
  Weights dw(w.grad.data(), w.spec.shape[0], w.spec.shape[1]);
  dw.noalias() = in.transpose() * d_out;
  b.grad = d_out.colwise().sum().transpose().array();
}

// dL/din = dL/dout · Wᵀ.
void AffineInputGrad(const Eigen::MatrixXf& d_out, const Variable& w, Eigen::MatrixXf& d_in) {
  d_in.resize(d_out.rows(), w.spec.shape[0]);
  d_in.noalias() = d_out * WeightsOf(w).transpose();
}

// Overflow-free logistic function.
float Sigmoid(float x) {
  if (x >= 0.0f) return 1.0f / (1.0f + std::exp(-x));
  const float e = std::exp(x);
  return e / (1.0f + e);
}

// Sigmoid cross-entropy of logit x against label y, stable for large |x|
// (tf.nn.sigmoid_cross_entropy_with_logits).
double LogisticLoss(float x, float y) {
  const double xd = x;
  return std::max(xd, 0.0) - xd * y + std::log1p(std::exp(-std::abs(xd)));
}

double ExampleLoss(bool logistic, float pred, float label) {
  if (logistic) return LogisticLoss(pred, label);
  const double diff = static_cast<double>(pred) - label;
  return 0.5 * diff * diff;
}

// Mean over the rows; summed in double so the result does not depend on B's size
// through float rounding.
float MeanLoss(bool logistic, const Eigen::Ref<const Eigen::VectorXf>& pred,
               const Eigen::Ref<const Eigen::VectorXf>& labels) {
  if (pred.size() == 0) return 0.0f;
  double sum = 0.0;
  for (Eigen::Index i = 0; i < pred.size(); ++i) sum += ExampleLoss(logistic, pred[i], labels[i]);
  return static_cast<float>(sum / static_cast<double>(pred.size()));
}

// d(scale · mean loss)/d(pred) into dpred [B, 1].
void LossGrad(bool logistic, const Eigen::MatrixXf& pred, const Eigen::Ref<const Eigen::VectorXf>& labels, float scale,
              Eigen::MatrixXf& dpred) {
  dpred.resize(pred.rows(), 1);
  const float factor = scale / static_cast<float>(pred.rows());
  if (logistic) {
    dpred.col(0).array() =
        factor * (pred.col(0).array().unaryExpr([](float x) { return Sigmoid(x); }) - labels.array());
  } else {
    dpred.col(0).array() = factor * (pred.col(0).array() - labels.array());
  }
}

// Glorot-uniform: U(-limit, limit) with limit = sqrt(6 / (fan_in + fan_out)). Each
// element is a counter-based hash of (seed, name, index), so the values depend on
// neither construction order nor the platform's random library.
void GlorotInit(Variable& w, uint64_t seed) {
  const double fan_sum = static_cast<double>(w.spec.shape[0] + w.spec.shape[1]);
  const float limit = static_cast<float>(std::sqrt(6.0 / fan_sum));
  const uint64_t key = FeatureKey(w.spec.name);
  for (Eigen::Index i = 0; i < w.value.size(); ++i) {
    w.value[i] = limit * BitsToUnitFloat(SyntheticBits(seed, 0, key, i));
  }
}

}  // namespace

void ValidateModelConfig(const ModelConfig& config, std::string_view key_prefix) {
  for (size_t i = 0; i < config.hidden.size(); ++i) {
    if (config.hidden[i] < 1) {
      Fail("{}.hidden[{}]: {} must be >= 1", key_prefix, i, config.hidden[i]);
    }
  }
  if (config.loss != "mse" && config.loss != "logistic") {
    Fail("{}.loss: '{}' is not one of mse, logistic", key_prefix, config.loss);
  }
  if (!(config.bn_decay >= 0.0f && config.bn_decay <= 1.0f)) {
    Fail("{}.bn_decay: {} must be in [0, 1]", key_prefix, config.bn_decay);
  }
  if (!(config.bn_epsilon > 0.0f && std::isfinite(config.bn_epsilon))) {
    Fail("{}.bn_epsilon: {} must be finite and > 0", key_prefix, config.bn_epsilon);
  }
}

Mlp::Mlp(const ModelConfig& config, int input_width)
    : config_(config),
      input_width_(input_width),
      loss_(config.loss == "logistic" ? LossKind::kLogistic : LossKind::kMse) {
  ValidateModelConfig(config);
  if (input_width < 1) Fail("model input width: {} must be >= 1", input_width);
  int in = input_width;
  for (size_t l = 0; l < config.hidden.size(); ++l) {
    AddHidden(static_cast<int>(l), in, config.hidden[l]);
    in = config.hidden[l];
  }
  out_w_ = AddTrainable("out/w", {in, 1});
  out_b_ = AddTrainable("out/b", {1});
  GlorotInit(trainable_[out_w_], config.init_seed);
}

int Mlp::AddTrainable(const std::string& name, std::vector<int64_t> shape) {
  const int64_t n = optim::NumElements(shape);
  trainable_.push_back({{name, std::move(shape)}, Eigen::ArrayXf::Zero(n), Eigen::ArrayXf::Zero(n)});
  return static_cast<int>(trainable_.size()) - 1;
}

int Mlp::AddNonTrainable(const std::string& name, int width, float value) {
  non_trainable_.push_back({{name, {width}}, Eigen::ArrayXf::Constant(width, value), {}});
  return static_cast<int>(non_trainable_.size()) - 1;
}

void Mlp::AddHidden(int layer, int in, int out) {
  Hidden h;
  const std::string dense = fmt::format("dense_{}", layer);
  h.w = AddTrainable(dense + "/w", {in, out});
  h.b = AddTrainable(dense + "/b", {out});
  GlorotInit(trainable_[h.w], config_.init_seed);
  if (config_.batch_norm) {
    const std::string bn = fmt::format("bn_{}", layer);
    h.gamma = AddTrainable(bn + "/gamma", {out});
    h.beta = AddTrainable(bn + "/beta", {out});
    h.moving_mean = AddNonTrainable(bn + "/moving_mean", out, 0.0f);
    h.moving_variance = AddNonTrainable(bn + "/moving_variance", out, 1.0f);
    h.bn.emplace(out, config_.bn_decay, config_.bn_epsilon);
  }
  hidden_.push_back(std::move(h));
}

void Mlp::CheckShapes(const Eigen::Ref<const Eigen::MatrixXf>& inputs,
                      const Eigen::Ref<const Eigen::VectorXf>& labels) const {
  if (inputs.cols() != input_width_) {
    Fail("model inputs: {} columns, expected the input width {}", inputs.cols(), input_width_);
  }
  if (labels.size() != inputs.rows()) {
    Fail("model labels: {} entries for {} input rows", labels.size(), inputs.rows());
  }
}

float Mlp::ForwardBackward(const Eigen::Ref<const Eigen::MatrixXf>& inputs,
                           const Eigen::Ref<const Eigen::VectorXf>& labels, float loss_scale) {
  CheckShapes(inputs, labels);
  const bool logistic = loss_ == LossKind::kLogistic;
  ForwardTrain(inputs);
  if (inputs.rows() == 0) {
    // Empty products would be zero too; being explicit keeps stale gradients of a
    // previous step from surviving a zero-row shard.
    ZeroGradients(0);
    return 0.0f;
  }
  LossGrad(logistic, pred_, labels, loss_scale, dpred_);
  Backward(inputs);
  return MeanLoss(logistic, pred_.col(0), labels);
}

Eigen::Ref<const Eigen::MatrixXf> Mlp::LayerInput(const Eigen::Ref<const Eigen::MatrixXf>& inputs, size_t layer) const {
  if (layer == 0) return inputs;
  return hidden_[layer - 1].a;
}

void Mlp::ForwardTrain(const Eigen::Ref<const Eigen::MatrixXf>& inputs) {
  for (size_t l = 0; l < hidden_.size(); ++l) ForwardHidden(LayerInput(inputs, l), hidden_[l]);
  Affine(LayerInput(inputs, hidden_.size()), trainable_[out_w_], trainable_[out_b_], pred_);
}

void Mlp::ForwardHidden(const Eigen::Ref<const Eigen::MatrixXf>& prev, Hidden& h) {
  if (h.bn) {
    Affine(prev, trainable_[h.w], trainable_[h.b], h.z);
    h.bn->ForwardTrain(h.z, trainable_[h.gamma].value, trainable_[h.beta].value, h.y);
  } else {
    Affine(prev, trainable_[h.w], trainable_[h.b], h.y);
  }
  h.a = h.y.cwiseMax(0.0f);
}

void Mlp::Backward(const Eigen::Ref<const Eigen::MatrixXf>& inputs) {
  AffineGrad(LayerInput(inputs, hidden_.size()), dpred_, trainable_[out_w_], trainable_[out_b_]);
  Eigen::MatrixXf& d_last = hidden_.empty() ? input_grad_ : hidden_.back().da;
  AffineInputGrad(dpred_, trainable_[out_w_], d_last);
  for (size_t l = hidden_.size(); l-- > 0;) {
    Eigen::MatrixXf& d_prev = l == 0 ? input_grad_ : hidden_[l - 1].da;
    BackwardHidden(LayerInput(inputs, l), hidden_[l], d_prev);
  }
}

void Mlp::BackwardHidden(const Eigen::Ref<const Eigen::MatrixXf>& prev, Hidden& h, Eigen::MatrixXf& d_prev) {
  // ReLU: the gradient passes where the ReLU input was positive.
  h.da.array() *= (h.y.array() > 0.0f).cast<float>();
  if (h.bn) {
    Variable& gamma = trainable_[h.gamma];
    h.bn->Backward(h.da, gamma.value, h.dz, gamma.grad, trainable_[h.beta].grad);
  }
  const Eigen::MatrixXf& d_affine = h.bn ? h.dz : h.da;
  AffineGrad(prev, d_affine, trainable_[h.w], trainable_[h.b]);
  AffineInputGrad(d_affine, trainable_[h.w], d_prev);
}

void Mlp::ZeroGradients(Eigen::Index input_rows) {
  for (Variable& v : trainable_) v.grad.setZero();
  input_grad_.setZero(input_rows, input_width_);
}

Eigen::VectorXf Mlp::Predict(const Eigen::Ref<const Eigen::MatrixXf>& inputs) const {
  if (inputs.cols() != input_width_) {
    Fail("model inputs: {} columns, expected the input width {}", inputs.cols(), input_width_);
  }
  Eigen::MatrixXf act = inputs;
  Eigen::MatrixXf z;
  for (const Hidden& h : hidden_) {
    Affine(act, trainable_[h.w], trainable_[h.b], z);
    if (h.bn) {
      h.bn->ForwardEval(z, trainable_[h.gamma].value, trainable_[h.beta].value, non_trainable_[h.moving_mean].value,
                        non_trainable_[h.moving_variance].value, act);
      act = act.cwiseMax(0.0f);
    } else {
      act = z.cwiseMax(0.0f);
    }
  }
  Affine(act, trainable_[out_w_], trainable_[out_b_], z);
  return z.col(0);
}

float Mlp::EvalLoss(const Eigen::Ref<const Eigen::MatrixXf>& inputs,
                    const Eigen::Ref<const Eigen::VectorXf>& labels) const {
  CheckShapes(inputs, labels);
  return MeanLoss(loss_ == LossKind::kLogistic, Predict(inputs), labels);
}

void Mlp::PostTrainingStepUpdate() {
  for (Hidden& h : hidden_) {
    if (!h.bn) continue;
    h.bn->PostTrainingStepUpdate(non_trainable_[h.moving_mean].value, non_trainable_[h.moving_variance].value);
  }
}

const BatchNormAccumulators& Mlp::bn_accumulators(int layer) const {
  if (layer < 0 || layer >= static_cast<int>(hidden_.size()) || !hidden_[layer].bn) {
    Fail("model: hidden layer {} has no batch norm ({} hidden layers, batch_norm {})", layer, hidden_.size(),
         config_.batch_norm);
  }
  return hidden_[layer].bn->accumulators();
}

}  // namespace tpusim::model
