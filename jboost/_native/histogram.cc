// jboost's CPU kernels are XLA FFI custom calls (registered by jboost/_native/__init__.py), one
// file per kernel: histogram.cc (this file: histograms, jboost/trees/histograms.py), level.cc (one
// fused level of a tree), split_gains.cc, binning.cc, predict.cc; shared code in parallel.h (the
// parallel runtime and the FFI boundary), rows.h/.cc (histograms from rows) and gains.h/.cc
// (split gains); abi.cc (the ABI version checked at load, and a test of the boundary).
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
//
// Any number of outputs: payloads of up to 16 channels (K <= 8) take the paths as they were
// first written; wider ones take "wide" paths (rows.cc: ChunkIntoWide, level.cc: LevelWide,
// gains.cc: WideGains), vectorised over the channels and the bins, with the same sums in the
// same order per cell.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "parallel.h"
#include "rows.h"

namespace jboost {
namespace {

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
  if (auto err = CheckIndexable("jboost histogram", b->n, b->n_slots, b->n_bins, b->c);
      !err.success()) {
    return err;
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
  std::vector<int32_t> slot(2 * n_slots);
  SmallerSlots(p, l, n, c, n_slots, n_threads, slot.data(), which);
  Accumulate(bins, n_features, n, p, c, l, slot.data(), 2 * n_slots, n_slots, n_bins, out,
             n_threads, cumulative);
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

}  // namespace
}  // namespace jboost

using jboost::Guarded;

XLA_FFI_DEFINE_HANDLER_SYMBOL(JboostHistogram, Guarded<jboost::HistogramImpl>::Call,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::U8>>()   // bins (..., F, n)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // payload (..., n, C)
                                  .Arg<ffi::Buffer<ffi::S32>>()  // leaf (..., n)
                                  .Arg<ffi::Buffer<ffi::S32>>()  // slot (..., L)
                                  .Ret<ffi::Buffer<ffi::F32>>()  // out (..., F, S, B, C)
                                  .Attr<int64_t>("n_threads")
                                  .Attr<bool>("cumulative"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(JboostHistogramSmallerSibling, Guarded<jboost::SmallerSiblingImpl>::Call,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::U8>>()   // bins (..., F, n)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // payload (..., n, C)
                                  .Arg<ffi::Buffer<ffi::S32>>()  // leaf (..., n) in [0, 2S)
                                  .Ret<ffi::Buffer<ffi::F32>>()  // out (..., F, S, B, C)
                                  .Ret<ffi::Buffer<ffi::S32>>()  // right_smaller (..., S)
                                  .Attr<int64_t>("n_threads")
                                  .Attr<bool>("cumulative"));
