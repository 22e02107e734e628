// jboost's CPU kernels: binning (jboost.data.binning.bin_features).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "parallel.h"

namespace jboost {
namespace {

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


// ---------------------------------------------------------------------------------------------
// Prediction (jboost.trees.family.predict_raw): out[i, k] = the sum over trees t, in order from 0.0f, of
// leaf_values[t, leaf_t(i), k], with leaf_t(i) = sum_d right_{t,d}(i) << d and
// right = isnan(x) ? missing_right[t, d] : x > border[t, d], x = X[i, feature[t, d]] (subnormal
// values and borders taken as 0 as XLA's CPU comparisons do; a feature index is clamped into
// range as XLA's gather does). Rows go in blocks of kPredictBlock copied feature-major into a
// small buffer, and every tree is applied to a block before the next block: X is read once
// (the lax.scan over trees streams each tree's columns from memory), and the comparisons run
// over contiguous lanes. Each row's sum is the same float additions in the same order as the
// scan's: bitwise the same result, whatever the number of threads (threads split the rows).

}  // namespace
}  // namespace jboost

using jboost::Guarded;

XLA_FFI_DEFINE_HANDLER_SYMBOL(JboostBin, Guarded<jboost::BinImpl>::Call,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::F32>>()  // X (n, F)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // borders (F, m)
                                  .Ret<ffi::Buffer<ffi::U8>>()   // out (F, n)
                                  .Attr<int64_t>("n_threads")
                                  .Attr<int64_t>("missing_bin"));
