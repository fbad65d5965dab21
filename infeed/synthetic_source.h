// The synthetic input source. Every value is a pure function of (seed, global example
// id, feature, element) through base/synthetic.h and base/synthetic_words.h, so a core can regenerate and verify
// any shard it receives, whole rows or a partitioned slice, without communication.
//
// Values (element = row-major index inside one example's feature) come from the example's
// row key K = SyntheticRowKey(SyntheticFeatureSeed(seed, FeatureKey(name)), id):
//   float32   WordToUnitFloat(W(e)) = (W(e) >> 8) / 2^23 - 1, in [-1, 1)
//   int32/64  WordToRange(W(e), int_range) = W(e) * int_range / 2^32 (rounded down),
//             in [0, int_range) (default 1000, at most 2^31)
// where W(w) = SyntheticRowWords(K)(w) is a two-multiply 32-bit hash of the word index
// (base/synthetic_words.h), and from the row's byte stream B(e) = byte e % 16 of
// SyntheticRowBytes(K).Block(e / 16), ARS-3 (three AES rounds) of the counter e / 16
// (base/synthetic_bytes.h):
//   uint8     B(e), in [0, 256) (raw image bytes)
//   int8      the same byte read as signed, in [-128, 128)
//   bfloat16  ByteToBFloat16Bits(B(e)): sign the byte's top bit, magnitude 0.5 + (its
//             low 7 bits) / 256, so 256 values +-[0.5, 1), made with integer operations
// The vectorised row kernels (infeed/internal/synthetic_rows.h: AVX2 hashes for words,
// AES-NI for bytes) fill image-sized rows near memory speed.
// Label (optional, float32, one scalar per example, tensor [n]): a fixed hidden teacher
// with weights w(f, j) = BitsToUnitFloat(SyntheticBits(seed, -1, FeatureKey(f), j))
// (id -1 is never a real example) over every float feature f of the example, as stored,
// in config order:
//   s = sum_f sum_j w(f, j) x(f, j) / sqrt(D32 / 9 + D16 * 7 / 36)   (D32, D16 = number
//       of float32 and bfloat16 elements; E[w^2] = 1/3, E[x^2] = 1/3 for float32 and
//       7/12 for bfloat16, so s has unit variance)
//   regression: label = s;  logistic: label = 1 if s > 0 else 0.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "infeed/feature_spec.h"
#include "infeed/modeled_worker_pool.h"
#include "infeed/preprocess_cost.h"
#include "infeed/stage_times.h"
#include "infeed/tensor.h"

namespace tpusim::infeed {

enum class LabelKind { kNone, kRegression, kLogistic };

struct LabelConfig {
  LabelKind kind = LabelKind::kNone;
  std::string name = "label";
};

struct SyntheticConfig {
  uint64_t seed = 1;
  std::vector<FeatureSpec> features;
  LabelConfig label;
  int64_t int_range = 1000;         // int features take values in [0, int_range)
  double max_examples_per_sec = 0;  // per host; 0 = unlimited
  double cpu_us_per_example = 0;    // modeled preprocessing per example
  // Where the modeled preprocessing is waited out (input.cost_mode: emulate);
  // null: it is burnt as CPU on the clock (burn). Borrowed.
  ModeledWorkerPool* pool = nullptr;
};

// Outcome of a verification; `message` names the tensor, row, example id, element and
// both values at the first mismatch.
struct VerifyResult {
  bool ok = true;
  std::string message;
};

// The pure value function: what every example holds. Cheap to build (one teacher
// weight per float element), immutable, thread-safe.
class SyntheticData {
 public:
  // Throws Error for duplicate names, a label that collides with a feature, a label
  // without any float feature for the teacher, or int_range outside [1, 2^31].
  SyntheticData(uint64_t seed, std::vector<FeatureSpec> features, LabelConfig label, int64_t int_range = 1000);

  // The features followed by the label spec (float32, per-example shape []) if any.
  const std::vector<FeatureSpec>& specs() const { return specs_; }
  // Throws Error naming `name` if it is not one of specs().
  const FeatureSpec& spec(std::string_view name) const;

  // Value of one element as a double (bfloat16 widened exactly, ints converted).
  double ExpectedValue(std::string_view name, int64_t example_id, int64_t element) const;

  // A batch holding examples [first_id, first_id + rows).
  Batch Generate(int64_t first_id, int64_t rows) const;
  // Overwrites every tensor of `batch` (shaped [rows, ...] per specs()) with examples
  // [first_id, first_id + rows); lets callers reuse buffers across steps.
  void Fill(int64_t first_id, Batch& batch) const;
  // Same, row i holding example example_ids[i] (one id per row of `batch`).
  void Fill(std::span<const int64_t> example_ids, Batch& batch) const;
  Batch Generate(std::span<const int64_t> example_ids) const;

  // Checks every tensor of specs() in `batch` holds rows [first_id, first_id + n).
  [[nodiscard]] VerifyResult Verify(const Batch& batch, int64_t first_id) const;
  // Same, row i standing for example_ids[i].
  [[nodiscard]] VerifyResult Verify(const Batch& batch, std::span<const int64_t> example_ids) const;

  // Checks a piece of tensor `name` of a batch whose row 0 is example `batch_first_id`:
  // the piece starts at `begin` (one offset per dim, begin[0] = row offset; empty =
  // all zero) and has the piece tensor's own shape.
  [[nodiscard]] VerifyResult VerifySlice(std::string_view name, const Tensor& piece, int64_t batch_first_id,
                                         std::span<const int64_t> begin = {}) const;
  // Checks a piece whose row i stands for example_ids[i]; `inner_begin` has one offset
  // per non-batch dim (empty = all zero).
  [[nodiscard]] VerifyResult VerifyRows(std::string_view name, const Tensor& piece,
                                        std::span<const int64_t> example_ids,
                                        std::span<const int64_t> inner_begin = {}) const;

 private:
  void ValidateSpecs() const;
  void BuildTeacher();
  size_t IndexOf(std::string_view name) const;  // specs_.size() if absent
  // Row i of `tensor` gets example id_of(i).
  template <typename IdOf>
  void FillTensor(size_t feature, IdOf id_of, Tensor& tensor) const;
  // Writes elements [first, first + n) of example `example_id` of specs_[feature] to
  // `out` (the label: its one value).
  void FillRow(size_t feature, int64_t example_id, int64_t first, int64_t n, std::byte* out) const;
  // Checks one row of a piece element by element; `actual` points at its first byte.
  VerifyResult VerifyRowElements(size_t feature, std::string_view name, size_t row, int64_t example_id,
                                 const Shape& extent, std::span<const int64_t> inner_begin,
                                 const std::byte* actual) const;
  // Writes element `element` of example `example_id` of specs_[feature] to `out`.
  void WriteElement(size_t feature, int64_t example_id, int64_t element, std::byte* out) const;
  // The teacher reads a float feature's row kTeacherChunk elements at a time:
  // out = elements [first, first + out.size()) as floats (bfloat16 widened).
  static constexpr size_t kTeacherChunk = 256;
  static void FloatFeatureValues(uint64_t row_key, DType dtype, int64_t first, std::span<float> out);
  float Label(int64_t example_id) const;

  uint64_t seed_;
  LabelConfig label_;
  int64_t int_range_;
  std::vector<FeatureSpec> specs_;
  std::vector<uint64_t> keys_;                       // FeatureKey of each spec, hashed once
  std::vector<uint64_t> feature_seeds_;              // SyntheticFeatureSeed of each spec
  size_t label_index_;                               // index of the label in specs_, specs_.size() if none
  std::vector<std::vector<float>> teacher_weights_;  // per feature; empty if not float
  double teacher_scale_ = 0;
};

// A host's synthetic input pipeline: the pure values plus the modeled cost of a real
// pipeline (rate cap and work per example, infeed/preprocess_cost.h). Thread-safe.
class SyntheticSource {
 public:
  // Borrows `clock`, which must outlive the source. Throws Error like SyntheticData.
  SyntheticSource(SyntheticConfig config, Clock& clock);

  const SyntheticData& data() const { return data_; }
  const std::vector<FeatureSpec>& specs() const { return data_.specs(); }

  // Examples [first_id, first_id + rows), after waiting for the rate cap and paying
  // the modeled work.
  Batch Read(int64_t first_id, int64_t rows);
  // Examples example_ids[i] into row i of `batch`'s existing [rows, ...] tensors
  // (no allocation), the modeled work of each example x `cost_factor`
  // (faults.slow_hosts). Adds the generation's thread CPU (preprocessing_cpu_s)
  // and the modeled seconds paid (modeled_preprocessing_s) to `costs` if given.
  void ReadInto(std::span<const int64_t> example_ids, Batch& batch, double cost_factor = 1,
                StageCosts* costs = nullptr);

 private:
  SyntheticData data_;
  PreprocessCost cost_;
};

}  // namespace tpusim::infeed
