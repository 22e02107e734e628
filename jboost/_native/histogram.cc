// jboost's CPU histogram kernel, called from JAX as an XLA FFI custom call (see
// jboost/histograms.py). Semantics, for every row i whose leaf has a slot (slot[leaf[i]] >= 0),
// every feature f and every channel c:
//
//   out[f, slot[leaf[i]], min(bins[f, i], B - 1), c] += payload[i, c]
//
// and, with the attribute cumulative=true, the inclusive prefix sums of that over the bins
// (what the split search needs; prefix sums are linear, so subtraction and psum still apply).
// With the identity slot map this is the plain (feature, leaf, bin) histogram. With the smaller
// child of each sibling pair mapped to its parent's slot and the larger child to -1, it builds
// only what histogram subtraction needs (larger sibling = parent - smaller sibling), reading
// only the selected rows.
//
// Phase 1 compacts the selected rows (ids, output offsets, payload) in row-order chunks, one per
// thread. Phase 2 splits the features across threads; each thread walks the chunks in row
// order, so every sum is accumulated in row order by one thread: the result is bitwise the same
// whatever the number of threads.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

// Scratch memory reused across calls by the calling (XLA) thread: no allocation or page
// faults on the hot path after the first call.
struct Scratch {
  std::unique_ptr<char[]> data;
  size_t size = 0;
  char* Get(size_t bytes) {
    if (bytes > size) {
      data.reset(new char[bytes]);
      size = bytes;
    }
    return data.get();
  }
};

struct Rows {
  const int32_t* ids;    // row ids (nullptr: dense, row r is row r)
  const int32_t* base;   // output offset of each row's slot (nullptr: 0)
  const float* payload;  // (m, C) payload of the rows
  int64_t m;
  int64_t row0;          // dense: the first row of the chunk
};

// Rows [r0, r1) of one chunk into the histograms of features [f_begin, f_end).
template <int C, bool kDense>
void RowBlock(const uint8_t* bins, int64_t n, const Rows& rs, int64_t r0, int64_t r1, float* out,
              int64_t hist_size, int64_t c_dyn, uint32_t max_bin, int64_t f_begin,
              int64_t f_end) {
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
      float* h0 = out + f * hist_size;
      float* h1 = h0 + hist_size;
      float* h2 = h1 + hist_size;
      float* h3 = h2 + hist_size;
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t i = kDense ? rs.row0 + r : rs.ids[r];
        const int64_t o = kDense ? 0 : rs.base[r];
        const float g = rs.payload[2 * r], h = rs.payload[2 * r + 1];
        float* d0 = h0 + o + 2 * bin_of(c0[i]);
        float* d1 = h1 + o + 2 * bin_of(c1[i]);
        float* d2 = h2 + o + 2 * bin_of(c2[i]);
        float* d3 = h3 + o + 2 * bin_of(c3[i]);
        d0[0] += g; d0[1] += h;
        d1[0] += g; d1[1] += h;
        d2[0] += g; d2[1] += h;
        d3[0] += g; d3[1] += h;
      }
    }
  }
  for (; f < f_end; ++f) {
    const uint8_t* col = bins + f * n;
    float* hist = out + f * hist_size;
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t i = kDense ? rs.row0 + r : rs.ids[r];
      const int64_t o = kDense ? 0 : rs.base[r];
      float* dst = hist + o + bin_of(col[i]) * c;
      const float* p = rs.payload + r * c;
      for (int64_t j = 0; j < c; ++j) dst[j] += p[j];
    }
  }
}

// Every chunk, in row order, into features [f_begin, f_end). (Blocking rows so that their ids
// and payload stay in L1 across features measured slower: it interleaves many more column
// streams and histograms.)
template <int C, bool kDense>
void FeatureRange(const uint8_t* bins, int64_t n, const Rows* chunks, int64_t n_chunks,
                  float* out, int64_t hist_size, int64_t c_dyn, uint32_t max_bin,
                  int64_t f_begin, int64_t f_end) {
  for (int64_t k = 0; k < n_chunks; ++k) {
    RowBlock<C, kDense>(bins, n, chunks[k], 0, chunks[k].m, out, hist_size, c_dyn, max_bin,
                        f_begin, f_end);
  }
}

template <typename Fn>
void Parallel(int64_t n_threads, Fn fn) {
  if (n_threads <= 1) {
    fn(0);
    return;
  }
  std::vector<std::thread> pool;
  pool.reserve(n_threads - 1);
  for (int64_t t = 1; t < n_threads; ++t) pool.emplace_back(fn, t);
  fn(0);
  for (auto& th : pool) th.join();
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

  // Dense: one leaf, mapped to slot 0, that every row is in (the first level of a tree): the
  // rows need no compaction.
  bool dense = n_leaves == 1 && s[0] == 0;
  for (int64_t i = 0; dense && i < n; ++i) dense = l[i] == 0;

  const int64_t threads =
      std::max<int64_t>(1, std::min<int64_t>(n_threads, (n * n_features) >> 16));
  std::vector<Rows> chunks(threads);
  if (dense) {
    for (int64_t t = 0; t < threads; ++t) {
      const int64_t r0 = n * t / threads, r1 = n * (t + 1) / threads;
      chunks[t] = Rows{nullptr, nullptr, p + r0 * c, r1 - r0, r0};
    }
  } else {
    static thread_local Scratch scratch;
    char* mem = scratch.Get(static_cast<size_t>(n) * (2 * sizeof(int32_t) + c * sizeof(float)));
    int32_t* ids = reinterpret_cast<int32_t*>(mem);
    int32_t* base = ids + n;
    float* cpay = reinterpret_cast<float*>(base + n);
    Parallel(threads, [&](int64_t t) {
      const int64_t r0 = n * t / threads, r1 = n * (t + 1) / threads;
      int64_t m = r0;
      for (int64_t i = r0; i < r1; ++i) {  // branch-free compaction
        const int32_t li = l[i];
        const bool in_range = static_cast<uint32_t>(li) < static_cast<uint32_t>(n_leaves);
        const int32_t si = in_range ? s[in_range ? li : 0] : -1;
        bool keep = static_cast<uint32_t>(si) < static_cast<uint32_t>(n_slots);
        bool nonzero = false;
        ids[m] = static_cast<int32_t>(i);
        base[m] = static_cast<int32_t>((keep ? si : 0) * n_bins * c);
        for (int64_t j = 0; j < c; ++j) {
          const float v = p[i * c + j];
          cpay[m * c + j] = v;
          nonzero |= v != 0.0f;
        }
        m += keep && nonzero;
      }
      chunks[t] = Rows{ids + r0, base + r0, cpay + r0 * c, m - r0, r0};
    });
  }

  const int64_t f_threads = std::min<int64_t>(threads, n_features);
  Parallel(f_threads, [&](int64_t t) {
    const int64_t f0 = n_features * t / f_threads, f1 = n_features * (t + 1) / f_threads;
    if (c == 2) {
      if (dense) {
        FeatureRange<2, true>(b, n, chunks.data(), threads, o, hist_size, c, max_bin, f0, f1);
      } else {
        FeatureRange<2, false>(b, n, chunks.data(), threads, o, hist_size, c, max_bin, f0, f1);
      }
    } else {
      if (dense) {
        FeatureRange<0, true>(b, n, chunks.data(), threads, o, hist_size, c, max_bin, f0, f1);
      } else {
        FeatureRange<0, false>(b, n, chunks.data(), threads, o, hist_size, c, max_bin, f0, f1);
      }
    }
    if (cumulative) {  // inclusive prefix sums over the bins of every (feature, slot, channel)
      for (int64_t q = f0 * n_slots; q < f1 * n_slots; ++q) {
        float* h = o + q * n_bins * c;
        for (int64_t bin = 1; bin < n_bins; ++bin) {
          for (int64_t j = 0; j < c; ++j) h[bin * c + j] += h[(bin - 1) * c + j];
        }
      }
    }
  });
}

ffi::Error CheckShapes(ffi::Buffer<ffi::U8>& bins, ffi::Buffer<ffi::F32>& payload,
                       ffi::Buffer<ffi::S32>& leaf, ffi::ResultBuffer<ffi::F32>& out) {
  auto bdims = bins.dimensions();
  auto pdims = payload.dimensions();
  auto odims = out->dimensions();
  if (bdims.size() != 2 || pdims.size() != 2 || odims.size() != 4) {
    return ffi::Error::InvalidArgument(
        "jboost histogram: bins must be (F, n), payload (n, C) and the output (F, S, B, C)");
  }
  if (pdims[0] != bdims[1] || static_cast<int64_t>(leaf.element_count()) != bdims[1] ||
      odims[0] != bdims[0] || odims[3] != pdims[1] || odims[2] < 1 || odims[2] > 256) {
    return ffi::Error::InvalidArgument("jboost histogram: inconsistent shapes");
  }
  return ffi::Error::Success();
}

// The histogram of every slot: out (F, S, B, C); slot (L,) maps leaves to slots (-1: skip).
ffi::Error HistogramImpl(ffi::Buffer<ffi::U8> bins, ffi::Buffer<ffi::F32> payload,
                         ffi::Buffer<ffi::S32> leaf, ffi::Buffer<ffi::S32> slot,
                         ffi::ResultBuffer<ffi::F32> out, int64_t n_threads, bool cumulative) {
  if (auto err = CheckShapes(bins, payload, leaf, out); !err.success()) return err;
  auto odims = out->dimensions();
  Accumulate(bins.typed_data(), odims[0], bins.dimensions()[1], payload.typed_data(), odims[3],
             leaf.typed_data(), slot.typed_data(), static_cast<int64_t>(slot.element_count()),
             odims[1], odims[2], out->typed_data(), n_threads, cumulative);
  return ffi::Error::Success();
}

// For leaves in [0, 2S) where leaves j and j + S are siblings: the histogram of the sibling
// with fewer rows of non-zero payload, in slot j, and right_smaller[j] = 1 when that sibling is
// j + S (ties: j). The other sibling's histogram is the parent's minus this one.
ffi::Error SmallerSiblingImpl(ffi::Buffer<ffi::U8> bins, ffi::Buffer<ffi::F32> payload,
                              ffi::Buffer<ffi::S32> leaf, ffi::ResultBuffer<ffi::F32> out,
                              ffi::ResultBuffer<ffi::S32> right_smaller, int64_t n_threads,
                              bool cumulative) {
  if (auto err = CheckShapes(bins, payload, leaf, out); !err.success()) return err;
  auto odims = out->dimensions();
  const int64_t n = bins.dimensions()[1];
  const int64_t c = odims[3];
  const int64_t n_slots = odims[1];
  if (static_cast<int64_t>(right_smaller->element_count()) != n_slots) {
    return ffi::Error::InvalidArgument("jboost histogram: right_smaller must have S elements");
  }
  const int64_t n_leaves = 2 * n_slots;
  const int32_t* l = leaf.typed_data();
  const float* p = payload.typed_data();
  // Rows of non-zero payload per leaf, counted in parallel over row chunks (integer sums: the
  // counts, hence the choice of siblings, do not depend on the number of threads).
  const int64_t threads =
      std::max<int64_t>(1, std::min<int64_t>(n_threads, n >> 16));
  std::vector<int64_t> counts(threads * n_leaves, 0);
  Parallel(threads, [&](int64_t t) {
    int64_t* cnt = counts.data() + t * n_leaves;
    for (int64_t i = n * t / threads; i < n * (t + 1) / threads; ++i) {
      const uint32_t li = static_cast<uint32_t>(l[i]);
      bool nonzero = false;
      for (int64_t j = 0; j < c; ++j) nonzero |= p[i * c + j] != 0.0f;
      if (li < static_cast<uint32_t>(n_leaves)) cnt[li] += nonzero;
    }
  });
  std::vector<int64_t> count(n_leaves, 0);
  for (int64_t t = 0; t < threads; ++t) {
    for (int64_t j = 0; j < n_leaves; ++j) count[j] += counts[t * n_leaves + j];
  }
  std::vector<int32_t> slot(n_leaves, -1);
  int32_t* which = right_smaller->typed_data();
  for (int64_t j = 0; j < n_slots; ++j) {
    which[j] = count[j + n_slots] < count[j] ? 1 : 0;
    slot[which[j] ? j + n_slots : j] = static_cast<int32_t>(j);
  }
  Accumulate(bins.typed_data(), odims[0], n, p, c, l, slot.data(), n_leaves, n_slots, odims[2],
             out->typed_data(), n_threads, cumulative);
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(JboostHistogram, HistogramImpl,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::U8>>()   // bins (F, n)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // payload (n, C)
                                  .Arg<ffi::Buffer<ffi::S32>>()  // leaf (n,)
                                  .Arg<ffi::Buffer<ffi::S32>>()  // slot (L,)
                                  .Ret<ffi::Buffer<ffi::F32>>()  // out (F, S, B, C)
                                  .Attr<int64_t>("n_threads")
                                  .Attr<bool>("cumulative"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(JboostHistogramSmallerSibling, SmallerSiblingImpl,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::U8>>()   // bins (F, n)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // payload (n, C)
                                  .Arg<ffi::Buffer<ffi::S32>>()  // leaf (n,) in [0, 2S)
                                  .Ret<ffi::Buffer<ffi::F32>>()  // out (F, S, B, C)
                                  .Ret<ffi::Buffer<ffi::S32>>()  // right_smaller (S,)
                                  .Attr<int64_t>("n_threads")
                                  .Attr<bool>("cumulative"));
