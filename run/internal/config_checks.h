// What the run config reader's files share (run/run_config.cc, run/run_config_input.cc):
// the bounds every value is checked against, the range and name checks, the
// typed parse of an enumerated choice, and the section readers one file defines
// and the other calls. Every check throws Error "<file>: <key>: ..." naming the
// key, the value and what is allowed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/spellings.h"
#include "run/config_node.h"
#include "run/run_config.h"

namespace tpusim::run::internal {

// Upper bounds that keep every size computed from the config inside 64 bits and
// every thread pool and wait finite; the run's memory estimate bounds the rest.
inline constexpr int64_t kMaxCount = int64_t{1} << 40;
inline constexpr int kMaxParallelism = 256;
inline constexpr int kMaxQueueDepth = 1 << 16;
inline constexpr int kMaxClusterExtent = 1 << 22;
inline constexpr double kMaxMicros = 3.6e9;  // one hour
inline constexpr size_t kMaxNameLength = 128;
inline constexpr int64_t kMaxEmbeddingWidth = 1 << 20;

// Throws unless lo <= value <= hi.
void RequireRange(ConfigNode& node, const std::string& key, int64_t value, int64_t lo, int64_t hi);
// Throws unless 1 <= value <= kMaxCount.
void RequirePositive(ConfigNode& node, const std::string& key, int64_t value);
// Throws unless lo <= value <= hi (NaN fails).
void RequireRealRange(ConfigNode& node, const std::string& key, double value, double lo, double hi);
// Names become file names (FEATURE.npy in a dataset, embedding.TABLE.npy under
// --params-out) and JSON keys, so they are kept to a portable set; throws otherwise.
void RequireName(ConfigNode& node, const std::string& name);

// The value `text` spells for `key` of `node`; throws Error "<file>: <key>: '<text>'
// is not one of <spellings>" otherwise (spellings in table order).
template <typename Enum, size_t N>
Enum ParseChoice(const ConfigNode& node, const std::string& key, const std::string& text,
                 const Spellings<Enum, N>& spellings) {
  return ParseSpelling(spellings, text, node.source() + ": " + node.KeyPath(key));
}

// Reads `input:` (run/run_config_input.cc). Throws Error naming the key on a bad value.
InputConfig ParseInput(ConfigNode node);

}  // namespace tpusim::run::internal
