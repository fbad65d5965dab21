// The enumerated values of a run config (cluster.layout, input.source, a feature's
// kind, ...) and their spellings: one Spellings table per choice (base/spellings.h),
// used by the config reader to parse them and by anything that prints them, so a
// consumer switches on an enum and never compares a config string. Each table
// lists its spellings in alphabetical order, the order error messages name them.
#pragma once

#include <string_view>

#include "base/spellings.h"
#include "cluster/cross_replica_sum.h"
#include "cluster/device_assignment.h"
#include "infeed/dtype.h"
#include "infeed/image_ops.h"
#include "infeed/tf_example.h"
#include "infeed/tfrecord.h"

namespace tpusim::run {

// cluster.layout: one simulated TPU host per MPI rank, every host a thread of one
// rank, or cluster.hosts_per_rank hosts per rank (docs/architecture.md).
enum class ClusterLayout { kRanks, kThreads, kPacked };
// input.source: where a host's examples come from.
enum class InputSource { kSynthetic, kFiles, kCached, kTfRecord };
// input.features.F.flip: whether a decoded image is flipped at random.
enum class FlipMode { kNone, kRandom };
// train.accumulator: Lingvo's GradientAggregationOptimizer or its Accumulator.
enum class Accumulator { kGradientAggregation, kLingvo };
// dcn.overlap: whether the pod's all-reduce between slices adds to its step (none)
// or hides under the rest of it (full: the step is the longer of the two).
enum class DcnOverlap { kFull, kNone };

inline constexpr Spellings<cluster::DeviceOrderMode, 3> kOrderSpellings{{{"auto", cluster::DeviceOrderMode::kAuto},
                                                                         {"mesh", cluster::DeviceOrderMode::kMesh},
                                                                         {"ring", cluster::DeviceOrderMode::kRing}}};
inline constexpr Spellings<cluster::RingRule, 2> kRingRuleSpellings{
    {{"current", cluster::RingRule::kCurrent}, {"legacy_two_core", cluster::RingRule::kLegacyTwoCore}}};
inline constexpr Spellings<ClusterLayout, 3> kLayoutSpellings{
    {{"packed", ClusterLayout::kPacked}, {"ranks", ClusterLayout::kRanks}, {"threads", ClusterLayout::kThreads}}};
inline constexpr Spellings<InputSource, 4> kSourceSpellings{{{"cached", InputSource::kCached},
                                                             {"files", InputSource::kFiles},
                                                             {"synthetic", InputSource::kSynthetic},
                                                             {"tfrecord", InputSource::kTfRecord}}};
inline constexpr Spellings<infeed::FeatureKind, 3> kKindSpellings{{{"bytes", infeed::FeatureKind::kBytes},
                                                                   {"float", infeed::FeatureKind::kFloat},
                                                                   {"int64", infeed::FeatureKind::kInt64}}};
inline constexpr Spellings<infeed::CropMode, 3> kCropSpellings{
    {{"center", infeed::CropMode::kCenter}, {"none", infeed::CropMode::kNone}, {"random", infeed::CropMode::kRandom}}};
inline constexpr Spellings<FlipMode, 2> kFlipSpellings{{{"none", FlipMode::kNone}, {"random", FlipMode::kRandom}}};
inline constexpr Spellings<infeed::TfRecordCompression, 3> kCompressionSpellings{
    {{"gzip", infeed::TfRecordCompression::kGzip},
     {"none", infeed::TfRecordCompression::kNone},
     {"zlib", infeed::TfRecordCompression::kZlib}}};
inline constexpr Spellings<Accumulator, 2> kAccumulatorSpellings{
    {{"gradient_aggregation", Accumulator::kGradientAggregation}, {"lingvo", Accumulator::kLingvo}}};
inline constexpr Spellings<DcnOverlap, 2> kDcnOverlapSpellings{
    {{"full", DcnOverlap::kFull}, {"none", DcnOverlap::kNone}}};
inline constexpr Spellings<cluster::CrsAlgorithm, 2> kCrsSpellings{
    {{"mpi", cluster::CrsAlgorithm::kMpi}, {"ring", cluster::CrsAlgorithm::kRing}}};
// Every dtype a feature may have, and the ones each tfrecord feature kind may give.
inline constexpr Spellings<infeed::DType, 6> kDTypeSpellings{{{"bfloat16", infeed::DType::kBFloat16},
                                                              {"float32", infeed::DType::kFloat32},
                                                              {"int32", infeed::DType::kInt32},
                                                              {"int64", infeed::DType::kInt64},
                                                              {"int8", infeed::DType::kInt8},
                                                              {"uint8", infeed::DType::kUInt8}}};
inline constexpr Spellings<infeed::DType, 3> kImageDTypeSpellings{
    {{"bfloat16", infeed::DType::kBFloat16}, {"float32", infeed::DType::kFloat32}, {"uint8", infeed::DType::kUInt8}}};
inline constexpr Spellings<infeed::DType, 3> kInt64DTypeSpellings{
    {{"float32", infeed::DType::kFloat32}, {"int32", infeed::DType::kInt32}, {"int64", infeed::DType::kInt64}}};
inline constexpr Spellings<infeed::DType, 2> kFloatDTypeSpellings{
    {{"bfloat16", infeed::DType::kBFloat16}, {"float32", infeed::DType::kFloat32}}};

// The spelling a config gives each value, for messages and reports.
inline std::string_view SpellingOf(ClusterLayout v) { return tpusim::SpellingOf(kLayoutSpellings, v); }
inline std::string_view SpellingOf(InputSource v) { return tpusim::SpellingOf(kSourceSpellings, v); }
inline std::string_view SpellingOf(infeed::FeatureKind v) { return tpusim::SpellingOf(kKindSpellings, v); }
inline std::string_view SpellingOf(infeed::CropMode v) { return tpusim::SpellingOf(kCropSpellings, v); }
inline std::string_view SpellingOf(FlipMode v) { return tpusim::SpellingOf(kFlipSpellings, v); }
inline std::string_view SpellingOf(Accumulator v) { return tpusim::SpellingOf(kAccumulatorSpellings, v); }
inline std::string_view SpellingOf(DcnOverlap v) { return tpusim::SpellingOf(kDcnOverlapSpellings, v); }
inline std::string_view SpellingOf(cluster::CrsAlgorithm v) { return tpusim::SpellingOf(kCrsSpellings, v); }
inline std::string_view SpellingOf(cluster::RingRule v) { return tpusim::SpellingOf(kRingRuleSpellings, v); }

}  // namespace tpusim::run
