#include "embedding/internal/coo_rows.h"

#include <atomic>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

namespace tpusim::embedding::internal {
namespace {

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
#define TPUSIM_COO_X86 1
#define TPUSIM_AVX512_TARGET __attribute__((target("avx512f,avx512vl,avx512dq,popcnt")))
#define TPUSIM_AVX2_TARGET __attribute__((target("avx2,popcnt")))

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

// VPCOMPRESSQ by table, for AVX2: for each mask of padding lanes in a run of 4
// ids, the 32-bit lanes that bring the real ids (and their weights) to the front,
// the real positions as (0, k) pairs to add to (row, first position), and twice
// the number of real ids (the kernel counts int64 slots of `sample`). An entry is
// 128 bytes, so its address is the mask shifted.
struct Avx2Run {
  alignas(32) int32_t id_lanes[8];
  int64_t pairs[8];
  int32_t weight_lanes[4];
  int64_t slots;
};

struct Avx2Runs {
  Avx2Run run[16];
};

constexpr Avx2Runs MakeAvx2Runs() {
  Avx2Runs table{};
  for (int padding = 0; padding < 16; ++padding) {
    Avx2Run& run = table.run[padding];
    int k = 0;
    for (int lane = 0; lane < 4; ++lane) {
      if (((padding >> lane) & 1) != 0) continue;
      run.id_lanes[2 * k] = 2 * lane;
      run.id_lanes[2 * k + 1] = 2 * lane + 1;
      run.pairs[2 * k + 1] = lane;
      run.weight_lanes[k] = lane;
      ++k;
    }
    run.slots = 2 * k;
  }
  return table;
}

constexpr Avx2Runs kAvx2Runs = MakeAvx2Runs();
static_assert(sizeof(Avx2Run) == 128);

// The AVX-512 kernel's method in runs of 4 ids: each id is read once, the run's
// real ids compressed to the front by the table (a run whose real ids lead it is
// left as it is) and stored whole at the next entry with their weights and (row,
// position) pairs; the entry count advances by the real ones alone. No branch per
// id or per run; an id outside [-1, vocab) is found by an unsigned compare made
// signed (both sides' sign bits flipped), OR-accumulated. The portable kernel
// reads each id twice (a row is counted, then copied), and GCC 12 vectorised
// neither its count nor its check even for AVX2 (the OR into `out_of_range` went
// to memory on every id). On an AMD EPYC without AVX-512 (8 Dec, load 0.1-1.4)
// BM_SparseEnqueue/32 went from 2.8-3.8 to 8.6-10.4 GB/s (69-93 -> 25-30 us) and
// /128 from 2.7-4.2 to 8.5-10.9 GB/s. What is left is the stores: 28 bytes of COO
// per id, 3.2 times the bytes a memcpy of the ids writes, and more than L2 holds;
// the same stores at addresses that do not depend on the ids take 80-90 % of the
// kernel's time. Without weights the ones are written after the rows in one pass
// of whole vectors rather than 16 bytes a run (1-5 % of the kernel's time).
template <bool kWeighted>
class Avx2Rows {
 public:
  TPUSIM_AVX2_TARGET Avx2Rows(const float* weights, int64_t max_ids, uint64_t limit, CooOut out)
      : weights_(weights),
        max_ids_(max_ids),
        out_(out),
        vocab_(_mm256_set1_epi64x(static_cast<long long>(limit ^ kSign))) {}

  TPUSIM_AVX2_TARGET int64_t Write(const int64_t* ids, int64_t rows) {
    const int64_t whole = max_ids_ & ~int64_t{3};
    const int tail = static_cast<int>(max_ids_ - whole);
    // A row's last run when max_ids is no multiple of 4: lanes not loaded read as
    // id 0, in range, and count as padding (`past`).
    const __m256i tail_ids = _mm256_cmpgt_epi64(_mm256_set1_epi64x(tail), _mm256_set_epi64x(3, 2, 1, 0));
    const __m128i tail_weights = _mm_cmpgt_epi32(_mm_set1_epi32(tail), _mm_set_epi32(3, 2, 1, 0));
    const int past = 0xf & ~((1 << tail) - 1);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t* row = ids + r * max_ids_;
      const float* row_weights = kWeighted ? weights_ + r * max_ids_ : nullptr;
      __m256i at = _mm256_set_epi64x(0, r, 0, r);  // (row, position) twice
      int64_t p = 0;
      for (; p < whole; p += 4, at = _mm256_add_epi64(at, _mm256_set_epi64x(4, 0, 4, 0))) {
        const __m128 weight = kWeighted ? _mm_loadu_ps(row_weights + p) : _mm_set1_ps(1.0f);
        Run(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + p)), weight, at, 0);
      }
      if (tail != 0) {
        const __m256i id = _mm256_maskload_epi64(reinterpret_cast<const long long*>(row + p), tail_ids);
        const __m128 weight = kWeighted ? _mm_maskload_ps(row_weights + p, tail_weights) : _mm_set1_ps(1.0f);
        Run(id, weight, at, past);
      }
    }
    if (!kWeighted) std::fill_n(out_.weight, slots_ / 2, 1.0f);
    return slots_ / 2;
  }

  TPUSIM_AVX2_TARGET bool out_of_range() const { return !_mm256_testz_si256(above_, above_); }

 private:
  static constexpr uint64_t kSign = uint64_t{1} << 63;

  // Where the next entry's id or weight goes, from the slots of `sample` written
  // (two per entry): one counter for the three buffers, each at a scale that x86
  // addressing has (8, 4, 2 bytes a slot).
  template <typename T>
  T* Next(T* buffer) const {
    return reinterpret_cast<T*>(reinterpret_cast<char*>(buffer) + slots_ * static_cast<int64_t>(sizeof(T) / 2));
  }

  TPUSIM_AVX2_TARGET inline __attribute__((always_inline)) void Run(__m256i id, __m128 weight, __m256i at, int past) {
    // id + 1 > vocab, unsigned: (id + 1) ^ sign = id + 1 + sign, compared signed.
    const __m256i shifted = _mm256_add_epi64(id, _mm256_set1_epi64x(static_cast<long long>(kSign + 1)));
    above_ = _mm256_or_si256(above_, _mm256_cmpgt_epi64(shifted, vocab_));
    const __m256i padding = _mm256_cmpeq_epi64(id, _mm256_set1_epi64x(-1));
    const Avx2Run& run = kAvx2Runs.run[_mm256_movemask_pd(_mm256_castsi256_pd(padding)) | past];
    const __m256i id_lanes = _mm256_load_si256(reinterpret_cast<const __m256i*>(run.id_lanes));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(Next(out_.index)), _mm256_permutevar8x32_epi32(id, id_lanes));
    if (kWeighted) {
      weight = _mm_permutevar_ps(weight, _mm_load_si128(reinterpret_cast<const __m128i*>(run.weight_lanes)));
      _mm_storeu_ps(Next(out_.weight), weight);
    }
    int64_t* sample = out_.sample + slots_;
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(sample),
                        _mm256_add_epi64(at, _mm256_load_si256(reinterpret_cast<const __m256i*>(run.pairs))));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(sample + 4),
                        _mm256_add_epi64(at, _mm256_load_si256(reinterpret_cast<const __m256i*>(run.pairs + 4))));
    slots_ += run.slots;
  }

  const float* weights_;
  int64_t max_ids_;
  CooOut out_;
  __m256i vocab_;
  __m256i above_ = _mm256_setzero_si256();
  int64_t slots_ = 0;  // of `sample`: twice the entries written
};

template <bool kWeighted>
TPUSIM_AVX2_TARGET int64_t WriteAvx2(const int64_t* ids, const float* weights, int64_t rows, int64_t max_ids,
                                     uint64_t limit, CooOut out, uint64_t& out_of_range) {
  Avx2Rows<kWeighted> writer(weights, max_ids, limit, out);
  const int64_t nnz = writer.Write(ids, rows);
  out_of_range |= writer.out_of_range() ? 1 : 0;
  return nnz;
}
#endif

std::atomic<CooKernel> forced_kernel{CooKernel::kBest};

bool CpuRuns(CooKernel kernel) {
#ifdef TPUSIM_COO_X86
  static const bool avx512 =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt");
  switch (kernel) {
    case CooKernel::kAvx512:
      return avx512;
    case CooKernel::kAvx2:
      return avx2;
    default:
      return true;
  }
#else
  return kernel == CooKernel::kBest || kernel == CooKernel::kPortable;
#endif
}

CooKernel Chosen() {
  const CooKernel forced = forced_kernel.load(std::memory_order_relaxed);
  if (forced != CooKernel::kBest) return forced;
  static const CooKernel best = CpuRuns(CooKernel::kAvx512) ? CooKernel::kAvx512
                                : CpuRuns(CooKernel::kAvx2) ? CooKernel::kAvx2
                                                            : CooKernel::kPortable;
  return best;
}

}  // namespace

bool UseCooKernel(CooKernel kernel) {
  if (!CpuRuns(kernel)) return false;
  forced_kernel.store(kernel);
  return true;
}

int64_t WriteCooRows(const int64_t* ids, const float* weights, int64_t rows, int64_t max_ids, int64_t vocab, CooOut out,
                     bool* out_of_range) {
  const auto limit = static_cast<uint64_t>(vocab);
  uint64_t bad = 0;
  int64_t nnz = 0;
  switch (Chosen()) {
#ifdef TPUSIM_COO_X86
    case CooKernel::kAvx512:
      nnz = WriteAvx512(ids, weights, rows, max_ids, limit, out, bad);
      break;
    case CooKernel::kAvx2:
      nnz = weights != nullptr ? WriteAvx2<true>(ids, weights, rows, max_ids, limit, out, bad)
                               : WriteAvx2<false>(ids, weights, rows, max_ids, limit, out, bad);
      break;
#endif
    default:
      nnz = WritePortable(ids, weights, rows, max_ids, limit, out, bad);
  }
  *out_of_range = bad != 0;
  return nnz;
}

}  // namespace tpusim::embedding::internal
