// The inner loop of the host's embedding enqueue (embedding/sparse_enqueue.h): one
// piece of dense ids [rows, max_ids] (-1 = padding) into COO — every real id in
// row-major order with its (row, position) pair and its weight. Three kernels define
// the same output: the portable one (rows counted, then copied whole when their real
// ids lead them, id by id otherwise) and, where the CPU has them, one for AVX-512
// that compresses each run of 8 ids into place (VPCOMPRESSQ) whatever its padding
// and one for AVX2 that does the same with runs of 4 and a table of permutations.
#pragma once

#include <algorithm>
#include <cstdint>

namespace tpusim::embedding::internal {

// Where a piece's entries go; each buffer holds CooBound(rows, max_ids) entries
// (sample: twice that many values).
struct CooOut {
  int64_t* sample;  // (row, position) pairs
  int64_t* index;
  float* weight;
};

// Entries a piece's buffers need: every id real, plus the slack the kernels write
// past the last real entry (whole rows: max_ids + 1, coordinates going in pairs of
// positions; runs of 8 ids: 8; of 4: 4).
inline int64_t CooBound(int64_t rows, int64_t max_ids) { return rows * max_ids + std::max<int64_t>(max_ids + 1, 8); }

// Writes the piece's real entries to `out` and returns their number. Sets
// *out_of_range when an id lies outside [-1, vocab) (the entries are then
// unspecified: the caller fails the step). `weights` is null for all-1 weights.
int64_t WriteCooRows(const int64_t* ids, const float* weights, int64_t rows, int64_t max_ids, int64_t vocab, CooOut out,
                     bool* out_of_range);

// The kernels, fastest first; kBest (the default) is the fastest the CPU runs.
enum class CooKernel { kBest, kAvx512, kAvx2, kPortable };

// Tests: WriteCooRows runs `kernel` from now on. Returns false (and changes
// nothing) when the CPU cannot run it.
bool UseCooKernel(CooKernel kernel);

}  // namespace tpusim::embedding::internal
