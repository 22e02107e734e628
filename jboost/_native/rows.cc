// jboost's CPU kernels: histograms built from rows (see rows.h).
#include "rows.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "parallel.h"

namespace jboost {

// Whether row i's payload (c floats) is not all zero: rows of zero payload (zero sample weight)
// add nothing and are skipped. A -0.0 is zero, as v != 0.0f says; with c = 2 one 64-bit test.
inline bool NonZeroRow(const float* p, int64_t i, int64_t c) {
  if (c == 2) {
    uint64_t pair;
    std::memcpy(&pair, p + 2 * i, sizeof(pair));
    return (pair & 0x7fffffff7fffffffULL) != 0;
  }
  bool nonzero = false;
  for (int64_t j = 0; j < c; ++j) nonzero |= p[i * c + j] != 0.0f;
  return nonzero;
}

// The rows of one chunk into the histograms of features [f_begin, f_end).
// Feature f's histograms start at out + (f - f_base) * hist_size.
// With kMark, every updated cell (slot, bin) of feature f also sets bit slot * B + bin of
// bits + (f - f_base) * words (B = hist_size / (slots * c): the bit index is offset / c + bin).
template <int C, bool kDense, bool kMark>
void ChunkInto(const uint8_t* bins, int64_t n, const Rows& rs, float* out, int64_t hist_size,
               int64_t c_dyn, uint32_t max_bin, int64_t f_begin, int64_t f_end,
               int64_t f_base, uint64_t* bits, int64_t words) {
  const int64_t c = C > 0 ? C : c_dyn;
  auto bin_of = [max_bin](uint8_t b) -> int64_t {
    return static_cast<int64_t>(std::min<uint32_t>(b, max_bin));
  };
  int64_t f = f_begin;
  if (C == 2) {
    // Four features per pass over the rows: each row's id, offset and payload are loaded once
    // for four updates, and the four read-modify-write chains are independent.
    for (; f + 4 <= f_end; f += 4) {
      const uint8_t* c0 = bins + f * n;
      const uint8_t* c1 = c0 + n;
      const uint8_t* c2 = c1 + n;
      const uint8_t* c3 = c2 + n;
      float* h0 = out + (f - f_base) * hist_size;
      float* h1 = h0 + hist_size;
      float* h2 = h1 + hist_size;
      float* h3 = h2 + hist_size;
      uint64_t* m0 = kMark ? bits + (f - f_base) * words : nullptr;
      for (int64_t r = 0; r < rs.m; ++r) {
        const int64_t i = kDense ? rs.row0 + r : rs.ids[r];
        const int64_t o = kDense ? 0 : rs.base[r];
        const float g = rs.payload[2 * r], h = rs.payload[2 * r + 1];
        const int64_t e0 = o + 2 * bin_of(c0[i]), e1 = o + 2 * bin_of(c1[i]);
        const int64_t e2 = o + 2 * bin_of(c2[i]), e3 = o + 2 * bin_of(c3[i]);
        float* d0 = h0 + e0;
        float* d1 = h1 + e1;
        float* d2 = h2 + e2;
        float* d3 = h3 + e3;
        d0[0] += g; d0[1] += h;
        d1[0] += g; d1[1] += h;
        d2[0] += g; d2[1] += h;
        d3[0] += g; d3[1] += h;
        if (kMark) {
          m0[e0 >> 7] |= uint64_t{1} << ((e0 >> 1) & 63);
          m0[words + (e1 >> 7)] |= uint64_t{1} << ((e1 >> 1) & 63);
          m0[2 * words + (e2 >> 7)] |= uint64_t{1} << ((e2 >> 1) & 63);
          m0[3 * words + (e3 >> 7)] |= uint64_t{1} << ((e3 >> 1) & 63);
        }
      }
    }
  }
  for (; f < f_end; ++f) {
    const uint8_t* col = bins + f * n;
    float* hist = out + (f - f_base) * hist_size;
    uint64_t* mk = kMark ? bits + (f - f_base) * words : nullptr;
    for (int64_t r = 0; r < rs.m; ++r) {
      const int64_t i = kDense ? rs.row0 + r : rs.ids[r];
      const int64_t o = kDense ? 0 : rs.base[r];
      const int64_t e = o + bin_of(col[i]) * c;
      float* dst = hist + e;
      const float* p = rs.payload + r * c;
      for (int64_t j = 0; j < c; ++j) dst[j] += p[j];
      if (kMark) {
        const int64_t cell = e / c;
        mk[cell >> 6] |= uint64_t{1} << (cell & 63);
      }
    }
  }
}

// Dense when there is one leaf, mapped to slot 0, that every row is in (the first level of a
// tree) and at most 1/4 of the rows have an all-zero payload: the rows need no compaction.
// Otherwise rows are compacted into `threads` chunks in parallel (scratch memory of the calling
// thread).
Compacted Compact(int64_t n, const float* p, int64_t c, const int32_t* l, const int32_t* s,
                  int64_t n_leaves, int64_t n_slots, int64_t n_bins, int64_t threads) {
  Compacted out;
  bool dense = n_leaves == 1 && s[0] == 0;
  if (dense) {  // every row in leaf 0, and rows of all-zero payload (zero weight) few
    std::vector<int64_t> other(threads, 0), zero(threads, 0);  // per row chunk, in parallel
    Parallel(threads, [&](int64_t t) {
      int64_t o = 0, z = 0;
      for (int64_t i = n * t / threads; i < n * (t + 1) / threads; ++i) {
        o += l[i] != 0;
        z += !NonZeroRow(p, i, c);
      }
      other[t] = o;
      zero[t] = z;
    });
    int64_t zero_rows = 0;
    for (int64_t t = 0; t < threads; ++t) {
      dense = dense && other[t] == 0;
      zero_rows += zero[t];
    }
    dense = dense && 4 * zero_rows <= n;
  }
  out.dense = dense;
  out.chunks.resize(threads);
  if (dense) {
    for (int64_t t = 0; t < threads; ++t) {
      const int64_t r0 = n * t / threads, r1 = n * (t + 1) / threads;
      out.chunks[t] = Rows{nullptr, nullptr, p + r0 * c, r1 - r0, r0};
    }
    return out;
  }
  static thread_local Scratch scratch;
  char* mem = scratch.Get(static_cast<size_t>(n) * (2 * sizeof(int32_t) + c * sizeof(float)));
  int32_t* ids = reinterpret_cast<int32_t*>(mem);
  int32_t* base = ids + n;
  float* cpay = reinterpret_cast<float*>(base + n);
  // Per leaf (and a last entry for every leaf out of range): its slot's output offset and
  // whether it has a slot. Table lookups, not tests: with tests the compiler branched on each
  // row's slot, mispredicted for about half the rows (1M rows: 3.3 ms a level, now under 1 ms).
  std::vector<int32_t> offset(n_leaves + 1, 0), has_slot(n_leaves + 1, 0);
  for (int64_t j = 0; j < n_leaves; ++j) {
    const int32_t si = s[j];
    has_slot[j] = static_cast<uint32_t>(si) < static_cast<uint32_t>(n_slots);
    offset[j] = has_slot[j] ? static_cast<int32_t>(si * n_bins * c) : 0;
  }
  const uint32_t last = static_cast<uint32_t>(n_leaves);
  Parallel(threads, [&](int64_t t) {
    const int64_t r0 = n * t / threads, r1 = n * (t + 1) / threads;
    int64_t m = r0;
    for (int64_t i = r0; i < r1; ++i) {  // branch-free compaction
      const uint32_t li = std::min(static_cast<uint32_t>(l[i]), last);
      ids[m] = static_cast<int32_t>(i);
      base[m] = offset[li];
      if (c == 2) {  // a fixed-size copy (no call per row)
        std::memcpy(cpay + 2 * m, p + 2 * i, 2 * sizeof(float));
      } else {
        std::memcpy(cpay + m * c, p + i * c, sizeof(float) * c);
      }
      m += has_slot[li] & static_cast<int32_t>(NonZeroRow(p, i, c));
    }
    out.chunks[t] = Rows{ids + r0, base + r0, cpay + r0 * c, m - r0, r0};
  });
  return out;
}

JBOOST_AVX2_CLONES
void ChunkIntoWide(bool kDense, const uint8_t* bins, int64_t n, const Rows& rs, float* out,
                   int64_t hist_size, int64_t c, uint32_t max_bin, int64_t f_begin, int64_t f_end,
                   int64_t f_base) {
  auto bin_of = [max_bin](uint8_t b) -> int64_t {
    return static_cast<int64_t>(std::min<uint32_t>(b, max_bin));
  };
  int64_t f = f_begin;
  for (; f + 2 <= f_end; f += 2) {
    const uint8_t* c0 = bins + f * n;
    const uint8_t* c1 = c0 + n;
    float* h0 = out + (f - f_base) * hist_size;
    float* h1 = h0 + hist_size;
    for (int64_t r = 0; r < rs.m; ++r) {
      const int64_t i = kDense ? rs.row0 + r : rs.ids[r];
      const int64_t o = kDense ? 0 : rs.base[r];
      const float* p = rs.payload + r * c;
      AddRun(h0 + o + bin_of(c0[i]) * c, p, c);
      AddRun(h1 + o + bin_of(c1[i]) * c, p, c);
    }
  }
  for (; f < f_end; ++f) {
    const uint8_t* col = bins + f * n;
    float* hist = out + (f - f_base) * hist_size;
    for (int64_t r = 0; r < rs.m; ++r) {
      const int64_t i = kDense ? rs.row0 + r : rs.ids[r];
      const int64_t o = kDense ? 0 : rs.base[r];
      AddRun(hist + o + bin_of(col[i]) * c, rs.payload + r * c, c);
    }
  }
}

// All chunks, in row order, into the histograms of features [f0, f1) (feature f at
// out + (f - f_base) * hist_size). (Blocking rows so that their ids and payload stay in L1
// across features measured slower: it interleaves many more column streams and histograms.)
// With `bits` (kMark, see ChunkInto): the touched cells are marked too.
void ChunksInto(const uint8_t* b, int64_t n, const Compacted& rows, float* out, int64_t hist_size,
                int64_t c, uint32_t max_bin, int64_t f0, int64_t f1, int64_t f_base,
                uint64_t* bits, int64_t words) {
  for (const Rows& rs : rows.chunks) {
    if (c > kMaxNarrowChannels && bits == nullptr) {
      ChunkIntoWide(rows.dense, b, n, rs, out, hist_size, c, max_bin, f0, f1, f_base);
      continue;
    }
    auto run = [&](auto mark) {
      constexpr bool kMark = decltype(mark)::value;
      if (c == 2) {
        if (rows.dense) ChunkInto<2, true, kMark>(b, n, rs, out, hist_size, c, max_bin, f0, f1, f_base, bits, words);
        else ChunkInto<2, false, kMark>(b, n, rs, out, hist_size, c, max_bin, f0, f1, f_base, bits, words);
      } else {
        if (rows.dense) ChunkInto<0, true, kMark>(b, n, rs, out, hist_size, c, max_bin, f0, f1, f_base, bits, words);
        else ChunkInto<0, false, kMark>(b, n, rs, out, hist_size, c, max_bin, f0, f1, f_base, bits, words);
      }
    };
    if (bits != nullptr) run(std::true_type{});
    else run(std::false_type{});
  }
}

// 1 + the last non-missing bin (in [0, B - 2]) of a (B, c) histogram with a non-zero sum, or 0:
// the bins from there to B - 2 are empty, so its prefix sums (and split gains) are constant there.
int32_t UsedBins(const float* h, int64_t n_bins, int64_t c) {
  if (c == 2) {  // one 64-bit test per bin ((g, h) pairs; a -0.0 counts as used: harmless)
    for (int64_t t = n_bins - 2; t >= 0; --t) {
      uint64_t w;
      std::memcpy(&w, h + 2 * t, sizeof(w));
      if (w & 0x7fffffff7fffffffULL) return static_cast<int32_t>(t + 1);
    }
    return 0;
  }
  for (int64_t t = n_bins - 2; t >= 0; --t) {
    for (int64_t j = 0; j < c; ++j) {
      if (h[t * c + j] != 0.0f) return static_cast<int32_t>(t + 1);
    }
  }
  return 0;
}

// Inclusive prefix sums over the bins of `q` consecutive (B, c) histograms. Each sum is a
// chain of dependent adds: four histograms are walked together so that their 4c chains overlap.
// With `used` (per histogram, see UsedBins) the empty tail of bins is filled with the running sum
// instead of adding zeros: the same values.
void PrefixSums(float* h, int64_t q, int64_t n_bins, int64_t c, const int32_t* used) {
  const int64_t size = n_bins * c;
  int64_t k = 0;
  if (c == 2) {
    for (; k + 4 <= q; k += 4) {
      float* h0 = h + k * size;
      float* h1 = h0 + size;
      float* h2 = h1 + size;
      float* h3 = h2 + size;
      int64_t u = n_bins - 1;
      if (used != nullptr) {
        u = std::max(std::max(used[k], used[k + 1]), std::max(used[k + 2], used[k + 3]));
        u = std::max<int64_t>(u, 1);
      }
      float a0 = h0[0], b0 = h0[1], a1 = h1[0], b1 = h1[1];
      float a2 = h2[0], b2 = h2[1], a3 = h3[0], b3 = h3[1];
      for (int64_t i = 2; i < 2 * u; i += 2) {
        h0[i] = a0 += h0[i]; h0[i + 1] = b0 += h0[i + 1];
        h1[i] = a1 += h1[i]; h1[i + 1] = b1 += h1[i + 1];
        h2[i] = a2 += h2[i]; h2[i + 1] = b2 += h2[i + 1];
        h3[i] = a3 += h3[i]; h3[i + 1] = b3 += h3[i + 1];
      }
      for (int64_t i = 2 * u; i < size - 2; i += 2) {
        h0[i] = a0; h0[i + 1] = b0;
        h1[i] = a1; h1[i + 1] = b1;
        h2[i] = a2; h2[i + 1] = b2;
        h3[i] = a3; h3[i + 1] = b3;
      }
      if (size - 2 >= 2 * u) {  // the missing bin
        const int64_t i = size - 2;
        h0[i] = a0 += h0[i]; h0[i + 1] = b0 += h0[i + 1];
        h1[i] = a1 += h1[i]; h1[i + 1] = b1 += h1[i + 1];
        h2[i] = a2 += h2[i]; h2[i + 1] = b2 += h2[i + 1];
        h3[i] = a3 += h3[i]; h3[i + 1] = b3 += h3[i + 1];
      }
    }
  }
  for (; k < q; ++k) {
    float* hk = h + k * size;
    for (int64_t bin = 1; bin < n_bins; ++bin) {
      for (int64_t j = 0; j < c; ++j) hk[bin * c + j] += hk[(bin - 1) * c + j];
    }
  }
}

// out[f, slot[leaf[i]], bin, c] += payload[i, c]; rows with no slot, or an all-zero payload
// (zero sample weight), are skipped. `out` must hold F * n_slots * n_bins * c floats.
void Accumulate(const uint8_t* b, int64_t n_features, int64_t n, const float* p, int64_t c,
                const int32_t* l, const int32_t* s, int64_t n_leaves, int64_t n_slots,
                int64_t n_bins, float* o, int64_t n_threads, bool cumulative) {
  const int64_t hist_size = n_slots * n_bins * c;
  std::memset(o, 0, sizeof(float) * n_features * hist_size);
  if (n == 0 || n_features == 0 || c == 0 || n_slots == 0 || n_leaves == 0) return;
  const uint32_t max_bin = static_cast<uint32_t>(n_bins - 1);
  const int64_t threads = ThreadsFor(n_threads, n * n_features);
  const Compacted rows = Compact(n, p, c, l, s, n_leaves, n_slots, n_bins, threads);
  const int64_t f_threads = std::min<int64_t>(threads, n_features);
  Parallel(f_threads, [&](int64_t t) {
    const int64_t f0 = n_features * t / f_threads, f1 = n_features * (t + 1) / f_threads;
    ChunksInto(b, n, rows, o, hist_size, c, max_bin, f0, f1, 0);
    if (cumulative) PrefixSums(o + f0 * hist_size, (f1 - f0) * n_slots, n_bins, c);
  });
}

// Counts each leaf's rows of non-zero payload (in parallel over row chunks; integer sums, so
// independent of the thread count) and, for leaves [0, 2S) where j and j + S are siblings, maps
// the sibling with fewer such rows to slot j (which[j] = 1 when that is j + S; ties: j) and the
// other to -1.
void SmallerSlots(const float* p, const int32_t* l, int64_t n, int64_t c, int64_t n_slots,
                  int64_t n_threads, int32_t* slot, int32_t* which) {
  const int64_t n_leaves = 2 * n_slots;
  const int64_t threads = std::max<int64_t>(1, std::min<int64_t>(n_threads, n >> 16));
  // Each thread counts into kLanes interleaved copies (row i into copy i % kLanes), each of
  // n_leaves + 1 counters (the last for leaves out of range): consecutive rows of one leaf (two
  // leaves at the second level) no longer wait on each other's increment (a store-to-load chain
  // through one counter: 2.8 ms for 1M rows, now bound by reading the rows).
  constexpr int64_t kLanes = 4;
  const int64_t width = n_leaves + 1;
  std::vector<int64_t> counts(threads * kLanes * width, 0);
  const uint32_t last = static_cast<uint32_t>(n_leaves);
  Parallel(threads, [&](int64_t t) {
    int64_t* cnt = counts.data() + t * kLanes * width;
    const int64_t r0 = n * t / threads, r1 = n * (t + 1) / threads;
    for (int64_t i = r0; i < r1; ++i) {
      const uint32_t li = std::min(static_cast<uint32_t>(l[i]), last);
      cnt[(i % kLanes) * width + li] += NonZeroRow(p, i, c);
    }
  });
  std::vector<int64_t> count(n_leaves, 0);
  for (int64_t q = 0; q < threads * kLanes; ++q) {
    for (int64_t j = 0; j < n_leaves; ++j) count[j] += counts[q * width + j];
  }
  for (int64_t j = 0; j < n_leaves; ++j) slot[j] = -1;
  for (int64_t j = 0; j < n_slots; ++j) {
    which[j] = count[j + n_slots] < count[j] ? 1 : 0;
    slot[which[j] ? j + n_slots : j] = static_cast<int32_t>(j);
  }
}

}  // namespace jboost
