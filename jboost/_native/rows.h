// jboost's CPU kernels: histograms built from rows (used by histogram.cc and level.cc):
// compaction of the selected rows, their sums into (feature, slot, bin, channel) cells, prefix
// sums over the bins, and the smaller sibling of each pair (histogram subtraction).
#ifndef JBOOST_NATIVE_ROWS_H_
#define JBOOST_NATIVE_ROWS_H_

#include <cstdint>
#include <vector>

namespace jboost {

// Payloads of up to this many channels (C = 2K, K <= 8 outputs) take the kernels' original
// paths; wider ones (any K) take the "wide" paths below, vectorised over the channels and the
// bins. (The narrow paths are kept as they were: bitwise the same results as before.)
constexpr int64_t kMaxNarrowChannels = 16;

struct Rows {
  const int32_t* ids;    // row ids (nullptr: dense, row r is row r)
  const int32_t* base;   // output offset of each row's slot (nullptr: 0)
  const float* payload;  // (m, C) payload of the rows
  int64_t m;
  int64_t row0;          // dense: the first row of the chunk
};

// The rows of a call, compacted: the rows whose leaf has a slot and whose payload is not all
// zero, in row-order chunks (one per thread of the compaction).
struct Compacted {
  std::vector<Rows> chunks;
  bool dense = false;
};

// Dense when there is one leaf, mapped to slot 0, that every row is in (the first level of a
// tree) and at most 1/4 of the rows have an all-zero payload: the rows need no compaction.
// Otherwise rows are compacted into `threads` chunks in parallel (scratch memory of the calling
// thread).
Compacted Compact(int64_t n, const float* p, int64_t c, const int32_t* l, const int32_t* s,
                  int64_t n_leaves, int64_t n_slots, int64_t n_bins, int64_t threads);

// Wide payloads (C > 16: 9 or more outputs): one row adds a run of C floats, vectorised. Two
// features per pass over the rows (each row's id, offset and payload loaded once for both).
// Every cell still sums its rows in row order: the same floats as ChunkInto.
inline void AddRun(float* __restrict dst, const float* __restrict src, int64_t c) {
  for (int64_t j = 0; j < c; ++j) dst[j] += src[j];
}

// All chunks, in row order, into the histograms of features [f0, f1) (feature f at
// out + (f - f_base) * hist_size). (Blocking rows so that their ids and payload stay in L1
// across features measured slower: it interleaves many more column streams and histograms.)
// With `bits` (kMark, see ChunkInto): the touched cells are marked too.
void ChunksInto(const uint8_t* b, int64_t n, const Compacted& rows, float* out, int64_t hist_size,
                int64_t c, uint32_t max_bin, int64_t f0, int64_t f1, int64_t f_base,
                uint64_t* bits = nullptr, int64_t words = 0);

// 1 + the last non-missing bin (in [0, B - 2]) of a (B, c) histogram with a non-zero sum, or 0:
// the bins from there to B - 2 are empty, so its prefix sums (and split gains) are constant there.
int32_t UsedBins(const float* h, int64_t n_bins, int64_t c);

// Inclusive prefix sums over the bins of `q` consecutive (B, c) histograms. Each sum is a
// chain of dependent adds: four histograms are walked together so that their 4c chains overlap.
// With `used` (per histogram, see UsedBins) the empty tail of bins is filled with the running sum
// instead of adding zeros: the same values.
void PrefixSums(float* h, int64_t q, int64_t n_bins, int64_t c, const int32_t* used = nullptr);

// out[f, slot[leaf[i]], bin, c] += payload[i, c]; rows with no slot, or an all-zero payload
// (zero sample weight), are skipped. `out` must hold F * n_slots * n_bins * c floats.
void Accumulate(const uint8_t* b, int64_t n_features, int64_t n, const float* p, int64_t c,
                const int32_t* l, const int32_t* s, int64_t n_leaves, int64_t n_slots,
                int64_t n_bins, float* o, int64_t n_threads, bool cumulative);

// Counts each leaf's rows of non-zero payload (in parallel over row chunks; integer sums, so
// independent of the thread count) and, for leaves [0, 2S) where j and j + S are siblings, maps
// the sibling with fewer such rows to slot j (which[j] = 1 when that is j + S; ties: j) and the
// other to -1.
void SmallerSlots(const float* p, const int32_t* l, int64_t n, int64_t c, int64_t n_slots,
                  int64_t n_threads, int32_t* slot, int32_t* which);

}  // namespace jboost

#endif  // JBOOST_NATIVE_ROWS_H_
