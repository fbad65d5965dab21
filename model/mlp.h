// The model a core rank trains: a small multi-layer perceptron with one output,
// written as explicit float32 Eigen forward and backward passes (no autodiff, no
// MPI, no I/O). The caller builds each micro-batch's input matrix (dense float
// features flattened, then embedding activations, concatenated by column), calls
// ForwardBackward, hands each trainable variable's `grad` to the reduction and the
// optimizer, and sends input_grad()'s embedding columns down the embedding path.
//
// Layers: dense_0 .. dense_{L-1}, each affine -> [batch norm] -> ReLU, then the
// affine output layer `out` with one unit. Batch norm is Lingvo's
// BatchNormLayerNoPadding (docs/reference/training.md §5.1, see batch_norm.h).
//
// Variables are flat float32 arrays in C order, registered with optimizers through
// their optim::VariableSpec:
//   dense_<l>/w [in, out], dense_<l>/b [out], bn_<l>/gamma [out], bn_<l>/beta [out],
//   out/w [H_last, 1], out/b [1]                                   (trainable)
//   bn_<l>/moving_mean [out], bn_<l>/moving_variance [out]          (non-trainable)
// Names carry no ":0" suffix; callers wanting Lingvo-identical routing add it.
//
// Matrix layout: inputs are [B, D] with one row per example, as a column-major
// Eigen::MatrixXf (a row-major matrix is accepted but copied on every call).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <Eigen/Core>

#include "model/batch_norm.h"
#include "optim/optimizer.h"

namespace tpusim::model {

// The run config's `model` section.
struct ModelConfig {
  // Widths of the hidden layers, each >= 1; empty gives a linear model.
  std::vector<int> hidden = {64, 32};
  // mse: per-example loss 0.5·(pred − y)², so d/dpred = pred − y.
  // logistic: sigmoid cross-entropy of the logit `pred`, labels in [0, 1]
  //   (normally {0, 1}); d/dpred = sigmoid(pred) − y.
  std::string loss = "mse";
  // Batch norm after every hidden dense layer, before its ReLU.
  bool batch_norm = false;
  float bn_decay = 0.997f;    // in [0, 1]
  float bn_epsilon = 0.001f;  // > 0
  // Initial weights are a pure function of (init_seed, variable name, element), so
  // every replica built from the same config starts identical.
  uint64_t init_seed = 1;
};

// Checks every field. Throws tpusim::Error naming `<key_prefix>.<field>`, the value
// and what is allowed, e.g. "model.loss: 'hinge' is not one of mse, logistic".
void ValidateModelConfig(const ModelConfig& config, std::string_view key_prefix = "model");

// One model variable with its gradient buffer.
struct Variable {
  optim::VariableSpec spec;
  Eigen::ArrayXf value;  // NumElements(spec.shape) values in C order
  Eigen::ArrayXf grad;   // same size for trainable variables; empty for moving stats
};

// Not thread-safe; copyable (a copy is an independent replica of the model).
class Mlp {
 public:
  // Validates `config` and builds the variables with their deterministic initial
  // values: Glorot-uniform weights, zero biases, gamma = beta = 0, moving mean 0,
  // moving variance 1. `input_width` (D, >= 1) is the number of input columns.
  // Throws tpusim::Error on a bad config or width.
  Mlp(const ModelConfig& config, int input_width);

  // One training micro-batch. `inputs` is [B, D] (B may be 0), `labels` has B
  // entries. Returns the local mean loss over the B examples (0 for B = 0), not
  // scaled. Overwrites every trainable variable's `grad` with
  // d(loss_scale · mean loss)/d(variable) and input_grad() with
  // d(loss_scale · mean loss)/d(inputs); docs/reference/training.md §0 has the caller pass
  // loss_scale = 1/R. With batch norm, each hidden layer normalises with this
  // micro-batch's statistics and adds them to its step accumulators. No heap
  // allocation when B is unchanged since the previous call (and inputs are
  // column-major). Throws tpusim::Error if the shapes do not match; the model is
  // then unchanged.
  float ForwardBackward(const Eigen::Ref<const Eigen::MatrixXf>& inputs,
                        const Eigen::Ref<const Eigen::VectorXf>& labels, float loss_scale);

  // [B, D] gradient of the last ForwardBackward with respect to its inputs.
  const Eigen::MatrixXf& input_grad() const { return input_grad_; }

  // Evaluation forward of [B, D] inputs: returns the B outputs (the prediction for
  // mse, the logit for logistic). Batch norm uses the moving statistics and the
  // accumulators are untouched. Throws tpusim::Error on a width mismatch.
  Eigen::VectorXf Predict(const Eigen::Ref<const Eigen::MatrixXf>& inputs) const;

  // Mean loss of Predict(inputs) against `labels` (0 for B = 0). Throws
  // tpusim::Error on a shape mismatch.
  float EvalLoss(const Eigen::Ref<const Eigen::MatrixXf>& inputs,
                 const Eigen::Ref<const Eigen::VectorXf>& labels) const;

  // docs/reference/training.md §5.1/§6.1 step 4: call once per training step after all optimizer
  // updates. Updates each batch-norm layer's moving statistics from the
  // accumulated micro-batches (if any example was seen) and resets the
  // accumulators. A no-op without batch norm.
  void PostTrainingStepUpdate();

  // The trainable variables in the order listed in the file comment. Callers may
  // change values and grads in place (optimizer updates, checkpoint restore) but
  // not sizes, names or the list itself.
  std::vector<Variable>& trainable() { return trainable_; }
  const std::vector<Variable>& trainable() const { return trainable_; }
  // The moving statistics (bn_<l>/moving_mean, bn_<l>/moving_variance per layer;
  // empty without batch norm). Same rules as trainable().
  std::vector<Variable>& non_trainable() { return non_trainable_; }
  const std::vector<Variable>& non_trainable() const { return non_trainable_; }

  // Accumulators of hidden layer `layer`'s batch norm. Throws tpusim::Error if
  // batch norm is off or the layer does not exist.
  const BatchNormAccumulators& bn_accumulators(int layer) const;

  const ModelConfig& config() const { return config_; }
  int input_width() const { return input_width_; }

 private:
  enum class LossKind { kMse, kLogistic };

  // Indices into trainable_ / non_trainable_ and the per-step buffers of one
  // hidden layer. Buffers are [B, width] and keep their storage while B is stable.
  struct Hidden {
    int w = -1;
    int b = -1;
    int gamma = -1;
    int beta = -1;
    int moving_mean = -1;
    int moving_variance = -1;
    std::optional<BatchNorm> bn;
    Eigen::MatrixXf z;   // affine output (only with batch norm)
    Eigen::MatrixXf y;   // ReLU input
    Eigen::MatrixXf a;   // ReLU output
    Eigen::MatrixXf da;  // gradient at a, turned in place into the gradient at y
    Eigen::MatrixXf dz;  // gradient at z (only with batch norm)
  };

  int AddTrainable(const std::string& name, std::vector<int64_t> shape);
  int AddNonTrainable(const std::string& name, int width, float value);
  void AddHidden(int layer, int in, int out);
  void CheckShapes(const Eigen::Ref<const Eigen::MatrixXf>& inputs,
                   const Eigen::Ref<const Eigen::VectorXf>& labels) const;
  void ForwardTrain(const Eigen::Ref<const Eigen::MatrixXf>& inputs);
  void ForwardHidden(const Eigen::Ref<const Eigen::MatrixXf>& prev, Hidden& h);
  void Backward(const Eigen::Ref<const Eigen::MatrixXf>& inputs);
  void BackwardHidden(const Eigen::Ref<const Eigen::MatrixXf>& prev, Hidden& h, Eigen::MatrixXf& d_prev);
  void ZeroGradients(Eigen::Index input_rows);
  // The input of hidden layer `layer` (the inputs for 0); `hidden_.size()` gives
  // the input of the output layer.
  Eigen::Ref<const Eigen::MatrixXf> LayerInput(const Eigen::Ref<const Eigen::MatrixXf>& inputs, size_t layer) const;

  ModelConfig config_;
  int input_width_;
  LossKind loss_;
  std::vector<Variable> trainable_;
  std::vector<Variable> non_trainable_;
  std::vector<Hidden> hidden_;
  int out_w_ = -1;
  int out_b_ = -1;
  Eigen::MatrixXf pred_;        // [B, 1]
  Eigen::MatrixXf dpred_;       // [B, 1]
  Eigen::MatrixXf input_grad_;  // [B, D]
};

}  // namespace tpusim::model
