// Unit tests of sim/model: the Mlp's analytic gradients against central finite
// differences of an independent double-precision reference forward, the
// loss-scale and batch-splitting invariants, deterministic initialisation, a small
// SGD training run, batch norm's §5.1 accumulators and moving statistics worked by
// hand, and buffer reuse. malloc is interposed for this binary to count calls, as
// in tests/optim/no_allocation_test.cc; skipped under AddressSanitizer.
#include <cmath>
#include <cstddef>
#include <functional>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <Eigen/Core>

#include "base/error.h"
#include "base/synthetic.h"
#include "model/mlp.h"
#include "tests/common/malloc_counter.h"

namespace tpusim::model {
namespace {

using ::testing::HasSubstr;

using tpusim::testing::MallocCalls;

// ---------------------------------------------------------------------------
// Test data

// Deterministic values in [-1, 1), a function of (seed, row, column).
Eigen::MatrixXf Uniform(int rows, int cols, uint64_t seed) {
  Eigen::MatrixXf m(rows, cols);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) m(r, c) = BitsToUnitFloat(SyntheticBits(seed, r, 0, c));
  }
  return m;
}

// Regression targets in [-1, 1) for mse, {0, 1} for logistic.
Eigen::VectorXf Labels(int rows, const std::string& loss, uint64_t seed) {
  Eigen::VectorXf y = Uniform(rows, 1, seed).col(0);
  if (loss == "logistic") y = (y.array() > 0.0f).cast<float>();
  return y;
}

ModelConfig SmallConfig(const std::string& loss, bool batch_norm) {
  ModelConfig c;
  c.hidden = {4, 3};
  c.loss = loss;
  c.batch_norm = batch_norm;
  c.init_seed = 7;
  return c;
}

std::string ErrorOf(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// ---------------------------------------------------------------------------
// Independent reference: the training-mode forward in double with plain loops.

using RefParams = std::map<std::string, Eigen::ArrayXd>;

RefParams ParamsOf(const Mlp& model) {
  RefParams p;
  for (const Variable& v : model.trainable()) p[v.spec.name] = v.value.cast<double>();
  return p;
}

Eigen::MatrixXd RefAffine(const Eigen::MatrixXd& in, const Eigen::ArrayXd& w, const Eigen::ArrayXd& b) {
  const Eigen::Index n_out = b.size();
  Eigen::MatrixXd out(in.rows(), n_out);
  for (Eigen::Index i = 0; i < in.rows(); ++i) {
    for (Eigen::Index o = 0; o < n_out; ++o) {
      double sum = b[o];
      for (Eigen::Index k = 0; k < in.cols(); ++k) sum += in(i, k) * w[k * n_out + o];
      out(i, o) = sum;
    }
  }
  return out;
}

// §5.1 training normalisation with the batch's own E[z^2] - mean^2.
void RefBatchNorm(Eigen::MatrixXd& z, const Eigen::ArrayXd& gamma, const Eigen::ArrayXd& beta, double epsilon) {
  const double n = static_cast<double>(z.rows());
  for (Eigen::Index c = 0; c < z.cols(); ++c) {
    double s1 = 0.0;
    double s2 = 0.0;
    for (Eigen::Index i = 0; i < z.rows(); ++i) {
      s1 += z(i, c);
      s2 += z(i, c) * z(i, c);
    }
    const double mean = s1 / n;
    const double inv_std = 1.0 / std::sqrt(s2 / n - mean * mean + epsilon);
    for (Eigen::Index i = 0; i < z.rows(); ++i) {
      z(i, c) = (z(i, c) - mean) * inv_std * (1.0 + gamma[c]) + beta[c];
    }
  }
}

double RefExampleLoss(const std::string& loss, double pred, double label) {
  if (loss == "mse") return 0.5 * (pred - label) * (pred - label);
  const double p = 1.0 / (1.0 + std::exp(-pred));
  return -(label * std::log(p) + (1.0 - label) * std::log(1.0 - p));
}

double RefLoss(const ModelConfig& config, const RefParams& p, const Eigen::MatrixXd& x, const Eigen::VectorXd& y) {
  Eigen::MatrixXd act = x;
  for (size_t l = 0; l < config.hidden.size(); ++l) {
    const std::string dense = "dense_" + std::to_string(l);
    Eigen::MatrixXd z = RefAffine(act, p.at(dense + "/w"), p.at(dense + "/b"));
    if (config.batch_norm) {
      const std::string bn = "bn_" + std::to_string(l);
      RefBatchNorm(z, p.at(bn + "/gamma"), p.at(bn + "/beta"), config.bn_epsilon);
    }
    act = z.cwiseMax(0.0);
  }
  const Eigen::MatrixXd pred = RefAffine(act, p.at("out/w"), p.at("out/b"));
  double sum = 0.0;
  for (Eigen::Index i = 0; i < x.rows(); ++i) sum += RefExampleLoss(config.loss, pred(i, 0), y[i]);
  return sum / static_cast<double>(x.rows());
}

// (f(v + h) - f(v - h)) / 2h with v restored afterwards.
double CentralDifference(double& v, const std::function<double()>& f) {
  constexpr double kStep = 1e-6;
  const double saved = v;
  v = saved + kStep;
  const double up = f();
  v = saved - kStep;
  const double down = f();
  v = saved;
  return (up - down) / (2.0 * kStep);
}

// Float analytic vs double numeric: 1e-3 relative, with an absolute floor for
// gradients that are zero in exact arithmetic (a bias in front of batch norm).
void ExpectGradientNear(float analytic, double numeric, const std::string& what) {
  const double tolerance = 1e-3 * std::max(std::abs(numeric), std::abs(double{analytic})) + 1e-5;
  EXPECT_NEAR(analytic, numeric, tolerance) << what;
}

// Runs ForwardBackward and checks the loss, every variable gradient and the input
// gradient against the reference.
void CheckAgainstReference(Mlp& model, const Eigen::MatrixXf& x, const Eigen::VectorXf& y, float loss_scale) {
  const float loss = model.ForwardBackward(x, y, loss_scale);
  RefParams p = ParamsOf(model);
  Eigen::MatrixXd xd = x.cast<double>();
  const Eigen::VectorXd yd = y.cast<double>();
  const ModelConfig& c = model.config();
  const auto ref = [&] { return loss_scale * RefLoss(c, p, xd, yd); };
  EXPECT_NEAR(loss, RefLoss(c, p, xd, yd), 1e-5);
  for (const Variable& v : model.trainable()) {
    for (Eigen::Index i = 0; i < v.value.size(); ++i) {
      const double numeric = CentralDifference(p[v.spec.name][i], ref);
      ExpectGradientNear(v.grad[i], numeric, v.spec.name + "[" + std::to_string(i) + "]");
    }
  }
  ASSERT_EQ(model.input_grad().rows(), x.rows());
  ASSERT_EQ(model.input_grad().cols(), x.cols());
  for (Eigen::Index r = 0; r < x.rows(); ++r) {
    for (Eigen::Index col = 0; col < x.cols(); ++col) {
      const double numeric = CentralDifference(xd(r, col), ref);
      ExpectGradientNear(model.input_grad()(r, col), numeric,
                         "input(" + std::to_string(r) + "," + std::to_string(col) + ")");
    }
  }
}

std::vector<Eigen::ArrayXf> Grads(const Mlp& model) {
  std::vector<Eigen::ArrayXf> g;
  for (const Variable& v : model.trainable()) g.push_back(v.grad);
  return g;
}

const Variable& Find(const std::vector<Variable>& vars, const std::string& name) {
  for (const Variable& v : vars) {
    if (v.spec.name == name) return v;
  }
  ADD_FAILURE() << "no variable " << name;
  static const Variable missing;
  return missing;
}

Variable& FindMutable(Mlp& model, const std::string& name) {
  return const_cast<Variable&>(Find(model.trainable(), name));
}

// ---------------------------------------------------------------------------
// Config and structure

TEST(ModelConfigTest, DefaultsAreValid) { EXPECT_NO_THROW(ValidateModelConfig(ModelConfig{})); }

TEST(ModelConfigTest, ErrorsNameKeyValueAndAllowed) {
  ModelConfig c;
  c.hidden = {8, 0};
  EXPECT_EQ(ErrorOf([&] { ValidateModelConfig(c); }), "model.hidden[1]: 0 must be >= 1");
  c = ModelConfig{};
  c.loss = "hinge";
  EXPECT_EQ(ErrorOf([&] { ValidateModelConfig(c); }), "model.loss: 'hinge' is not one of mse, logistic");
  c = ModelConfig{};
  c.bn_decay = 1.5f;
  EXPECT_THAT(ErrorOf([&] { ValidateModelConfig(c); }), HasSubstr("model.bn_decay: 1.5"));
  c = ModelConfig{};
  c.bn_epsilon = 0.0f;
  EXPECT_THAT(ErrorOf([&] { ValidateModelConfig(c, "run.model"); }), HasSubstr("run.model.bn_epsilon: 0 must be"));
  EXPECT_THAT(ErrorOf([] { Mlp(ModelConfig{}, 0); }), HasSubstr("input width: 0 must be >= 1"));
  c.loss = "l1";
  EXPECT_THAT(ErrorOf([&] { Mlp(c, 3); }), HasSubstr("model.loss"));
}

TEST(MlpTest, VariableNamesAndShapes) {
  ModelConfig c = SmallConfig("mse", true);
  const Mlp model(c, 5);
  std::vector<std::string> names;
  std::vector<std::vector<int64_t>> shapes;
  for (const Variable& v : model.trainable()) {
    names.push_back(v.spec.name);
    shapes.push_back(v.spec.shape);
    EXPECT_EQ(v.value.size(), optim::NumElements(v.spec.shape));
    EXPECT_EQ(v.grad.size(), v.value.size());
  }
  EXPECT_THAT(names, ::testing::ElementsAre("dense_0/w", "dense_0/b", "bn_0/gamma", "bn_0/beta", "dense_1/w",
                                            "dense_1/b", "bn_1/gamma", "bn_1/beta", "out/w", "out/b"));
  using S = std::vector<int64_t>;
  EXPECT_THAT(shapes, ::testing::ElementsAre(S{5, 4}, S{4}, S{4}, S{4}, S{4, 3}, S{3}, S{3}, S{3}, S{3, 1}, S{1}));
  names.clear();
  for (const Variable& v : model.non_trainable()) names.push_back(v.spec.name);
  EXPECT_THAT(names, ::testing::ElementsAre("bn_0/moving_mean", "bn_0/moving_variance", "bn_1/moving_mean",
                                            "bn_1/moving_variance"));
  EXPECT_TRUE(Mlp(SmallConfig("mse", false), 5).non_trainable().empty());
}

TEST(MlpTest, ShapeMismatchesAreErrors) {
  Mlp model(SmallConfig("mse", false), 3);
  const Eigen::MatrixXf x = Uniform(4, 2, 1);
  const Eigen::VectorXf y = Labels(4, "mse", 2);
  EXPECT_THAT(ErrorOf([&] { model.ForwardBackward(x, y, 1.0f); }), HasSubstr("2 columns, expected the input width 3"));
  const Eigen::MatrixXf x3 = Uniform(5, 3, 1);
  EXPECT_THAT(ErrorOf([&] { model.ForwardBackward(x3, y, 1.0f); }), HasSubstr("4 entries for 5 input rows"));
  EXPECT_THAT(ErrorOf([&] { model.Predict(x); }), HasSubstr("expected the input width 3"));
  EXPECT_THAT(ErrorOf([&] { model.bn_accumulators(0); }), HasSubstr("no batch norm"));
}

// ---------------------------------------------------------------------------
// Initialisation

TEST(MlpTest, InitialisationIsDeterministicGlorotUniform) {
  const ModelConfig c = SmallConfig("mse", true);
  const Mlp a(c, 5);
  const Mlp b(c, 5);
  ModelConfig other_seed = c;
  other_seed.init_seed = 8;
  const Mlp d(other_seed, 5);
  for (size_t i = 0; i < a.trainable().size(); ++i) {
    const Variable& v = a.trainable()[i];
    EXPECT_TRUE((v.value == b.trainable()[i].value).all()) << v.spec.name;
    if (v.spec.shape.size() != 2) {
      EXPECT_TRUE((v.value == 0.0f).all()) << v.spec.name;  // biases, gamma, beta
      continue;
    }
    const double limit = std::sqrt(6.0 / static_cast<double>(v.spec.shape[0] + v.spec.shape[1]));
    EXPECT_LE(v.value.abs().maxCoeff(), limit) << v.spec.name;
    EXPECT_GT(v.value.abs().maxCoeff(), 0.5 * limit) << v.spec.name;
    EXPECT_FALSE((v.value == d.trainable()[i].value).all()) << v.spec.name;
  }
  for (const Variable& v : a.non_trainable()) {
    const float expected = v.spec.name.ends_with("moving_variance") ? 1.0f : 0.0f;
    EXPECT_TRUE((v.value == expected).all()) << v.spec.name;
    EXPECT_EQ(v.grad.size(), 0);
  }
}

// ---------------------------------------------------------------------------
// Gradients against finite differences

struct GradCase {
  std::string loss;
  bool batch_norm;
  std::vector<int> hidden;
};

void PrintTo(const GradCase& g, std::ostream* os) {
  *os << g.loss << (g.batch_norm ? " with batch norm, " : ", ") << g.hidden.size() << " hidden layers";
}

class MlpGradientTest : public ::testing::TestWithParam<GradCase> {};

TEST_P(MlpGradientTest, MatchesFiniteDifferencesOfReference) {
  ModelConfig c = SmallConfig(GetParam().loss, GetParam().batch_norm);
  c.hidden = GetParam().hidden;
  Mlp model(c, 3);
  // Non-zero gamma and beta so the batch-norm scale and shift are exercised.
  for (Variable& v : model.trainable()) {
    if (v.spec.name.starts_with("bn_")) v.value = Uniform(static_cast<int>(v.value.size()), 1, 5);
  }
  const Eigen::MatrixXf x = Uniform(6, 3, 11);
  CheckAgainstReference(model, x, Labels(6, c.loss, 12), 1.0f);
}

INSTANTIATE_TEST_SUITE_P(AllLossesAndNorms, MlpGradientTest,
                         ::testing::Values(GradCase{"mse", false, {4, 3}}, GradCase{"mse", true, {4, 3}},
                                           GradCase{"logistic", false, {4, 3}}, GradCase{"logistic", true, {4, 3}},
                                           GradCase{"mse", false, {}}, GradCase{"logistic", true, {5}}),
                         [](const ::testing::TestParamInfo<GradCase>& param_info) {
                           const GradCase& g = param_info.param;
                           return g.loss + (g.batch_norm ? "_bn" : "") + "_" + std::to_string(g.hidden.size()) +
                                  "hidden";
                         });

TEST(MlpTest, LossScaleScalesEveryGradientButNotTheLoss) {
  Mlp model(SmallConfig("logistic", true), 3);
  const Eigen::MatrixXf x = Uniform(6, 3, 21);
  const Eigen::VectorXf y = Labels(6, "logistic", 22);
  const float loss = model.ForwardBackward(x, y, 1.0f);
  const std::vector<Eigen::ArrayXf> unscaled = Grads(model);
  const Eigen::MatrixXf unscaled_input = model.input_grad();
  EXPECT_EQ(model.ForwardBackward(x, y, 0.25f), loss);
  for (size_t i = 0; i < unscaled.size(); ++i) {
    const Eigen::ArrayXf expected = 0.25f * unscaled[i];
    for (Eigen::Index k = 0; k < expected.size(); ++k) {
      EXPECT_FLOAT_EQ(model.trainable()[i].grad[k], expected[k]) << model.trainable()[i].spec.name;
    }
  }
  EXPECT_TRUE(model.input_grad().isApprox(0.25f * unscaled_input, 1e-6f));
}

TEST(MlpTest, GradientOfBatchIsMeanOfItsHalvesWithoutBatchNorm) {
  Mlp model(SmallConfig("mse", false), 3);
  const Eigen::MatrixXf x = Uniform(8, 3, 31);
  const Eigen::VectorXf y = Labels(8, "mse", 32);
  const float loss_full = model.ForwardBackward(x, y, 1.0f);
  const std::vector<Eigen::ArrayXf> full = Grads(model);
  const Eigen::MatrixXf input_full = model.input_grad();
  const float loss_top = model.ForwardBackward(x.topRows(4), y.head(4), 1.0f);
  const std::vector<Eigen::ArrayXf> top = Grads(model);
  const Eigen::MatrixXf input_top = model.input_grad();
  const float loss_bottom = model.ForwardBackward(x.bottomRows(4), y.tail(4), 1.0f);
  const std::vector<Eigen::ArrayXf> bottom = Grads(model);
  EXPECT_NEAR(loss_full, 0.5f * (loss_top + loss_bottom), 1e-6);
  for (size_t i = 0; i < full.size(); ++i) {
    const Eigen::ArrayXf mean = 0.5f * (top[i] + bottom[i]);
    for (Eigen::Index k = 0; k < mean.size(); ++k) {
      EXPECT_NEAR(full[i][k], mean[k], 1e-6) << model.trainable()[i].spec.name << "[" << k << "]";
    }
  }
  // Each example's input gradient carries the 1/B of the mean it was part of.
  EXPECT_TRUE(input_full.topRows(4).isApprox(0.5f * input_top, 1e-5f));
  EXPECT_TRUE(input_full.bottomRows(4).isApprox(0.5f * model.input_grad(), 1e-5f));
}

TEST(MlpTest, ZeroRowBatchGivesZeroLossAndGradients) {
  for (bool bn : {false, true}) {
    Mlp model(SmallConfig("logistic", bn), 3);
    model.ForwardBackward(Uniform(4, 3, 41), Labels(4, "logistic", 42), 1.0f);
    model.PostTrainingStepUpdate();
    const std::vector<Variable> moving_before = model.non_trainable();
    EXPECT_EQ(model.ForwardBackward(Eigen::MatrixXf(0, 3), Eigen::VectorXf(0), 1.0f), 0.0f);
    for (const Variable& v : model.trainable()) {
      EXPECT_TRUE((v.grad == 0.0f).all()) << v.spec.name;
    }
    EXPECT_EQ(model.input_grad().rows(), 0);
    EXPECT_EQ(model.input_grad().cols(), 3);
    if (bn) {
      EXPECT_EQ(model.bn_accumulators(0).counts, 0.0f);
    }
    model.PostTrainingStepUpdate();  // counts = 0: moving statistics unchanged
    for (size_t i = 0; i < moving_before.size(); ++i) {
      EXPECT_TRUE((model.non_trainable()[i].value == moving_before[i].value).all());
    }
    EXPECT_EQ(model.Predict(Eigen::MatrixXf(0, 3)).size(), 0);
  }
}

// ---------------------------------------------------------------------------
// Training

// Plain SGD on a linear teacher y = x·t + 0.3; the evaluation loss must fall by
// more than 10x. With batch norm the moving statistics are updated every step and
// used by the evaluation.
void TrainOnLinearTeacher(bool batch_norm) {
  ModelConfig c;
  c.hidden = {16, 8};
  c.batch_norm = batch_norm;
  c.bn_decay = 0.9f;
  Mlp model(c, 4);
  const Eigen::MatrixXf x = Uniform(128, 4, 51);
  Eigen::Vector4f teacher(0.5f, -1.0f, 0.25f, 2.0f);
  const Eigen::VectorXf y = (x * teacher).array() + 0.3f;
  const float initial = model.EvalLoss(x, y);
  constexpr float kLearningRate = 0.05f;
  for (int step = 0; step < 600; ++step) {
    const int first = (step % 4) * 32;
    model.ForwardBackward(x.middleRows(first, 32), y.segment(first, 32), 1.0f);
    for (Variable& v : model.trainable()) v.value -= kLearningRate * v.grad;
    model.PostTrainingStepUpdate();
  }
  const float final_loss = model.EvalLoss(x, y);
  EXPECT_LT(final_loss * 10.0f, initial) << "initial " << initial << " final " << final_loss;
}

TEST(MlpTest, SgdLearnsLinearTeacher) { TrainOnLinearTeacher(false); }
TEST(MlpTest, SgdLearnsLinearTeacherWithBatchNorm) { TrainOnLinearTeacher(true); }

// ---------------------------------------------------------------------------
// Batch norm §5.1, by hand

// One hidden layer of width 2 with identity weights, so z = x, and out/w = (1, 0),
// so the prediction is ReLU(normalised column 0); labels 0 with mse make the loss
// mean(0.5·p²).
Mlp IdentityBatchNormModel() {
  ModelConfig c;
  c.hidden = {2};
  c.batch_norm = true;
  c.bn_decay = 0.9f;
  Mlp model(c, 2);
  FindMutable(model, "dense_0/w").value << 1.0f, 0.0f, 0.0f, 1.0f;
  FindMutable(model, "out/w").value << 1.0f, 0.0f;
  return model;
}

Eigen::MatrixXf Rows(std::initializer_list<std::initializer_list<float>> rows) {
  Eigen::MatrixXf m(static_cast<Eigen::Index>(rows.size()), 2);
  Eigen::Index r = 0;
  for (const auto& row : rows) m.row(r++) = Eigen::Vector2f(row.begin()[0], row.begin()[1]);
  return m;
}

void ExpectArray(const Eigen::ArrayXf& actual, float e0, float e1) {
  ASSERT_EQ(actual.size(), 2);
  EXPECT_NEAR(actual[0], e0, 1e-6);
  EXPECT_NEAR(actual[1], e1, 1e-6);
}

TEST(BatchNormTest, AccumulatesMicroBatchesAndUpdatesMovingStatistics) {
  Mlp model = IdentityBatchNormModel();
  const Eigen::MatrixXf mb1 = Rows({{1, 0}, {3, 2}});
  const Eigen::MatrixXf mb2 = Rows({{2, 1}, {4, -1}, {0, 8}});
  // mb1 column 0: mean 2, var 1 (its own statistics, not the step's): p = (0, 1/√1.001).
  EXPECT_NEAR(model.ForwardBackward(mb1, Eigen::VectorXf::Zero(2), 1.0f), 0.25 / 1.001, 1e-6);
  EXPECT_EQ(model.bn_accumulators(0).counts, 2.0f);
  ExpectArray(model.bn_accumulators(0).mean_ss, 4, 2);
  ExpectArray(model.bn_accumulators(0).variance_ss, 10, 4);
  // mb2 column 0: mean 2, var 20/3 - 4 = 8/3: p = (0, 2/√(8/3+0.001), 0).
  EXPECT_NEAR(model.ForwardBackward(mb2, Eigen::VectorXf::Zero(3), 1.0f), 0.5 * 4.0 / (8.0 / 3.0 + 0.001) / 3.0, 1e-6);
  EXPECT_EQ(model.bn_accumulators(0).counts, 5.0f);
  ExpectArray(model.bn_accumulators(0).mean_ss, 10, 10);
  ExpectArray(model.bn_accumulators(0).variance_ss, 30, 70);

  // Step statistics: mean (2, 2), var (30/5 - 4, 70/5 - 4) = (2, 10); decay 0.9.
  model.PostTrainingStepUpdate();
  ExpectArray(Find(model.non_trainable(), "bn_0/moving_mean").value, 0.2f, 0.2f);
  ExpectArray(Find(model.non_trainable(), "bn_0/moving_variance").value, 1.1f, 1.9f);
  EXPECT_EQ(model.bn_accumulators(0).counts, 0.0f);
  ExpectArray(model.bn_accumulators(0).mean_ss, 0, 0);
  ExpectArray(model.bn_accumulators(0).variance_ss, 0, 0);

  // Evaluation normalises with the moving statistics.
  EXPECT_NEAR(model.Predict(Rows({{2, 2}}))[0], 1.8 / std::sqrt(1.1 + 0.001), 1e-6);

  // A step in which the layer did not run leaves the statistics alone.
  model.PostTrainingStepUpdate();
  ExpectArray(Find(model.non_trainable(), "bn_0/moving_mean").value, 0.2f, 0.2f);

  // Next step, mb1 alone: mean (2, 1), var (1, 1).
  model.ForwardBackward(mb1, Eigen::VectorXf::Zero(2), 1.0f);
  model.PostTrainingStepUpdate();
  ExpectArray(Find(model.non_trainable(), "bn_0/moving_mean").value, 0.38f, 0.28f);
  ExpectArray(Find(model.non_trainable(), "bn_0/moving_variance").value, 1.09f, 1.81f);
}

// ---------------------------------------------------------------------------
// Buffers

TEST(MlpTest, RepeatedStepsOfTheSameBatchSizeDoNotAllocate) {
  for (bool bn : {false, true}) {
    ModelConfig c = SmallConfig("logistic", bn);
    c.hidden = {32, 16};
    Mlp model(c, 24);
    const Eigen::MatrixXf x = Uniform(64, 24, 61);
    const Eigen::VectorXf y = Labels(64, "logistic", 62);
    model.ForwardBackward(x, y, 0.5f);
    const float* input_grad = model.input_grad().data();
    const long before = MallocCalls();
    for (int step = 0; step < 3; ++step) {
      model.ForwardBackward(x, y, 0.5f);
      model.PostTrainingStepUpdate();
    }
    EXPECT_EQ(MallocCalls() - before, 0) << "batch_norm " << bn;
    EXPECT_EQ(model.input_grad().data(), input_grad);
  }
}

}  // namespace
}  // namespace tpusim::model
