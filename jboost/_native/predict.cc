// jboost's CPU kernels: prediction (jboost.trees.family.predict_raw).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "parallel.h"

namespace jboost {
namespace {

constexpr int64_t kPredictBlock = 128;

// Rows 0..n-1 in blocks of kPredictBlock, split into contiguous runs of blocks over at most
// n_threads threads and at most `max_threads` (the work a prediction's size pays threads for);
// fn(r0, r1) on each run.
template <typename Fn>
void ForRowBlocks(int64_t n, int64_t n_threads, int64_t max_threads, Fn fn) {
  const int64_t blocks = (n + kPredictBlock - 1) / kPredictBlock;
  const int64_t threads = std::max<int64_t>(1, std::min<int64_t>({n_threads, blocks, max_threads}));
  Parallel(threads, [&](int64_t t) {
    fn(blocks * t / threads * kPredictBlock,
       std::min(n, blocks * (t + 1) / threads * kPredictBlock));
  });
}

// Prediction (jboost.trees.family.predict_raw): out[i, k] = the sum over trees t, in order from 0.0f, of
// leaf_values[t, leaf_t(i), k], with leaf_t(i) = sum_d right_{t,d}(i) << d and
// right = isnan(x) ? missing_right[t, d] : x > border[t, d], x = X[i, feature[t, d]] (values and
// borders compared as ClampSubnormal gives them: a subnormal as the smallest normal number of its
// sign; a feature index is clamped into range as XLA's gather does). Rows go in blocks of
// kPredictBlock copied feature-major into a small buffer, and every tree is applied to a block
// before the next block: X is read once (the lax.scan over trees streams each tree's columns from
// memory), and the comparisons run over contiguous lanes. Each row's sum is the same float
// additions in the same order as the scan's: bitwise the same result, whatever the number of
// threads (threads split the rows).
JBOOST_AVX2_CLONES
void PredictRows(const float* X, int64_t row_stride, int64_t feature_stride, int64_t n_features,
                 const int32_t* features, const float* borders, const uint8_t* missing_right,
                 const float* leaves, int64_t n_trees, int64_t depth, int64_t k, float* out,
                 int64_t r0, int64_t r1) {
  constexpr int64_t kB = kPredictBlock;
  std::vector<float> cols(n_features * kB);
  std::vector<float> acc(kB * k);
  std::vector<int32_t> feat(n_trees * depth);
  std::vector<float> border(n_trees * depth);
  for (int64_t j = 0; j < n_trees * depth; ++j) {
    feat[j] = static_cast<int32_t>(std::clamp<int64_t>(features[j], 0, n_features - 1));
    border[j] = ClampSubnormal(borders[j]);
  }
  alignas(64) uint32_t idx[kB];
  const int64_t n_leaves = int64_t{1} << depth;
  for (int64_t b0 = r0; b0 < r1; b0 += kB) {
    const int64_t m = std::min(kB, r1 - b0);
    for (int64_t i = 0; i < kB; ++i) {  // padded rows past the end read 0 and are not written
      for (int64_t f = 0; f < n_features; ++f) {
        cols[f * kB + i] = i < m ? ClampSubnormal(X[(b0 + i) * row_stride + f * feature_stride]) : 0.0f;
      }
    }
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t t = 0; t < n_trees; ++t) {
      for (int64_t i = 0; i < kB; ++i) idx[i] = 0;
      for (int64_t d = 0; d < depth; ++d) {
        const float* c = cols.data() + feat[t * depth + d] * kB;
        const float thr = border[t * depth + d];
        // NaN compares false: x > thr sends it left, !(x <= thr) right. One compare a lane.
        if (missing_right[t * depth + d]) {
          for (int64_t i = 0; i < kB; ++i) idx[i] |= static_cast<uint32_t>(!(c[i] <= thr)) << d;
        } else {
          for (int64_t i = 0; i < kB; ++i) idx[i] |= static_cast<uint32_t>(c[i] > thr) << d;
        }
      }
      const float* lv = leaves + t * n_leaves * k;
      if (k == 1) {
        for (int64_t i = 0; i < m; ++i) acc[i] += lv[idx[i]];
      } else {
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < k; ++j) acc[i * k + j] += lv[idx[i] * k + j];
        }
      }
    }
    std::memcpy(out + b0 * k, acc.data(), sizeof(float) * m * k);
  }
}

// Depth-wise trees' node tables (jboost.trees.depthwise.DepthwiseTrees): per row and tree, max(D, 1)
// pointer steps from the root (jboost.trees.node_table.walk), then the leaf's values added in tree
// order: the pure-JAX walk's floats, its clamped gathers included (an index past a table's end
// reads its last slot; a negative leaf index counts from the end).
JBOOST_AVX2_CLONES
void PredictTableRows(const float* X, int64_t row_stride, int64_t feature_stride,
                      int64_t n_features, const int32_t* features, const float* borders,
                      const uint8_t* missing_right, const int32_t* children, const float* leaves,
                      int64_t n_trees, int64_t n_nodes, int64_t depth, int64_t k, float* out,
                      int64_t r0, int64_t r1) {
  constexpr int64_t kB = kPredictBlock;
  const int64_t n_leaves = n_nodes + 1, steps = std::max<int64_t>(depth, 1);
  std::vector<float> cols(n_features * kB);
  std::vector<float> acc(kB * k);
  std::vector<int32_t> feat(n_trees * n_nodes);
  std::vector<float> border(n_trees * n_nodes);
  for (int64_t j = 0; j < n_trees * n_nodes; ++j) {
    feat[j] = static_cast<int32_t>(std::clamp<int64_t>(features[j], 0, n_features - 1));
    border[j] = ClampSubnormal(borders[j]);
  }
  for (int64_t b0 = r0; b0 < r1; b0 += kB) {
    const int64_t m = std::min(kB, r1 - b0);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t f = 0; f < n_features; ++f) {
        cols[f * kB + i] = ClampSubnormal(X[(b0 + i) * row_stride + f * feature_stride]);
      }
    }
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t t = 0; t < n_trees; ++t) {
      const int32_t* ft = feat.data() + t * n_nodes;
      const float* bt = border.data() + t * n_nodes;
      const uint8_t* mt = missing_right + t * n_nodes;
      const int32_t* ct = children + t * n_nodes * 2;
      const float* lv = leaves + t * n_leaves * k;
      for (int64_t i = 0; i < m; ++i) {
        int64_t cur = 0;
        for (int64_t s = 0; s < steps && cur >= 0; ++s) {
          const int64_t node = std::min<int64_t>(cur, n_nodes - 1);
          const float x = cols[ft[node] * kB + i];
          const bool right = mt[node] ? !(x <= bt[node]) : x > bt[node];
          cur = ct[node * 2 + (right ? 1 : 0)];
        }
        int64_t leaf = -cur - 1;  // ~cur
        if (leaf < 0) leaf += n_leaves;
        leaf = std::clamp<int64_t>(leaf, 0, n_leaves - 1);
        const float* v = lv + leaf * k;
        for (int64_t j = 0; j < k; ++j) acc[i * k + j] += v[j];
      }
    }
    std::memcpy(out + b0 * k, acc.data(), sizeof(float) * m * k);
  }
}

ffi::Error PredictTableImpl(ffi::Buffer<ffi::F32> X, ffi::Buffer<ffi::S32> features,
                            ffi::Buffer<ffi::F32> borders, ffi::Buffer<ffi::U8> missing_right,
                            ffi::Buffer<ffi::S32> children, ffi::Buffer<ffi::F32> leaves,
                            ffi::ResultBuffer<ffi::F32> out, int64_t depth, int64_t n_threads,
                            bool feature_major) {
  auto xd = X.dimensions();
  auto fd = features.dimensions();
  auto cd = children.dimensions();
  auto ld = leaves.dimensions();
  auto od = out->dimensions();
  if (xd.size() != 2 || fd.size() != 2 || cd.size() != 3 || ld.size() != 3 || od.size() != 2 ||
      borders.element_count() != features.element_count() ||
      missing_right.element_count() != features.element_count() || fd[1] < 1 ||
      cd[0] != fd[0] || cd[1] != fd[1] || cd[2] != 2 || ld[0] != fd[0] || ld[1] != fd[1] + 1 ||
      od[1] != ld[2] || depth < 0) {
    return ffi::Error::InvalidArgument(
        "jboost depthwise predict: X (n, F) or (F, n), features/borders/missing_right (T, N), "
        "children (T, N, 2), leaf_values (T, N + 1, K), out (n, K)");
  }
  const int64_t n = feature_major ? xd[1] : xd[0], n_features = feature_major ? xd[0] : xd[1];
  const int64_t n_trees = fd[0], n_nodes = fd[1], k = ld[2];
  if (od[0] != n) return ffi::Error::InvalidArgument("jboost depthwise predict: out must have n rows");
  if (n == 0 || k == 0) return ffi::Error::Success();
  if (n_features == 0) return ffi::Error::InvalidArgument("jboost depthwise predict: no features");
  const int64_t row_stride = feature_major ? 1 : n_features;
  const int64_t feature_stride = feature_major ? n : 1;
  ForRowBlocks(n, n_threads, (n * std::max<int64_t>(n_trees, 1) * (depth + 1)) >> 16,
               [&](int64_t r0, int64_t r1) {
    PredictTableRows(X.typed_data(), row_stride, feature_stride, n_features,
                     features.typed_data(), borders.typed_data(), missing_right.typed_data(),
                     children.typed_data(), leaves.typed_data(), n_trees, n_nodes, depth, k,
                     out->typed_data(), r0, r1);
  });
  return ffi::Error::Success();
}

ffi::Error PredictImpl(ffi::Buffer<ffi::F32> X, ffi::Buffer<ffi::S32> features,
                       ffi::Buffer<ffi::F32> borders, ffi::Buffer<ffi::U8> missing_right,
                       ffi::Buffer<ffi::F32> leaves, ffi::ResultBuffer<ffi::F32> out,
                       int64_t n_threads, bool feature_major) {
  auto xd = X.dimensions();
  auto fd = features.dimensions();
  auto ld = leaves.dimensions();
  auto od = out->dimensions();
  if (xd.size() != 2 || fd.size() != 2 || ld.size() != 3 || od.size() != 2 ||
      borders.element_count() != features.element_count() ||
      missing_right.element_count() != features.element_count() || ld[0] != fd[0] ||
      fd[1] > 30 || ld[1] != (int64_t{1} << fd[1]) || od[1] != ld[2]) {
    return ffi::Error::InvalidArgument(
        "jboost predict: X (n, F) or (F, n), features/borders/missing_right (T, D), "
        "leaf_values (T, 2**D, K), out (n, K)");
  }
  const int64_t n = feature_major ? xd[1] : xd[0], n_features = feature_major ? xd[0] : xd[1];
  const int64_t n_trees = fd[0], depth = fd[1], k = ld[2];
  if (od[0] != n) return ffi::Error::InvalidArgument("jboost predict: out must have n rows");
  if (n == 0 || k == 0) return ffi::Error::Success();
  if (n_features == 0 && depth > 0) {
    return ffi::Error::InvalidArgument("jboost predict: trees with levels need features");
  }
  const int64_t row_stride = feature_major ? 1 : n_features;
  const int64_t feature_stride = feature_major ? n : 1;
  ForRowBlocks(n, n_threads, (n * std::max<int64_t>(n_trees, 1) * (depth + 1)) >> 18,
               [&](int64_t r0, int64_t r1) {
    PredictRows(X.typed_data(), row_stride, feature_stride, std::max<int64_t>(n_features, 1),
                features.typed_data(), borders.typed_data(), missing_right.typed_data(),
                leaves.typed_data(), n_trees, depth, k, out->typed_data(), r0, r1);
  });
  return ffi::Error::Success();
}

// ---------------------------------------------------------------------------------------------
// The FFI boundary: no C++ exception crosses it (it would end the process), and the kernels'
// threads are XLA's (the call's intra-op thread pool, the FFI context's ThreadPool, bound first:
// Guarded makes it the pool of Parallel for the call). Every handler runs inside Guarded, which turns an exception (std::bad_alloc from a scratch allocation, an
// exception rethrown by Parallel from a worker thread, ...) into an FFI error that JAX raises
// in Python, naming the kernel.

}  // namespace
}  // namespace jboost

using jboost::Guarded;

XLA_FFI_DEFINE_HANDLER_SYMBOL(JboostPredict, Guarded<jboost::PredictImpl>::Call,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::F32>>()  // X (n, F), or (F, n)
                                  .Arg<ffi::Buffer<ffi::S32>>()  // features (T, D)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // borders (T, D)
                                  .Arg<ffi::Buffer<ffi::U8>>()   // missing_right (T, D)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // leaf_values (T, 2**D, K)
                                  .Ret<ffi::Buffer<ffi::F32>>()  // out (n, K)
                                  .Attr<int64_t>("n_threads")
                                  .Attr<bool>("feature_major"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(JboostPredictDepthwise, Guarded<jboost::PredictTableImpl>::Call,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::F32>>()  // X (n, F), or (F, n)
                                  .Arg<ffi::Buffer<ffi::S32>>()  // features (T, N)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // borders (T, N)
                                  .Arg<ffi::Buffer<ffi::U8>>()   // missing_right (T, N)
                                  .Arg<ffi::Buffer<ffi::S32>>()  // children (T, N, 2)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // leaf_values (T, N + 1, K)
                                  .Ret<ffi::Buffer<ffi::F32>>()  // out (n, K)
                                  .Attr<int64_t>("depth")
                                  .Attr<int64_t>("n_threads")
                                  .Attr<bool>("feature_major"));
