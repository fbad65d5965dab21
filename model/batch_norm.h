// Batch normalisation with step accumulators, Lingvo's BatchNormLayerNoPadding
// (docs/reference/training.md §5.1), reduced to the [examples, channels] case of a dense model.
// In training each call normalises with the statistics of its own (replica-local)
// micro-batch and adds that micro-batch's sums to the step's accumulators;
// PostTrainingStepUpdate folds the accumulated statistics into the moving mean and
// variance once per step and resets the accumulators. Evaluation normalises with
// the moving statistics.
//
// The layer owns only its accumulators and the scratch of the last training
// forward; the variables (gamma, beta, moving_mean, moving_variance) belong to the
// model and are passed in, so the model can expose them all in flat lists.
// Activations are column-major Eigen::MatrixXf with one row per example.
// Not thread-safe.
#pragma once

#include <Eigen/Core>

namespace tpusim::model {

// The §5.1 accumulators: sums over every micro-batch of the current step, local to
// this replica. Zero at construction and after each PostTrainingStepUpdate.
struct BatchNormAccumulators {
  float counts = 0.0f;         // examples seen this step
  Eigen::ArrayXf mean_ss;      // [channels] sum of x
  Eigen::ArrayXf variance_ss;  // [channels] sum of x^2
};

class BatchNorm {
 public:
  // `decay` and `epsilon` are validated by the model config.
  BatchNorm(int channels, float decay, float epsilon);

  // Training forward of one micro-batch: y = normalise(z) with z's own column
  // statistics; adds z's sums to the accumulators. Keeps what Backward needs, so
  // Backward refers to the most recent call. z may have zero rows (then y is
  // empty and only counts += 0 happens).
  // gamma and beta are [channels]; the effective scale is 1 + gamma.
  void ForwardTrain(const Eigen::MatrixXf& z, const Eigen::ArrayXf& gamma, const Eigen::ArrayXf& beta,
                    Eigen::MatrixXf& y);

  // Gradient through the last ForwardTrain: given dL/dy, writes dL/dz, dL/dgamma
  // and dL/dbeta (all sized here; no allocation when sizes are unchanged).
  void Backward(const Eigen::MatrixXf& dy, const Eigen::ArrayXf& gamma, Eigen::MatrixXf& dz, Eigen::ArrayXf& dgamma,
                Eigen::ArrayXf& dbeta);

  // Evaluation forward: normalises with the moving statistics; touches no state.
  void ForwardEval(const Eigen::MatrixXf& z, const Eigen::ArrayXf& gamma, const Eigen::ArrayXf& beta,
                   const Eigen::ArrayXf& moving_mean, const Eigen::ArrayXf& moving_variance, Eigen::MatrixXf& y) const;

  // §5.1 PostTrainingStepUpdate: if counts > 0.5, moves moving_mean/variance a
  // fraction (1 - decay) toward the step's mean/variance; then resets the
  // accumulators whether or not the layer ran.
  void PostTrainingStepUpdate(Eigen::ArrayXf& moving_mean, Eigen::ArrayXf& moving_variance);

  const BatchNormAccumulators& accumulators() const { return acc_; }

 private:
  void ResetAccumulators();

  float decay_;
  float epsilon_;
  BatchNormAccumulators acc_;
  // Scratch of the last ForwardTrain, reused while the batch size is unchanged.
  Eigen::ArrayXf sum_;      // [channels] column sums of z
  Eigen::ArrayXf sum_sq_;   // [channels] column sums of z^2
  Eigen::ArrayXf mean_;     // [channels] micro-batch mean
  Eigen::ArrayXf inv_std_;  // [channels] rsqrt(micro-batch variance + epsilon)
  Eigen::ArrayXf scale_;    // [channels] 1 + gamma
  Eigen::ArrayXf mean_dy_;  // [channels] Backward scratch
  Eigen::ArrayXf mean_dy_x_hat_;
  Eigen::MatrixXf x_hat_;  // [examples, channels] normalised z
};

}  // namespace tpusim::model
