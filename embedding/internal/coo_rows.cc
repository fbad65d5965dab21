#include "embedding/internal/coo_rows.h"

#include <atomic>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

namespace tpusim::embedding::internal {
namespace {

// The build targets baseline x86-64, whose SSE2 has no 64-bit compare, so the
// portable kernel is also compiled for AVX2 and the loader picks the variant the
// CPU runs (GCC's target_clones): 0.08 -> 0.13 of memcpy at 32 ids (BM_SparseEnqueue).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TPUSIM_ALSO_FOR_AVX2 __attribute__((target_clones("avx2", "default")))
#else
#define TPUSIM_ALSO_FOR_AVX2
#endif

// One row of ids: how many are real, whether they all lead the row (padding only
// after them, the layout of TF's dense padded ids and of tpusim's synthetic ids: k
// real positions sum to k(k-1)/2 only when they are 0..k-1), and whether any lies
// outside [-1, vocab). Branch-free (an unsigned compare per id) so it vectorises.
struct RowCount {
  int64_t real = 0;
  bool leading = false;
};

inline RowCount CountRow(const int64_t* row, int64_t max_ids, uint64_t limit, uint64_t& out_of_range) {
  int64_t real = 0, position_sum = 0;
  for (int64_t p = 0; p < max_ids; ++p) {
    const uint64_t shifted = static_cast<uint64_t>(row[p]) + 1;  // id + 1 must be <= vocab
    out_of_range |= static_cast<uint64_t>(shifted > limit);
    const int64_t is_real = static_cast<int64_t>(shifted != 0);
    real += is_real;
    position_sum += p & -is_real;  // a mask, not a select: GCC 12 vectorises only this
  }
  return {real, position_sum == real * (real - 1) / 2};
}

typedef int64_t I64x4 __attribute__((vector_size(32)));

// A row written whole: all max_ids ids, weights and coordinates, in fixed-length
// loops that vectorise (no call or tail per row). Only its leading real entries
// count: the caller advances by their number, so the next row overwrites the rest.
inline void WriteWholeRow(const int64_t* ids, const float* weights, int64_t r, int64_t max_ids, CooOut out) {
  for (int64_t p = 0; p < max_ids; ++p) out.index[p] = ids[p];
  if (weights != nullptr) {
    for (int64_t p = 0; p < max_ids; ++p) out.weight[p] = weights[p];
  } else {
    for (int64_t p = 0; p < max_ids; ++p) out.weight[p] = 1.0f;
  }
  // (r, 0), (r, 1), ...: two coordinate pairs per vector, the positions counting up.
  I64x4 pairs = {r, 0, r, 1};
  int64_t* sample = out.sample;
  for (int64_t p = 0; p < max_ids; p += 2, sample += 4, pairs += I64x4{0, 2, 0, 2}) {
    std::memcpy(sample, &pairs, sizeof(pairs));
  }
}

// The coordinates, id and weight of each real id of one row, id by id.
inline void WriteRowById(const int64_t* ids, const float* weights, int64_t r, int64_t max_ids, CooOut out) {
  for (int64_t p = 0; p < max_ids; ++p) {
    if (ids[p] == -1) continue;
    *out.sample++ = r;
    *out.sample++ = p;
    *out.index++ = ids[p];
    *out.weight++ = weights != nullptr ? weights[p] : 1.0f;
  }
}

CooOut At(CooOut out, int64_t entry) { return {out.sample + 2 * entry, out.index + entry, out.weight + entry}; }

// One pass over the piece: each row is counted and written whole, then rewritten
// id by id if its real ids do not lead it (a row's count is known before the next
// row is written). One pass reads each id once, and a row's writes need not wait
// for a second pass: 88 -> 74 us at 32 ids, 376 -> 290 us at 128 (BM_SparseEnqueue,
// 3 Dec).
TPUSIM_ALSO_FOR_AVX2
int64_t WritePortable(const int64_t* ids, const float* weights, int64_t rows, int64_t max_ids, uint64_t limit,
                      CooOut out, uint64_t& out_of_range) {
  int64_t nnz = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t* row = ids + r * max_ids;
    const float* row_weights = weights != nullptr ? weights + r * max_ids : nullptr;
    const RowCount count = CountRow(row, max_ids, limit, out_of_range);
    if (count.leading) {
      WriteWholeRow(row, row_weights, r, max_ids, At(out, nnz));
    } else {
      WriteRowById(row, row_weights, r, max_ids, At(out, nnz));
    }
    nnz += count.real;
  }
  return nnz;
}

#if defined(__x86_64__) && defined(__GNUC__)
#define TPUSIM_COO_AVX512 1
#define TPUSIM_AVX512_TARGET __attribute__((target("avx512f,avx512vl,avx512dq,popcnt")))

std::atomic<bool> portable_only{false};

bool HasAvx512() {
  static const bool has =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  return has && !portable_only.load(std::memory_order_relaxed);
}

// Each row in runs of 8 ids (a row's last run masked): the real ones (id + 1 != 0)
// compressed to the front of a vector and stored whole at the next entry, with
// their weights and (row, position) pairs; the entry count advances by the real
// ones alone, so the next run overwrites the rest. A run whose real ids lead it
// (nearly all: padding trails a row) is already compressed and is stored as it is.
// No branch per id.
class Avx512Rows {
 public:
  TPUSIM_AVX512_TARGET Avx512Rows(const float* weights, int64_t max_ids, uint64_t limit, CooOut out)
      : weights_(weights), max_ids_(max_ids), out_(out), vocab_(_mm512_set1_epi64(static_cast<long long>(limit))) {}

  TPUSIM_AVX512_TARGET int64_t Write(const int64_t* ids, int64_t rows) {
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t* row = ids + r * max_ids_;
      const float* row_weights = weights_ != nullptr ? weights_ + r * max_ids_ : nullptr;
      const __m512i row_vector = _mm512_set1_epi64(r);
      __m512i positions = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
      int64_t p = 0;
      for (; p + 8 <= max_ids_; p += 8, positions = _mm512_add_epi64(positions, _mm512_set1_epi64(8))) {
        Run(row + p, row_weights, p, row_vector, positions, 0xff);
      }
      if (p < max_ids_) {
        Run(row + p, row_weights, p, row_vector, positions, static_cast<__mmask8>((1u << (max_ids_ - p)) - 1));
      }
    }
    return nnz_;
  }

  // Whether some id was outside [-1, vocab): id + 1 above vocab, unsigned.
  TPUSIM_AVX512_TARGET bool out_of_range() const { return _mm512_cmpgt_epu64_mask(largest_, vocab_) != 0; }

 private:
  TPUSIM_AVX512_TARGET inline __attribute__((always_inline)) void Run(const int64_t* ids, const float* weights,
                                                                      int64_t p, __m512i row_vector, __m512i positions,
                                                                      __mmask8 in) {
    const __m512i id = _mm512_maskz_loadu_epi64(in, ids);
    const __m512i shifted = _mm512_add_epi64(id, _mm512_set1_epi64(1));
    // Lanes not loaded are 1: in range. The masked form (every lane) is the plain
    // max without the unmasked one's undefined source, which GCC 12 reports as
    // maybe-uninitialized.
    largest_ = _mm512_mask_max_epu64(largest_, static_cast<__mmask8>(0xff), largest_, shifted);
    const __mmask8 real = _mm512_mask_test_epi64_mask(in, shifted, shifted);
    const __m256 weight = weights != nullptr ? _mm256_maskz_loadu_ps(in, weights + p) : _mm256_set1_ps(1.0f);
    int64_t* sample = out_.sample + 2 * nnz_;
    if ((real & (real + 1)) == 0) {
      _mm512_storeu_si512(out_.index + nnz_, id);
      _mm256_storeu_ps(out_.weight + nnz_, weight);
      StorePairs(sample, row_vector, positions);
      nnz_ += __builtin_popcount(real);
      return;
    }
    _mm512_storeu_si512(out_.index + nnz_, _mm512_maskz_compress_epi64(real, id));
    _mm256_storeu_ps(out_.weight + nnz_, _mm256_maskz_compress_ps(real, weight));
    StorePairs(sample, row_vector, _mm512_maskz_compress_epi64(real, positions));
    nnz_ += __builtin_popcount(real);
  }

  // (r, p0) .. (r, p7) from the row and 8 positions.
  TPUSIM_AVX512_TARGET static inline __attribute__((always_inline)) void StorePairs(int64_t* sample, __m512i row_vector,
                                                                                    __m512i positions) {
    _mm512_storeu_si512(sample,
                        _mm512_permutex2var_epi64(row_vector, _mm512_set_epi64(11, 0, 10, 0, 9, 0, 8, 0), positions));
    _mm512_storeu_si512(sample + 8,
                        _mm512_permutex2var_epi64(row_vector, _mm512_set_epi64(15, 0, 14, 0, 13, 0, 12, 0), positions));
  }

  const float* weights_;
  int64_t max_ids_;
  CooOut out_;
  __m512i vocab_;
  __m512i largest_ = _mm512_setzero_si512();
  int64_t nnz_ = 0;
};

TPUSIM_AVX512_TARGET
int64_t WriteAvx512(const int64_t* ids, const float* weights, int64_t rows, int64_t max_ids, uint64_t limit, CooOut out,
                    uint64_t& out_of_range) {
  Avx512Rows writer(weights, max_ids, limit, out);
  const int64_t nnz = writer.Write(ids, rows);
  out_of_range |= writer.out_of_range() ? 1 : 0;
  return nnz;
}
#endif

}  // namespace

bool UsePortableCooRows(bool portable) {
#ifdef TPUSIM_COO_AVX512
  portable_only.store(portable);
  return portable || HasAvx512();
#else
  return portable;
#endif
}

int64_t WriteCooRows(const int64_t* ids, const float* weights, int64_t rows, int64_t max_ids, int64_t vocab, CooOut out,
                     bool* out_of_range) {
  const auto limit = static_cast<uint64_t>(vocab);
  uint64_t bad = 0;
#ifdef TPUSIM_COO_AVX512
  const int64_t nnz = HasAvx512() ? WriteAvx512(ids, weights, rows, max_ids, limit, out, bad)
                                  : WritePortable(ids, weights, rows, max_ids, limit, out, bad);
#else
  const int64_t nnz = WritePortable(ids, weights, rows, max_ids, limit, out, bad);
#endif
  *out_of_range = bad != 0;
  return nnz;
}

}  // namespace tpusim::embedding::internal
