// jboost's CPU kernels, called from JAX as XLA FFI custom calls: histograms (see
// jboost/histograms.py) and, at the end of the file, binning (jboost/binning.py).
//
// Histograms, for every row i whose leaf has a slot (slot[leaf[i]] >= 0), every feature f and
// every channel c:
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
#include <cmath>
#include <limits>
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

// The rows of one chunk into the histograms of features [f_begin, f_end).
template <int C, bool kDense>
void ChunkInto(const uint8_t* bins, int64_t n, const Rows& rs, float* out, int64_t hist_size,
               int64_t c_dyn, uint32_t max_bin, int64_t f_begin, int64_t f_end) {
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
      for (int64_t r = 0; r < rs.m; ++r) {
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
    for (int64_t r = 0; r < rs.m; ++r) {
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
    ChunkInto<C, kDense>(bins, n, chunks[k], out, hist_size, c_dyn, max_bin, f_begin, f_end);
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
      std::max<int64_t>(1, std::min<int64_t>(n_threads, (n * n_features) >> 18));
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

// ---------------------------------------------------------------------------------------------
// Batching. Under jax.vmap the calls use vmap_method="expand_dims": every operand gets the same
// number of leading batch dimensions, each either the batch size or 1 (an unbatched operand,
// broadcast: the binned data is shared by every model of a sweep, never copied). The models of
// a batch are independent: threads take whole models, each built exactly as in an unbatched
// call with one thread, so a batch gives bitwise the results of separate calls.

// Element offsets of one operand for every model of the batch.
bool BatchOffsets(ffi::Span<const int64_t> dims, size_t core_rank,
                  const std::vector<int64_t>& batch_shape, std::vector<int64_t>* offsets) {
  const size_t nb = batch_shape.size();
  if (dims.size() != nb + core_rank) return false;
  int64_t inner = 1;
  for (size_t i = nb; i < dims.size(); ++i) inner *= dims[i];
  std::vector<int64_t> stride(nb, 0);
  int64_t s = inner;
  for (size_t i = nb; i-- > 0;) {
    if (dims[i] != batch_shape[i] && dims[i] != 1) return false;
    stride[i] = dims[i] == 1 ? 0 : s;
    s *= dims[i];
  }
  int64_t total = 1;
  for (int64_t d : batch_shape) total *= d;
  offsets->assign(total, 0);
  for (int64_t m = 0; m < total; ++m) {
    int64_t rem = m, off = 0;
    for (size_t i = nb; i-- > 0;) {
      off += (rem % batch_shape[i]) * stride[i];
      rem /= batch_shape[i];
    }
    (*offsets)[m] = off;
  }
  return true;
}

// Runs fn(model, threads_for_that_model) for every model: one model uses every thread; several
// share them out whole (model t, t + T, t + 2T, ... on thread t).
template <typename Fn>
void ForEachModel(int64_t n_models, int64_t n_threads, Fn fn) {
  if (n_models == 1) {
    fn(0, n_threads);
    return;
  }
  const int64_t T = std::max<int64_t>(1, std::min(n_threads, n_models));
  Parallel(T, [&](int64_t t) {
    for (int64_t m = t; m < n_models; m += T) fn(m, 1);
  });
}

struct Batch {
  std::vector<int64_t> shape, bins, payload, leaf, out;
  int64_t n_models = 1, n_features = 0, n = 0, c = 0, n_slots = 0, n_bins = 0;
};

ffi::Error MakeBatch(ffi::Buffer<ffi::U8>& bins, ffi::Buffer<ffi::F32>& payload,
                     ffi::Buffer<ffi::S32>& leaf, ffi::ResultBuffer<ffi::F32>& out, Batch* b) {
  auto od = out->dimensions();
  if (od.size() < 4) {
    return ffi::Error::InvalidArgument(
        "jboost histogram: bins must be (..., F, n), payload (..., n, C), leaf (..., n) and the "
        "output (..., F, S, B, C)");
  }
  const size_t nb = od.size() - 4;
  b->shape.assign(od.begin(), od.begin() + nb);
  b->n_models = 1;
  for (int64_t d : b->shape) b->n_models *= d;
  b->n_features = od[nb];
  b->n_slots = od[nb + 1];
  b->n_bins = od[nb + 2];
  b->c = od[nb + 3];
  auto bd = bins.dimensions();
  auto pd = payload.dimensions();
  auto ld = leaf.dimensions();
  if (bd.size() != nb + 2 || pd.size() != nb + 2 || ld.size() != nb + 1) {
    return ffi::Error::InvalidArgument("jboost histogram: operands disagree on the batch rank");
  }
  b->n = bd[nb + 1];
  if (bd[nb] != b->n_features || pd[nb] != b->n || pd[nb + 1] != b->c || ld[nb] != b->n ||
      b->n_bins < 1 || b->n_bins > 256) {
    return ffi::Error::InvalidArgument("jboost histogram: inconsistent shapes");
  }
  if (!BatchOffsets(bd, 2, b->shape, &b->bins) || !BatchOffsets(pd, 2, b->shape, &b->payload) ||
      !BatchOffsets(ld, 1, b->shape, &b->leaf) || !BatchOffsets(od, 4, b->shape, &b->out)) {
    return ffi::Error::InvalidArgument("jboost histogram: batch dimensions do not broadcast");
  }
  return ffi::Error::Success();
}

// The histogram of every slot: out (..., F, S, B, C); slot (..., L) maps leaves to slots
// (-1: skip).
ffi::Error HistogramImpl(ffi::Buffer<ffi::U8> bins, ffi::Buffer<ffi::F32> payload,
                         ffi::Buffer<ffi::S32> leaf, ffi::Buffer<ffi::S32> slot,
                         ffi::ResultBuffer<ffi::F32> out, int64_t n_threads, bool cumulative) {
  Batch b;
  if (auto err = MakeBatch(bins, payload, leaf, out, &b); !err.success()) return err;
  auto sd = slot.dimensions();
  std::vector<int64_t> slot_off;
  if (sd.size() != b.shape.size() + 1 || !BatchOffsets(sd, 1, b.shape, &slot_off)) {
    return ffi::Error::InvalidArgument("jboost histogram: slot must be (..., L)");
  }
  const int64_t n_leaves = sd[sd.size() - 1];
  ForEachModel(b.n_models, n_threads, [&](int64_t m, int64_t threads) {
    Accumulate(bins.typed_data() + b.bins[m], b.n_features, b.n,
               payload.typed_data() + b.payload[m], b.c, leaf.typed_data() + b.leaf[m],
               slot.typed_data() + slot_off[m], n_leaves, b.n_slots, b.n_bins,
               out->typed_data() + b.out[m], threads, cumulative);
  });
  return ffi::Error::Success();
}

// One model of SmallerSiblingImpl.
void SmallerSibling(const uint8_t* bins, const float* p, const int32_t* l, int64_t n_features,
                    int64_t n, int64_t c, int64_t n_slots, int64_t n_bins, float* out,
                    int32_t* which, int64_t n_threads, bool cumulative) {
  const int64_t n_leaves = 2 * n_slots;
  // Rows of non-zero payload per leaf, counted in parallel over row chunks (integer sums: the
  // counts, hence the choice of siblings, do not depend on the number of threads).
  const int64_t threads = std::max<int64_t>(1, std::min<int64_t>(n_threads, n >> 16));
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
  for (int64_t j = 0; j < n_slots; ++j) {
    which[j] = count[j + n_slots] < count[j] ? 1 : 0;
    slot[which[j] ? j + n_slots : j] = static_cast<int32_t>(j);
  }
  Accumulate(bins, n_features, n, p, c, l, slot.data(), n_leaves, n_slots, n_bins, out, n_threads,
             cumulative);
}

// For leaves in [0, 2S) where leaves j and j + S are siblings: the histogram of the sibling
// with fewer rows of non-zero payload, in slot j, and right_smaller[j] = 1 when that sibling is
// j + S (ties: j). The other sibling's histogram is the parent's minus this one.
ffi::Error SmallerSiblingImpl(ffi::Buffer<ffi::U8> bins, ffi::Buffer<ffi::F32> payload,
                              ffi::Buffer<ffi::S32> leaf, ffi::ResultBuffer<ffi::F32> out,
                              ffi::ResultBuffer<ffi::S32> right_smaller, int64_t n_threads,
                              bool cumulative) {
  Batch b;
  if (auto err = MakeBatch(bins, payload, leaf, out, &b); !err.success()) return err;
  std::vector<int64_t> which_off;
  auto wd = right_smaller->dimensions();
  if (wd.size() != b.shape.size() + 1 || wd[wd.size() - 1] != b.n_slots ||
      !BatchOffsets(wd, 1, b.shape, &which_off)) {
    return ffi::Error::InvalidArgument("jboost histogram: right_smaller must be (..., S)");
  }
  ForEachModel(b.n_models, n_threads, [&](int64_t m, int64_t threads) {
    SmallerSibling(bins.typed_data() + b.bins[m], payload.typed_data() + b.payload[m],
                   leaf.typed_data() + b.leaf[m], b.n_features, b.n, b.c, b.n_slots, b.n_bins,
                   out->typed_data() + b.out[m], right_smaller->typed_data() + which_off[m],
                   threads, cumulative);
  });
  return ffi::Error::Success();
}

// ---------------------------------------------------------------------------------------------
// Binning (jboost.binning.bin_features): out[f, i] = missing_bin when X[i, f] is NaN, else the
// number of borders[f, :] strictly below X[i, f] (searchsorted, side="left"), with subnormal
// values taken as 0 as XLA's CPU comparisons do. A branch-free binary search per value; threads
// split the rows. Exact integer results: identical to the pure-JAX path.

void BinRows(const float* X, int64_t n, int64_t n_features, const float* borders, int64_t m,
             uint8_t* out, int64_t missing_bin, int64_t r0, int64_t r1) {
  int64_t top = 1;
  while (top * 2 <= m) top *= 2;
  constexpr int64_t kBlock = 256;
  const float tiny = std::numeric_limits<float>::min();
  for (int64_t b0 = r0; b0 < r1; b0 += kBlock) {
    const int64_t b1 = std::min(r1, b0 + kBlock);
    for (int64_t f = 0; f < n_features; ++f) {
      const float* bf = borders + f * m;
      uint8_t* o = out + f * n;
      for (int64_t i = b0; i < b1; ++i) {
        float x = X[i * n_features + f];
        x = std::fabs(x) < tiny ? 0.0f : x;  // NaN stays NaN (the comparison is false)
        int64_t pos = 0;  // borders[f, :pos] < x
        for (int64_t step = m > 0 ? top : 0; step > 0; step >>= 1) {
          const int64_t next = pos + step;
          pos = (next <= m && bf[next - 1] < x) ? next : pos;
        }
        o[i] = static_cast<uint8_t>(x != x ? missing_bin : pos);
      }
    }
  }
}

ffi::Error BinImpl(ffi::Buffer<ffi::F32> X, ffi::Buffer<ffi::F32> borders,
                   ffi::ResultBuffer<ffi::U8> out, int64_t n_threads, int64_t missing_bin) {
  auto xd = X.dimensions();
  auto bd = borders.dimensions();
  auto od = out->dimensions();
  if (xd.size() != 2 || bd.size() != 2 || od.size() != 2 || bd[0] != xd[1] || od[0] != xd[1] ||
      od[1] != xd[0] || bd[1] > 255 || missing_bin < 0 || missing_bin > 255) {
    return ffi::Error::InvalidArgument(
        "jboost binning: X (n, F), borders (F, m <= 255), out (F, n) uint8");
  }
  const int64_t n = xd[0], n_features = xd[1], m = bd[1];
  const int64_t threads = std::max<int64_t>(1, std::min<int64_t>(n_threads, (n * n_features) >> 18));
  Parallel(threads, [&](int64_t t) {
    BinRows(X.typed_data(), n, n_features, borders.typed_data(), m, out->typed_data(), missing_bin,
            n * t / threads, n * (t + 1) / threads);
  });
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(JboostHistogram, HistogramImpl,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::U8>>()   // bins (..., F, n)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // payload (..., n, C)
                                  .Arg<ffi::Buffer<ffi::S32>>()  // leaf (..., n)
                                  .Arg<ffi::Buffer<ffi::S32>>()  // slot (..., L)
                                  .Ret<ffi::Buffer<ffi::F32>>()  // out (..., F, S, B, C)
                                  .Attr<int64_t>("n_threads")
                                  .Attr<bool>("cumulative"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(JboostHistogramSmallerSibling, SmallerSiblingImpl,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::U8>>()   // bins (..., F, n)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // payload (..., n, C)
                                  .Arg<ffi::Buffer<ffi::S32>>()  // leaf (..., n) in [0, 2S)
                                  .Ret<ffi::Buffer<ffi::F32>>()  // out (..., F, S, B, C)
                                  .Ret<ffi::Buffer<ffi::S32>>()  // right_smaller (..., S)
                                  .Attr<int64_t>("n_threads")
                                  .Attr<bool>("cumulative"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(JboostBin, BinImpl,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::F32>>()  // X (n, F)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // borders (F, m)
                                  .Ret<ffi::Buffer<ffi::U8>>()   // out (F, n)
                                  .Attr<int64_t>("n_threads")
                                  .Attr<int64_t>("missing_bin"));
