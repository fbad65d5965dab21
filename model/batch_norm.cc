#include "model/batch_norm.h"

#include <cassert>

namespace tpusim::model {

BatchNorm::BatchNorm(int channels, float decay, float epsilon) : decay_(decay), epsilon_(epsilon) {
  assert(channels > 0);
  acc_.mean_ss = Eigen::ArrayXf::Zero(channels);
  acc_.variance_ss = Eigen::ArrayXf::Zero(channels);
}

void BatchNorm::ForwardTrain(const Eigen::MatrixXf& z, const Eigen::ArrayXf& gamma, const Eigen::ArrayXf& beta,
                             Eigen::MatrixXf& y) {
  sum_ = z.colwise().sum().transpose().array();
  sum_sq_ = z.array().square().colwise().sum().transpose();
  const float n = static_cast<float>(z.rows());
  // §5.1: the accumulators take the local sums before anything else uses them.
  acc_.counts += n;
  acc_.mean_ss += sum_;
  acc_.variance_ss += sum_sq_;
  y.resize(z.rows(), z.cols());
  x_hat_.resize(z.rows(), z.cols());
  if (z.rows() == 0) return;  // nothing to normalise; avoids 0/0 statistics

  mean_ = sum_ / n;
  // Lingvo's moments are E[z^2] - mean^2; in float the cancellation can go slightly
  // negative, which would make rsqrt NaN for a small epsilon, so clamp at zero.
  inv_std_ = ((sum_sq_ / n - mean_.square()).max(0.0f) + epsilon_).rsqrt();
  scale_ = gamma + 1.0f;
  x_hat_.array() = (z.array().rowwise() - mean_.transpose()).rowwise() * inv_std_.transpose();
  y.array() = (x_hat_.array().rowwise() * scale_.transpose()).rowwise() + beta.transpose();
}

// With x_hat = (z - mean)·inv_std and y = x_hat·(1+gamma) + beta over n rows,
// dz = (1+gamma)·inv_std·(dy - mean(dy) - x_hat·mean(dy·x_hat)) per column, where
// the two column means are exactly dbeta/n and dgamma/n.
void BatchNorm::Backward(const Eigen::MatrixXf& dy, const Eigen::ArrayXf& gamma, Eigen::MatrixXf& dz,
                         Eigen::ArrayXf& dgamma, Eigen::ArrayXf& dbeta) {
  assert(dy.rows() == x_hat_.rows() && dy.cols() == x_hat_.cols());
  dbeta = dy.colwise().sum().transpose().array();
  dgamma = (dy.array() * x_hat_.array()).colwise().sum().transpose();
  dz.resize(dy.rows(), dy.cols());
  if (dy.rows() == 0) return;

  const float n = static_cast<float>(dy.rows());
  mean_dy_ = dbeta / n;
  mean_dy_x_hat_ = dgamma / n;
  scale_ = (gamma + 1.0f) * inv_std_;
  dz.array() = ((dy.array().rowwise() - mean_dy_.transpose()) - (x_hat_.array().rowwise() * mean_dy_x_hat_.transpose()))
                   .rowwise() *
               scale_.transpose();
}

void BatchNorm::ForwardEval(const Eigen::MatrixXf& z, const Eigen::ArrayXf& gamma, const Eigen::ArrayXf& beta,
                            const Eigen::ArrayXf& moving_mean, const Eigen::ArrayXf& moving_variance,
                            Eigen::MatrixXf& y) const {
  const Eigen::ArrayXf scale = (gamma + 1.0f) * (moving_variance + epsilon_).rsqrt();
  y.resize(z.rows(), z.cols());
  y.array() =
      ((z.array().rowwise() - moving_mean.transpose()).rowwise() * scale.transpose()).rowwise() + beta.transpose();
}

void BatchNorm::PostTrainingStepUpdate(Eigen::ArrayXf& moving_mean, Eigen::ArrayXf& moving_variance) {
  // counts = 0 means the layer did not run this step; the statistics would be 0/0.
  if (acc_.counts > 0.5f) {
    const float counts = acc_.counts;
    const float rate = 1.0f - decay_;
    moving_variance -= rate * (moving_variance - (acc_.variance_ss / counts - (acc_.mean_ss / counts).square()));
    moving_mean -= rate * (moving_mean - acc_.mean_ss / counts);
  }
  ResetAccumulators();
}

void BatchNorm::ResetAccumulators() {
  acc_.counts = 0.0f;
  acc_.mean_ss.setZero();
  acc_.variance_ss.setZero();
}

}  // namespace tpusim::model
