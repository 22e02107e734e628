// jboost's CPU kernels: split gains from cumulative histograms summed over devices
// (jboost.trees.histograms.cumulative_split_gains).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "gains.h"
#include "parallel.h"

namespace jboost {
namespace {

// Split gains (..., F, B - 1, 2) from cumulative histograms cum (..., F, L, B, C) (after a psum
// over devices: see FeatureGains); threads over features.
ffi::Error SplitGainsImpl(ffi::Buffer<ffi::F32> cum, ffi::Buffer<ffi::F32> l2,
                          ffi::Buffer<ffi::F32> mcw, ffi::ResultBuffer<ffi::F32> gains,
                          int64_t n_threads, bool missing) {
  auto cd = cum.dimensions();
  if (cd.size() < 4) {
    return ffi::Error::InvalidArgument("jboost split gains: cum must be (..., F, L, B, C)");
  }
  const size_t nb = cd.size() - 4;
  std::vector<int64_t> shape(cd.begin(), cd.begin() + nb);
  int64_t n_models = 1;
  for (int64_t d : shape) n_models *= d;
  const int64_t n_features = cd[nb], n_leaves = cd[nb + 1], n_bins = cd[nb + 2], c = cd[nb + 3];
  auto gd = gains->dimensions();
  std::vector<int64_t> oc, ol2, omcw, og;
  if (c < 2 || c % 2 != 0 || n_bins < 2 || gd.size() != nb + 3 ||
      gd[nb] != n_features || gd[nb + 1] != n_bins - 1 || gd[nb + 2] != 2 ||
      !BatchOffsets(cd, 4, shape, &oc) || !BatchOffsets(l2.dimensions(), 0, shape, &ol2) ||
      !BatchOffsets(mcw.dimensions(), 0, shape, &omcw) || !BatchOffsets(gd, 3, shape, &og)) {
    return ffi::Error::InvalidArgument("jboost split gains: inconsistent shapes");
  }
  const int64_t per_feature = n_leaves * n_bins * c;
  ForEachModel(n_models, n_threads, [&](int64_t m, int64_t threads) {
    const int64_t t_used = std::min(ThreadsFor(threads, 4 * n_features * per_feature / c), n_features);
    Parallel(t_used, [&](int64_t t) {
      std::vector<double> acc(std::max(kGainScratch * n_bins, WideGainScratch(n_bins, c)) / 2 + 1);  // 8-byte aligned
      for (int64_t f = n_features * t / t_used; f < n_features * (t + 1) / t_used; ++f) {
        Gains(cum.typed_data() + oc[m] + f * per_feature, n_leaves, n_bins, c,
              l2.typed_data()[ol2[m]], mcw.typed_data()[omcw[m]], missing,
              gains->typed_data() + og[m] + f * 2 * (n_bins - 1),
              reinterpret_cast<float*>(acc.data()));
      }
    });
  });
  return ffi::Error::Success();
}

}  // namespace
}  // namespace jboost

using jboost::Guarded;

XLA_FFI_DEFINE_HANDLER_SYMBOL(JboostSplitGains, Guarded<jboost::SplitGainsImpl>::Call,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::F32>>()  // cum (..., F, L, B, C)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // l2 (...)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // min_child_weight (...)
                                  .Ret<ffi::Buffer<ffi::F32>>()  // gains (..., F, B-1, 2)
                                  .Attr<int64_t>("n_threads")
                                  .Attr<bool>("missing"));
