// jboost's CPU kernels: binning (jboost.data.binning.bin_features).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "parallel.h"

namespace jboost {
namespace {

// Binning (jboost.data.binning.bin_features): out[f, i] = missing_bin when X[i, f] is NaN, else the
// number of borders[f, :] strictly below X[i, f] (searchsorted, side="left"), values and borders
// compared as ClampSubnormal gives them (a subnormal as the smallest normal number of its sign).
// A branch-free binary search per value; threads split the rows. Exact integer results: identical
// to the pure-JAX path.
void BinRows(const float* X, int64_t n, int64_t n_features, const float* borders, int64_t m,
             uint8_t* out, int64_t missing_bin, int64_t r0, int64_t r1) {
  int64_t top = 1;
  while (top * 2 <= m) top *= 2;
  constexpr int64_t kBlock = 256;
  for (int64_t b0 = r0; b0 < r1; b0 += kBlock) {
    const int64_t b1 = std::min(r1, b0 + kBlock);
    for (int64_t f = 0; f < n_features; ++f) {
      const float* bf = borders + f * m;
      uint8_t* o = out + f * n;
      for (int64_t i = b0; i < b1; ++i) {
        const float x = ClampSubnormal(X[i * n_features + f]);  // NaN stays NaN
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
  std::vector<float> clamped(borders.typed_data(), borders.typed_data() + n_features * m);
  for (float& b : clamped) b = ClampSubnormal(b);
  const int64_t threads = std::max<int64_t>(1, std::min<int64_t>(n_threads, (n * n_features) >> 18));
  Parallel(threads, [&](int64_t t) {
    BinRows(X.typed_data(), n, n_features, clamped.data(), m, out->typed_data(), missing_bin,
            n * t / threads, n * (t + 1) / threads);
  });
  return ffi::Error::Success();
}


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
