#include "infeed/synthetic_source.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <set>

#include <fmt/ranges.h>

#include "base/error.h"
#include "base/synthetic.h"
#include "infeed/cpu_timer.h"
#include "infeed/internal/synthetic_rows.h"

namespace tpusim::infeed {
namespace {

// The teacher's weights use an example id no real example has.
constexpr int64_t kTeacherExampleId = -1;

double DecodeElement(DType dtype, const std::byte* p) {
  switch (dtype) {
    case DType::kFloat32: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DType::kBFloat16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return BFloat16ToFloat(v);
    }
    case DType::kInt32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DType::kInt64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<double>(v);
    }
    case DType::kUInt8:
      return static_cast<double>(std::to_integer<uint8_t>(*p));
    case DType::kInt8:
      return static_cast<double>(static_cast<int8_t>(std::to_integer<uint8_t>(*p)));
  }
  return 0;
}

// Advances `pos` over `extent` in row-major order; false after the last position.
bool NextIndex(std::vector<int64_t>& pos, const Shape& extent) {
  for (size_t d = pos.size(); d-- > 0;) {
    if (++pos[d] < extent[d]) return true;
    pos[d] = 0;
  }
  return false;
}

// Row-major element index inside one example of shape `dims` at `begin + pos`.
int64_t ElementIndex(const Shape& dims, std::span<const int64_t> begin, const std::vector<int64_t>& pos) {
  int64_t index = 0;
  for (size_t d = 0; d < dims.size(); ++d) {
    index = index * dims[d] + (begin.empty() ? 0 : begin[d]) + pos[d];
  }
  return index;
}

VerifyResult Mismatch(std::string message) { return {false, std::move(message)}; }

// True if `piece` can be `rows` examples of `spec` cut at `inner_begin` on the
// per-example dims: same dtype and rank, and the slice stays inside the example.
bool PieceFits(const FeatureSpec& spec, const Tensor& piece, size_t rows, std::span<const int64_t> inner_begin) {
  const Shape& shape = piece.shape();
  if (piece.dtype() != spec.dtype || shape.size() != spec.shape.size() + 1) return false;
  if (shape[0] != static_cast<int64_t>(rows)) return false;
  if (!inner_begin.empty() && inner_begin.size() != spec.shape.size()) return false;
  for (size_t d = 0; d < spec.shape.size(); ++d) {
    int64_t begin = inner_begin.empty() ? 0 : inner_begin[d];
    if (begin < 0 || begin + shape[d + 1] > spec.shape[d]) return false;
  }
  return true;
}

}  // namespace

SyntheticData::SyntheticData(uint64_t seed, std::vector<FeatureSpec> features, LabelConfig label, int64_t int_range)
    : seed_(seed), label_(std::move(label)), int_range_(int_range), specs_(std::move(features)) {
  if (int_range_ <= 0 || int_range_ > (int64_t{1} << 31)) {
    Fail("input.int_range: must be in [1, 2^31], got {}", int_range_);
  }
  label_index_ = label_.kind != LabelKind::kNone ? specs_.size() : specs_.size() + 1;
  if (label_.kind != LabelKind::kNone) specs_.push_back({label_.name, DType::kFloat32, {}});
  for (const FeatureSpec& spec : specs_) keys_.push_back(FeatureKey(spec.name));
  for (uint64_t key : keys_) feature_seeds_.push_back(SyntheticFeatureSeed(seed_, key));
  ValidateSpecs();
  BuildTeacher();
}

void SyntheticData::ValidateSpecs() const {
  std::set<std::string_view> names;
  for (const FeatureSpec& spec : specs_) {
    if (!names.insert(spec.name).second) Fail("input.features: duplicate feature '{}'", spec.name);
    for (int64_t dim : spec.shape) {
      if (dim < 0) Fail("input.features.{}: shape {} has a negative dim", spec.name, ShapeToString(spec.shape));
    }
  }
}

void SyntheticData::BuildTeacher() {
  teacher_weights_.resize(specs_.size());
  int64_t float_elements = 0, bfloat16_elements = 0;
  for (size_t f = 0; f < specs_.size(); ++f) {
    const FeatureSpec& spec = specs_[f];
    if (f == label_index_ || !IsFloating(spec.dtype)) continue;
    for (int64_t j = 0; j < NumElements(spec.shape); ++j) {
      teacher_weights_[f].push_back(BitsToUnitFloat(SyntheticBits(seed_, kTeacherExampleId, keys_[f], j)));
    }
    float_elements += NumElements(spec.shape);
    if (spec.dtype == DType::kBFloat16) bfloat16_elements += NumElements(spec.shape);
  }
  if (label_.kind != LabelKind::kNone && float_elements == 0) {
    Fail("input.label: the teacher needs at least one float feature element, the features have none");
  }
  // 1 / sqrt(D32 / 9 + D16 * 7 / 36), the file comment's scale, written so that a
  // float32-only teacher keeps the value 3 / sqrt(D) exactly.
  const double weighted =
      static_cast<double>(float_elements - bfloat16_elements) + 1.75 * static_cast<double>(bfloat16_elements);
  teacher_scale_ = float_elements > 0 ? 3.0 / std::sqrt(weighted) : 0;
}

size_t SyntheticData::IndexOf(std::string_view name) const {
  size_t f = 0;
  while (f < specs_.size() && specs_[f].name != name) ++f;
  return f;
}

const FeatureSpec& SyntheticData::spec(std::string_view name) const {
  size_t f = IndexOf(name);
  if (f == specs_.size()) Fail("synthetic input has no feature '{}'", name);
  return specs_[f];
}

void SyntheticData::FloatFeatureValues(uint64_t row_key, DType dtype, int64_t first, std::span<float> out) {
  const auto n = static_cast<int64_t>(out.size());
  if (dtype != DType::kBFloat16) return internal::FillFloat32Row(row_key, first, n, out.data());
  uint16_t bits[kTeacherChunk];
  internal::FillBFloat16Row(row_key, first, n, bits);
  for (size_t k = 0; k < out.size(); ++k) out[k] = std::bit_cast<float>(static_cast<uint32_t>(bits[k]) << 16);
}

float SyntheticData::Label(int64_t example_id) const {
  // Summed in double in a fixed order, so every rank computes the same float; the
  // feature values are made a chunk of a row at a time, as the row kernels fill them.
  double s = 0;
  float x[kTeacherChunk];
  for (size_t f = 0; f < teacher_weights_.size(); ++f) {
    const std::vector<float>& w = teacher_weights_[f];
    uint64_t row_key = SyntheticRowKey(feature_seeds_[f], example_id);
    for (size_t first = 0; first < w.size(); first += kTeacherChunk) {
      const std::span<float> chunk(x, std::min<size_t>(kTeacherChunk, w.size() - first));
      FloatFeatureValues(row_key, specs_[f].dtype, static_cast<int64_t>(first), chunk);
      for (size_t k = 0; k < chunk.size(); ++k) s += static_cast<double>(w[first + k]) * chunk[k];
    }
  }
  s *= teacher_scale_;
  if (label_.kind == LabelKind::kLogistic) return s > 0 ? 1.0f : 0.0f;
  return static_cast<float>(s);
}

void SyntheticData::FillRow(size_t feature, int64_t example_id, int64_t first, int64_t n, std::byte* out) const {
  if (feature == label_index_) {
    float v = Label(example_id);
    std::memcpy(out, &v, 4);
    return;
  }
  uint64_t key = SyntheticRowKey(feature_seeds_[feature], example_id);
  auto range = static_cast<uint64_t>(int_range_);
  switch (specs_[feature].dtype) {
    case DType::kFloat32:
      return internal::FillFloat32Row(key, first, n, reinterpret_cast<float*>(out));
    case DType::kBFloat16:
      return internal::FillBFloat16Row(key, first, n, reinterpret_cast<uint16_t*>(out));
    case DType::kInt32:
      return internal::FillInt32Row(key, first, n, range, reinterpret_cast<int32_t*>(out));
    case DType::kInt64:
      return internal::FillInt64Row(key, first, n, range, reinterpret_cast<int64_t*>(out));
    case DType::kUInt8:
    case DType::kInt8:
      return internal::FillByteRow(key, first, n, reinterpret_cast<uint8_t*>(out));
  }
}

void SyntheticData::WriteElement(size_t feature, int64_t example_id, int64_t element, std::byte* out) const {
  FillRow(feature, example_id, element, 1, out);
}

double SyntheticData::ExpectedValue(std::string_view name, int64_t example_id, int64_t element) const {
  const FeatureSpec& s = spec(name);
  std::byte buffer[8];
  WriteElement(IndexOf(name), example_id, element, buffer);
  return DecodeElement(s.dtype, buffer);
}

template <typename IdOf>
void SyntheticData::FillTensor(size_t feature, IdOf id_of, Tensor& tensor) const {
  const FeatureSpec& spec = specs_[feature];
  if (tensor.dtype() != spec.dtype || tensor.shape().empty() || tensor.shape() != BatchShape(spec, tensor.shape()[0])) {
    Fail("tensor '{}' is {} {}, synthetic feature is {} [rows, {}]", spec.name, DTypeName(tensor.dtype()),
         ShapeToString(tensor.shape()), DTypeName(spec.dtype), fmt::join(spec.shape, ", "));
  }
  size_t row_bytes = ExampleBytes(spec);
  int64_t per_example = NumElements(spec.shape);
  std::byte* out = tensor.bytes().data();
  for (int64_t row = 0; row < tensor.shape()[0]; ++row, out += row_bytes) {
    FillRow(feature, id_of(row), 0, per_example, out);
  }
}

void SyntheticData::Fill(int64_t first_id, Batch& batch) const {
  for (size_t f = 0; f < specs_.size(); ++f) {
    FillTensor(
        f, [first_id](int64_t row) { return first_id + row; }, batch.at(specs_[f].name));
  }
}

void SyntheticData::Fill(std::span<const int64_t> example_ids, Batch& batch) const {
  for (size_t f = 0; f < specs_.size(); ++f) {
    Tensor& tensor = batch.at(specs_[f].name);
    if (tensor.shape().empty() || tensor.shape()[0] != static_cast<int64_t>(example_ids.size())) {
      Fail("tensor '{}' has {} rows but {} example ids were given", specs_[f].name,
           tensor.shape().empty() ? 0 : tensor.shape()[0], example_ids.size());
    }
    FillTensor(
        f, [example_ids](int64_t row) { return example_ids[static_cast<size_t>(row)]; }, tensor);
  }
}

Batch SyntheticData::Generate(std::span<const int64_t> example_ids) const {
  Batch batch = MakeBatch(specs_, static_cast<int64_t>(example_ids.size()));
  Fill(example_ids, batch);
  return batch;
}

Batch SyntheticData::Generate(int64_t first_id, int64_t rows) const {
  Batch batch = MakeBatch(specs_, rows);
  Fill(first_id, batch);
  return batch;
}

VerifyResult SyntheticData::Verify(const Batch& batch, int64_t first_id) const {
  for (const FeatureSpec& s : specs_) {
    if (!batch.Contains(s.name)) return Mismatch(fmt::format("batch has no tensor '{}'", s.name));
    VerifyResult r = VerifySlice(s.name, batch.at(s.name), first_id);
    if (!r.ok) return r;
  }
  return {};
}

VerifyResult SyntheticData::Verify(const Batch& batch, std::span<const int64_t> example_ids) const {
  for (const FeatureSpec& s : specs_) {
    if (!batch.Contains(s.name)) return Mismatch(fmt::format("batch has no tensor '{}'", s.name));
    VerifyResult r = VerifyRows(s.name, batch.at(s.name), example_ids);
    if (!r.ok) return r;
  }
  return {};
}

VerifyResult SyntheticData::VerifySlice(std::string_view name, const Tensor& piece, int64_t batch_first_id,
                                        std::span<const int64_t> begin) const {
  if (piece.shape().empty()) return Mismatch(fmt::format("tensor '{}' is a scalar, expected [rows, ...]", name));
  if (!begin.empty() && begin.size() != piece.shape().size()) {
    return Mismatch(fmt::format("tensor '{}': {} begin offsets for rank {}", name, begin.size(), piece.shape().size()));
  }
  int64_t row0 = batch_first_id + (begin.empty() ? 0 : begin[0]);
  std::vector<int64_t> ids(static_cast<size_t>(piece.shape()[0]));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = row0 + static_cast<int64_t>(i);
  return VerifyRows(name, piece, ids, begin.empty() ? begin : begin.subspan(1));
}

VerifyResult SyntheticData::VerifyRows(std::string_view name, const Tensor& piece, std::span<const int64_t> example_ids,
                                       std::span<const int64_t> inner_begin) const {
  size_t feature = IndexOf(name);
  if (feature == specs_.size()) return Mismatch(fmt::format("no synthetic feature '{}'", name));
  const FeatureSpec& s = specs_[feature];
  if (!PieceFits(s, piece, example_ids.size(), inner_begin)) {
    return Mismatch(fmt::format("tensor '{}' is {} {} for {} rows at inner offset [{}]; feature is {} [rows, {}]", name,
                                DTypeName(piece.dtype()), ShapeToString(piece.shape()), example_ids.size(),
                                fmt::join(inner_begin, ", "), DTypeName(s.dtype), fmt::join(s.shape, ", ")));
  }
  Shape extent(piece.shape().begin() + 1, piece.shape().end());
  if (NumElements(extent) == 0) return {};
  const size_t piece_row_bytes = static_cast<size_t>(NumElements(extent)) * DTypeSize(s.dtype);
  const bool whole_rows = extent == s.shape;  // PieceFits: then every inner offset is 0
  std::vector<std::byte> expected(whole_rows ? piece_row_bytes : 0);
  for (size_t row = 0; row < example_ids.size(); ++row) {
    const std::byte* actual = piece.bytes().data() + row * piece_row_bytes;
    if (whole_rows) {
      // Fast path: a whole example generated at once; elements only on a mismatch.
      FillRow(feature, example_ids[row], 0, NumElements(extent), expected.data());
      if (std::memcmp(expected.data(), actual, piece_row_bytes) == 0) continue;
    }
    VerifyResult r = VerifyRowElements(feature, name, row, example_ids[row], extent, inner_begin, actual);
    if (!r.ok) return r;
  }
  return {};
}

VerifyResult SyntheticData::VerifyRowElements(size_t feature, std::string_view name, size_t row, int64_t example_id,
                                              const Shape& extent, std::span<const int64_t> inner_begin,
                                              const std::byte* actual) const {
  // The piece's innermost dimension is contiguous in the example: one run per position
  // of the outer dimensions, made at once and searched element by element only when it
  // differs.
  const FeatureSpec& s = specs_[feature];
  const size_t element_bytes = DTypeSize(s.dtype);
  const int64_t run = extent.empty() ? 1 : extent.back();
  const size_t run_bytes = static_cast<size_t>(run) * element_bytes;
  Shape outer = extent;
  if (!outer.empty()) outer.back() = 1;
  std::vector<std::byte> expected(run_bytes);
  std::vector<int64_t> pos(extent.size(), 0);
  do {
    const int64_t first = ElementIndex(s.shape, inner_begin, pos);
    FillRow(feature, example_id, first, run, expected.data());
    if (std::memcmp(expected.data(), actual, run_bytes) != 0) {
      int64_t k = 0;
      while (std::memcmp(expected.data() + static_cast<size_t>(k) * element_bytes,
                         actual + static_cast<size_t>(k) * element_bytes, element_bytes) == 0)
        ++k;
      if (!pos.empty()) pos.back() = k;
      const std::byte* want = expected.data() + static_cast<size_t>(k) * element_bytes;
      return Mismatch(
          fmt::format("tensor '{}' row {} (example {}) element {} (index [{}] of the piece): expected {}, got {}", name,
                      row, example_id, first + k, fmt::join(pos, ", "), DecodeElement(s.dtype, want),
                      DecodeElement(s.dtype, actual + static_cast<size_t>(k) * element_bytes)));
    }
    actual += run_bytes;
  } while (NextIndex(pos, outer));
  return {};
}

SyntheticSource::SyntheticSource(SyntheticConfig config, Clock& clock)
    : data_(config.seed, std::move(config.features), std::move(config.label), config.int_range),
      cost_(config.cpu_us_per_example, config.max_examples_per_sec, clock, config.pool) {}

Batch SyntheticSource::Read(int64_t first_id, int64_t rows) {
  cost_.Pay(rows);
  return data_.Generate(first_id, rows);
}

void SyntheticSource::ReadInto(std::span<const int64_t> example_ids, Batch& batch, double cost_factor,
                               StageCosts* costs) {
  const double modeled_s = cost_.Pay(static_cast<int64_t>(example_ids.size()), cost_factor);
  ScopedCpuTimer generation(costs ? &costs->preprocessing_cpu_s : nullptr);
  data_.Fill(example_ids, batch);
  if (costs) costs->modeled_preprocessing_s += modeled_s;
}

}  // namespace tpusim::infeed
