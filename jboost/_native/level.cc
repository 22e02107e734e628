// jboost's CPU kernels: one fused level of an oblivious tree (jboost.trees.histograms.level_gains):
// the level's histograms (directly or by subtraction), their prefix sums and the split gains,
// feature by feature while its histograms are in cache.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "gains.h"
#include "parallel.h"
#include "rows.h"

namespace jboost {
namespace {

// Zero-initialised scratch that its users return to all-zero after each use (the sparse level
// clears the cells it read): no O(L * B) clearing per feature.
struct ZeroScratch {
  std::unique_ptr<float[]> data;
  size_t size = 0;
  float* Get(size_t n) {
    if (n > size) {
      data.reset(new float[n]());
      size = n;
    }
    return data.get();
  }
};

inline int CountTrailingZeros(uint64_t w) {
#if defined(_MSC_VER)
  unsigned long i;
  _BitScanForward64(&i, w);
  return static_cast<int>(i);
#else
  return __builtin_ctzll(w);
#endif
}

// The sparse level of one feature (C = 2, leaves built directly): `raw` (L, B, 2) histograms
// (all-zero outside the cells marked in `bits`, which are cleared here), to the gains out
// (B - 1, 2). Each leaf's cumulative sums are accumulated over its marked cells only, in bin
// order: the same float sums as the prefix sums over all bins (adding a zero changes nothing).
void SparseFeatureGains(float* raw, const uint64_t* bits, int64_t n_leaves, int64_t n_bins,
                        float l2, float mcw, bool missing, float* out, float* scratch) {
  GainEvents g(scratch, n_bins);
  const int64_t nt = n_bins - 1;
  for (int64_t leaf = 0; leaf < n_leaves; ++leaf) {
    const int64_t c0 = leaf * n_bins, c1 = c0 + n_bins;  // cells [c0, c1)
    float cg = 0.0f, ch = 0.0f, xg = 0.0f, xh = 0.0f;  // non-missing sums; the missing bin's
    int64_t m = 0;
    for (int64_t w = c0 >> 6; w <= (c1 - 1) >> 6; ++w) {
      uint64_t word = bits[w];
      if (w == c0 >> 6) word &= ~uint64_t{0} << (c0 & 63);
      if (w == (c1 - 1) >> 6) word &= ~uint64_t{0} >> (63 - ((c1 - 1) & 63));
      while (word != 0) {
        const int64_t cell = w * 64 + CountTrailingZeros(word);
        word &= word - 1;
        const int64_t t = cell - c0;
        float* r = raw + 2 * cell;
        if (t < nt) {
          cg += r[0];
          ch += r[1];
          ++m;
          g.pos[m] = static_cast<int32_t>(t);
          g.gs[m] = cg;
          g.hs[m] = ch;
        } else {
          xg = r[0];
          xh = r[1];
        }
        r[0] = r[1] = 0.0f;
      }
    }
    const float G = cg + xg, H = ch + xh;  // the prefix sum at the missing bin
    g.AddLeaf(m, G, H, G - cg, H - ch, l2, mcw, missing);
  }
  g.Write(out, missing);
}

// One feature of a dense level, after its rows were summed into `built` (the L leaves' (B, C)
// histograms, or with `parent` (this feature's L/2 slots of the previous level) the smaller
// sibling of each pair, which[j] = 1 when that is leaf j + L/2): prefix sums over the bins (built
// directly, each leaf's empty tail of bins skipped: `used` holds L ints), the other siblings by
// subtraction into `full` (L * B * C floats), the level's cumulative histograms copied to
// `hist_out` when it is not null, and the split gains (B - 1, 2) into `gains`.
void FinishFeature(float* built, const float* parent, const int32_t* which, int64_t n_leaves,
                   int64_t n_bins, int64_t c, float* full, float* hist_out, int32_t* used, float l2,
                   float mcw, bool missing, float* gains, float* acc) {
  const bool subtract = parent != nullptr;
  const int64_t n_slots = subtract ? n_leaves / 2 : n_leaves;
  const int64_t slot_size = n_bins * c;
  const bool trim = !subtract && c == 2;
  if (trim) {
    for (int64_t j = 0; j < n_leaves; ++j) used[j] = UsedBins(built + j * slot_size, n_bins, c);
  }
  PrefixSums(built, n_slots, n_bins, c, trim ? used : nullptr);
  float* dst = hist_out != nullptr ? hist_out : (subtract ? full : built);
  if (subtract) {
    for (int64_t j = 0; j < n_slots; ++j) {
      const float* small = built + j * slot_size;
      const float* pj = parent + j * slot_size;
      float* ds = dst + (which[j] ? j + n_slots : j) * slot_size;
      float* dl = dst + (which[j] ? j : j + n_slots) * slot_size;
      for (int64_t e = 0; e < slot_size; ++e) {
        ds[e] = small[e];
        dl[e] = pj[e] - small[e];
      }
    }
  } else if (dst != built) {
    std::memcpy(dst, built, sizeof(float) * n_leaves * slot_size);
  }
  Gains(dst, n_leaves, n_bins, c, l2, mcw, missing, gains, acc);
}

// One fused level of one model, feature by feature while its histograms are in cache: the
// histograms of the level's L leaves (directly, or with `parent` (F, L/2, B, C) the previous
// level's cumulative histograms: only the smaller sibling of each pair from the rows, the other
// by subtraction), their prefix sums, the split gains (F, B - 1, 2); the cumulative histograms
// are written to hist_out (F, L, B, C) only when it is not null.
//
// Sparse: when one output (C = 2) is built directly with no histograms to write and there are
// fewer than kSparseRowsPerCell rows per (leaf, bin) cell, most cells stay empty (a deep level
// of a small data set): the building marks the cells it touches in a bitmap and each leaf's sums
// and gains are taken over its marked cells only (SparseFeatureGains), which are then cleared
// (the histogram buffer stays all-zero between features: no clearing of L * B cells). The gains
// are bitwise those of the dense path (see GainEvents).
constexpr int64_t kSparseRowsPerCell = 2;

// One feature of a wide level (C > 16), as FinishFeature, over the bins [0, u) and the missing
// bin B - 1 only: no row of the level is in bins [u, B - 1), so their cumulative sums are those
// of bin u - 1 (written out, filled, only into hist_out, the whole (L, B, C) histograms).
void FinishFeatureWide(float* built, const float* parent, const int32_t* which, int64_t n_leaves,
                       int64_t n_bins, int64_t c, int64_t u, float* full, float* hist_out, float l2,
                       float mcw, bool missing, float* gains, float* scratch) {
  const bool subtract = parent != nullptr;
  const int64_t n_slots = subtract ? n_leaves / 2 : n_leaves;
  const int64_t slot_size = n_bins * c;
  const int64_t nt = n_bins - 1;
  const bool whole = hist_out != nullptr;  // every bin, else [0, u) and nt
  for (int64_t j = 0; j < n_slots; ++j) {
    float* h = built + j * slot_size;
    for (int64_t t = 1; t < u; ++t) AddRun(h + t * c, h + (t - 1) * c, c);
    if (whole) {
      for (int64_t t = u; t < nt; ++t) std::memcpy(h + t * c, h + (u - 1) * c, sizeof(float) * c);
    }
    AddRun(h + nt * c, h + (u - 1) * c, c);
  }
  float* dst = whole ? hist_out : (subtract ? full : built);
  auto copy_bins = [&](float* to, const float* from, const float* minus) {
    auto one = [&](int64_t t0, int64_t t1) {
      for (int64_t e = t0 * c; e < t1 * c; ++e) to[e] = minus ? from[e] - minus[e] : from[e];
    };
    if (whole) {
      one(0, n_bins);
    } else {
      one(0, u);
      one(nt, n_bins);
    }
  };
  if (subtract) {
    for (int64_t j = 0; j < n_slots; ++j) {
      const float* small = built + j * slot_size;
      const float* pj = parent + j * slot_size;
      copy_bins(dst + (which[j] ? j + n_slots : j) * slot_size, small, nullptr);
      copy_bins(dst + (which[j] ? j : j + n_slots) * slot_size, pj, small);
    }
  } else if (dst != built) {
    for (int64_t j = 0; j < n_leaves; ++j) copy_bins(dst + j * slot_size, built + j * slot_size, nullptr);
  }
  WideGains(dst, n_leaves, n_bins, c, u, l2, mcw, missing, gains, scratch);
}

// Level for wide payloads (C > 16, any number of outputs): the same steps as the dense path of
// Level, two features per pass over the rows, and only over the bins some row is in (the
// features' used bins, found by one pass over the bins: data with few distinct values per
// feature costs its used bins, not B).
void LevelWide(const uint8_t* b, int64_t n_features, int64_t n, const float* p, int64_t c,
               const int32_t* l, int64_t n_leaves, int64_t n_bins, const float* parent, float l2,
               float mcw, bool missing, float* gains, float* hist_out, int64_t n_threads) {
  const bool subtract = parent != nullptr;
  const int64_t n_slots = subtract ? n_leaves / 2 : n_leaves;
  const int64_t slot_size = n_bins * c;
  const int64_t hist_size = n_slots * slot_size;
  const int64_t full_size = n_leaves * slot_size;
  const int64_t nt = n_bins - 1;
  const uint32_t max_bin = static_cast<uint32_t>(nt);
  std::vector<int32_t> slot(n_leaves), which(std::max<int64_t>(n_slots, 1), 0);
  if (subtract) {
    SmallerSlots(p, l, n, c, n_slots, n_threads, slot.data(), which.data());
  } else {
    for (int64_t j = 0; j < n_leaves; ++j) slot[j] = static_cast<int32_t>(j);
  }
  const int64_t threads = ThreadsFor(n_threads, (n * n_features + 4 * n_features * n_leaves * n_bins) * (c / 2));
  const Compacted rows = Compact(n, p, c, l, slot.data(), n_leaves, n_slots, n_bins, threads);
  const int64_t f_threads = std::min<int64_t>(threads, n_features);
  constexpr int64_t kGroup = 2;  // features per pass over the rows (ChunkIntoWide)
  Parallel(f_threads, [&](int64_t t) {
    static thread_local Scratch scratch;
    const int64_t f0 = n_features * t / f_threads, f1 = n_features * (t + 1) / f_threads;
    float* loc = reinterpret_cast<float*>(scratch.Get(
        sizeof(float) * (kGroup * hist_size + full_size + WideGainScratch(n_bins, c))));
    float* full = loc + kGroup * hist_size;
    float* gs = full + full_size;
    int64_t used[kGroup];
    for (int64_t g0 = f0; g0 < f1; g0 += kGroup) {
      const int64_t g1 = std::min(g0 + kGroup, f1);
      for (int64_t f = g0; f < g1; ++f) {
        const uint8_t* col = b + f * n;
        uint32_t top = 0;  // the last non-missing bin of any row (0 if none)
        for (int64_t i = 0; i < n; ++i) {
          const uint32_t v = col[i];
          top = std::max(top, v < max_bin ? v : 0u);
        }
        const int64_t u = used[f - g0] = static_cast<int64_t>(top) + 1;
        float* h = loc + (f - g0) * hist_size;
        for (int64_t j = 0; j < n_slots; ++j) {
          std::memset(h + j * slot_size, 0, sizeof(float) * u * c);
          std::memset(h + j * slot_size + nt * c, 0, sizeof(float) * c);
        }
      }
      ChunksInto(b, n, rows, loc, hist_size, c, max_bin, g0, g1, g0);
      for (int64_t f = g0; f < g1; ++f) {
        FinishFeatureWide(loc + (f - g0) * hist_size, subtract ? parent + f * hist_size : nullptr,
                          which.data(), n_leaves, n_bins, c, used[f - g0], full,
                          hist_out != nullptr ? hist_out + f * full_size : nullptr, l2, mcw,
                          missing, gains + f * 2 * nt, gs);
      }
    }
  });
}

void Level(const uint8_t* b, int64_t n_features, int64_t n, const float* p, int64_t c,
           const int32_t* l, int64_t n_leaves, int64_t n_bins, const float* parent, float l2,
           float mcw, bool missing, float* gains, float* hist_out, int64_t n_threads) {
  if (c > kMaxNarrowChannels) {
    LevelWide(b, n_features, n, p, c, l, n_leaves, n_bins, parent, l2, mcw, missing, gains, hist_out,
              n_threads);
    return;
  }
  const bool subtract = parent != nullptr;
  const int64_t n_slots = subtract ? n_leaves / 2 : n_leaves;
  const int64_t slot_size = n_bins * c;
  const int64_t hist_size = n_slots * slot_size;   // one feature's built histograms
  const int64_t full_size = n_leaves * slot_size;  // one feature's level histograms
  const uint32_t max_bin = static_cast<uint32_t>(n_bins - 1);
  std::vector<int32_t> slot(n_leaves), which(std::max<int64_t>(n_slots, 1), 0);
  if (subtract) {
    SmallerSlots(p, l, n, c, n_slots, n_threads, slot.data(), which.data());
  } else {
    for (int64_t j = 0; j < n_leaves; ++j) slot[j] = static_cast<int32_t>(j);
  }
  // Work: the row updates, plus the prefix sums and gains over every cell unless the level is
  // likely sparse (below; then only the touched cells are read). A small level stays on one
  // thread: starting threads costs more than it saves (a spam-sized fit measured 20-35% faster).
  const bool may_be_sparse = c == 2 && !subtract && hist_out == nullptr;
  const int64_t sparse_rows = kSparseRowsPerCell * n_leaves * n_bins;
  const bool likely_sparse = may_be_sparse && n < sparse_rows;
  const int64_t threads = ThreadsFor(
      n_threads, n * n_features + (likely_sparse ? 0 : 4 * n_features * full_size / std::max<int64_t>(c, 1)));
  const Compacted rows = Compact(n, p, c, l, slot.data(), n_leaves, n_slots, n_bins, threads);
  int64_t n_rows = 0;
  for (const Rows& rs : rows.chunks) n_rows += rs.m;
  const bool sparse = may_be_sparse && n_rows < sparse_rows;
  const int64_t words = (n_leaves * n_bins + 63) / 64;  // bitmap words per feature (sparse)
  const int64_t f_threads = std::min<int64_t>(threads, n_features);
  constexpr int64_t kGroup = 4;  // features built per pass over the rows
  Parallel(f_threads, [&](int64_t t) {
    static thread_local Scratch scratch;
    const int64_t f0 = n_features * t / f_threads, f1 = n_features * (t + 1) / f_threads;
    if (sparse) {
      static thread_local ZeroScratch zero;
      float* loc = zero.Get(kGroup * hist_size);
      float* acc = reinterpret_cast<float*>(
          scratch.Get(sizeof(float) * kGainScratch * n_bins + sizeof(uint64_t) * kGroup * words));
      uint64_t* bits = reinterpret_cast<uint64_t*>(acc + kGainScratch * n_bins);
      for (int64_t g0 = f0; g0 < f1; g0 += kGroup) {
        const int64_t g1 = std::min(g0 + kGroup, f1);
        std::memset(bits, 0, sizeof(uint64_t) * (g1 - g0) * words);
        ChunksInto(b, n, rows, loc, hist_size, c, max_bin, g0, g1, g0, bits, words);
        for (int64_t f = g0; f < g1; ++f) {
          SparseFeatureGains(loc + (f - g0) * hist_size, bits + (f - g0) * words, n_leaves, n_bins,
                             l2, mcw, missing, gains + f * 2 * (n_bins - 1), acc);
        }
      }
      return;
    }
    float* loc = reinterpret_cast<float*>(scratch.Get(
        sizeof(float) * (kGroup * hist_size + full_size + kGainScratch * n_bins) +
        sizeof(int32_t) * n_leaves));
    float* full = loc + kGroup * hist_size;
    float* acc = full + full_size;  // an even float offset: 8-byte aligned
    int32_t* used = reinterpret_cast<int32_t*>(acc + kGainScratch * n_bins);  // see UsedBins
    for (int64_t g0 = f0; g0 < f1; g0 += kGroup) {
      const int64_t g1 = std::min(g0 + kGroup, f1);
      std::memset(loc, 0, sizeof(float) * (g1 - g0) * hist_size);
      ChunksInto(b, n, rows, loc, hist_size, c, max_bin, g0, g1, g0);
      for (int64_t f = g0; f < g1; ++f) {
        FinishFeature(loc + (f - g0) * hist_size, subtract ? parent + f * hist_size : nullptr,
                      which.data(), n_leaves, n_bins, c, full,
                      hist_out != nullptr ? hist_out + f * full_size : nullptr, used, l2, mcw,
                      missing, gains + f * 2 * (n_bins - 1), acc);
      }
    }
  });
}

// One fused level per model (see Level). gains (..., F, B - 1, 2); hist (..., F, L, B, C) when
// write_hist, else a (..., 1) placeholder; parent (..., F, L / 2, B, C) when subtract, else a
// (..., 1) placeholder; l2 and min_child_weight (...) per model.
// The first level (one leaf, C = 2) of `n_models` models on the same bins (a vmapped fit:
// sweeps, bagging): one pass over each feature's bins serves a group of up to kModelGroup
// models. Their payloads are interleaved row by row (row r: g_0 h_0 g_1 h_1 ...; zero for a
// model whose row has no leaf), so a row adds one contiguous run of 2 * MG floats to its bin's
// cells (B, MG, 2) instead of MG scattered pairs. Each model's cells still sum its rows in row
// order (a zero payload adds nothing): bitwise the histograms of separate calls, which then go
// through the same prefix sums and gains as Level's dense path.
constexpr int64_t kModelGroup = 8;

template <int MG>
void FirstLevelGroup(const uint8_t* b, int64_t n_features, const int32_t* rows, int64_t n_rows,
                     int64_t n, const float* inter, int64_t n_bins, int64_t f0, int64_t f1,
                     float* hist) {
  const uint32_t max_bin = static_cast<uint32_t>(n_bins - 1);
  for (int64_t f = f0; f < f1; ++f) {
    float* h = hist + (f - f0) * n_bins * 2 * MG;
    std::memset(h, 0, sizeof(float) * n_bins * 2 * MG);
    const uint8_t* col = b + f * n;
    for (int64_t r = 0; r < n_rows; ++r) {
      const float* src = inter + r * 2 * MG;
      float* dst = h + std::min<uint32_t>(col[rows[r]], max_bin) * 2 * MG;
      float v[2 * MG];  // all loads, then all stores: vectorised (src and dst never overlap)
      for (int j = 0; j < 2 * MG; ++j) v[j] = dst[j] + src[j];
      for (int j = 0; j < 2 * MG; ++j) dst[j] = v[j];
    }
  }
}

// One model's operands and outputs of a level call (LevelImpl).
struct LevelModel {
  const float* payload;
  const int32_t* leaf;
  float l2, mcw;
  float* gains;
  float* hist_out;  // nullptr: not written
};

void FirstLevelBatch(const uint8_t* b, int64_t n_features, int64_t n,
                     const std::vector<LevelModel>& models, int64_t n_bins, bool missing,
                     int64_t n_threads) {
  const int64_t slot_size = n_bins * 2;
  const int64_t n_models = static_cast<int64_t>(models.size());
  for (int64_t m0 = 0; m0 < n_models; m0 += kModelGroup) {
    const LevelModel* group = models.data() + m0;
    const int64_t mg = std::min(kModelGroup, n_models - m0);
    const int64_t width = mg == 1 ? 1 : mg <= 2 ? 2 : mg <= 4 ? 4 : 8;  // padded group size
    // The rows some model of the group uses, with the group's payloads interleaved.
    static thread_local Scratch scratch;
    char* mem = scratch.Get(static_cast<size_t>(n) * (sizeof(int32_t) + sizeof(float) * 2 * width));
    int32_t* rows = reinterpret_cast<int32_t*>(mem);
    float* inter = reinterpret_cast<float*>(rows + n);
    int64_t n_rows = 0;
    for (int64_t i = 0; i < n; ++i) {
      float* dst = inter + n_rows * 2 * width;
      bool any = false;
      for (int64_t j = 0; j < width; ++j) {
        const bool in = j < mg && group[j].leaf[i] == 0;
        dst[2 * j] = in ? group[j].payload[2 * i] : 0.0f;
        dst[2 * j + 1] = in ? group[j].payload[2 * i + 1] : 0.0f;
        any = any || dst[2 * j] != 0.0f || dst[2 * j + 1] != 0.0f;
      }
      rows[n_rows] = static_cast<int32_t>(i);
      n_rows += any;
    }
    const int64_t threads = std::min(ThreadsFor(n_threads, n_rows * n_features * width / 2), n_features);
    Parallel(threads, [&](int64_t t) {
      const int64_t f0 = n_features * t / threads, f1 = n_features * (t + 1) / threads;
      static thread_local Scratch local;
      float* hist = reinterpret_cast<float*>(local.Get(
          sizeof(float) * (4 * slot_size * width + slot_size + kGainScratch * n_bins) + sizeof(int32_t)));
      float* one = hist + 4 * slot_size * width;
      float* acc = one + slot_size;  // an even float offset: 8-byte aligned
      int32_t* used = reinterpret_cast<int32_t*>(acc + kGainScratch * n_bins);
      for (int64_t g0 = f0; g0 < f1; g0 += 4) {
        const int64_t g1 = std::min(g0 + 4, f1);
        switch (width) {
          case 1: FirstLevelGroup<1>(b, n_features, rows, n_rows, n, inter, n_bins, g0, g1, hist); break;
          case 2: FirstLevelGroup<2>(b, n_features, rows, n_rows, n, inter, n_bins, g0, g1, hist); break;
          case 4: FirstLevelGroup<4>(b, n_features, rows, n_rows, n, inter, n_bins, g0, g1, hist); break;
          default: FirstLevelGroup<8>(b, n_features, rows, n_rows, n, inter, n_bins, g0, g1, hist); break;
        }
        for (int64_t f = g0; f < g1; ++f) {
          const float* hf = hist + (f - g0) * slot_size * width;
          for (int64_t j = 0; j < mg; ++j) {
            for (int64_t t2 = 0; t2 < n_bins; ++t2) {
              one[2 * t2] = hf[(t2 * width + j) * 2];
              one[2 * t2 + 1] = hf[(t2 * width + j) * 2 + 1];
            }
            const LevelModel& m = group[j];
            FinishFeature(one, nullptr, nullptr, 1, n_bins, 2, nullptr,
                          m.hist_out != nullptr ? m.hist_out + f * slot_size : nullptr, used, m.l2,
                          m.mcw, missing, m.gains + f * 2 * (n_bins - 1), acc);
          }
        }
      }
    });
  }
}

ffi::Error LevelImpl(ffi::Buffer<ffi::U8> bins, ffi::Buffer<ffi::F32> payload,
                     ffi::Buffer<ffi::S32> leaf, ffi::Buffer<ffi::F32> parent,
                     ffi::Buffer<ffi::F32> l2, ffi::Buffer<ffi::F32> mcw,
                     ffi::ResultBuffer<ffi::F32> gains, ffi::ResultBuffer<ffi::F32> hist,
                     int64_t n_threads, int64_t n_leaves, bool subtract, bool missing,
                     bool write_hist) {
  auto gd = gains->dimensions();
  if (gd.size() < 3 || gd[gd.size() - 1] != 2) {
    return ffi::Error::InvalidArgument("jboost level: gains must be (..., F, B - 1, 2)");
  }
  const size_t nb = gd.size() - 3;
  std::vector<int64_t> shape(gd.begin(), gd.begin() + nb);
  int64_t n_models = 1;
  for (int64_t d : shape) n_models *= d;
  const int64_t n_features = gd[nb], n_bins = gd[nb + 1] + 1;
  auto bd = bins.dimensions();
  auto pd = payload.dimensions();
  auto ld = leaf.dimensions();
  if (bd.size() != nb + 2 || pd.size() != nb + 2 || ld.size() != nb + 1) {
    return ffi::Error::InvalidArgument("jboost level: operands disagree on the batch rank");
  }
  const int64_t n = bd[nb + 1], c = pd[nb + 1];
  if (bd[nb] != n_features || pd[nb] != n || ld[nb] != n || n_bins < 2 || n_bins > 256 ||
      c < 2 || c % 2 != 0 || n_leaves < 1 || (subtract && n_leaves % 2 != 0)) {
    return ffi::Error::InvalidArgument("jboost level: inconsistent shapes");
  }
  if (auto err = CheckIndexable("jboost level", n, n_leaves, n_bins, c); !err.success()) return err;
  std::vector<int64_t> ob, op, ol, opar, ol2, omcw, og, oh;
  const int64_t full = n_features * n_leaves * n_bins * c;
  auto hd = hist->dimensions();
  auto ad = parent.dimensions();
  const bool ok =
      BatchOffsets(bd, 2, shape, &ob) && BatchOffsets(pd, 2, shape, &op) &&
      BatchOffsets(ld, 1, shape, &ol) && BatchOffsets(ad, subtract ? 4 : 1, shape, &opar) &&
      BatchOffsets(l2.dimensions(), 0, shape, &ol2) &&
      BatchOffsets(mcw.dimensions(), 0, shape, &omcw) &&
      BatchOffsets(gd, 3, shape, &og) && BatchOffsets(hd, write_hist ? 4 : 1, shape, &oh) &&
      (!subtract || (ad[nb] == n_features && ad[nb + 1] == n_leaves / 2 &&
                     ad[nb + 2] == n_bins && ad[nb + 3] == c)) &&
      (!write_hist || hist->element_count() == n_models * full);
  if (!ok) return ffi::Error::InvalidArgument("jboost level: inconsistent operand shapes");
  std::vector<LevelModel> models(n_models);
  bool shared_bins = n_models > 1;
  for (int64_t m = 0; m < n_models; ++m) {
    models[m] = LevelModel{payload.typed_data() + op[m], leaf.typed_data() + ol[m],
                           l2.typed_data()[ol2[m]], mcw.typed_data()[omcw[m]],
                           gains->typed_data() + og[m],
                           write_hist ? hist->typed_data() + oh[m] : nullptr};
    shared_bins = shared_bins && ob[m] == ob[0];
  }
  if (shared_bins && n_leaves == 1 && !subtract && c == 2) {
    FirstLevelBatch(bins.typed_data() + ob[0], n_features, n, models, n_bins, missing, n_threads);
    return ffi::Error::Success();
  }
  ForEachModel(n_models, n_threads, [&](int64_t m, int64_t threads) {
    const LevelModel& a = models[m];
    Level(bins.typed_data() + ob[m], n_features, n, a.payload, c, a.leaf, n_leaves, n_bins,
          subtract ? parent.typed_data() + opar[m] : nullptr, a.l2, a.mcw, missing, a.gains,
          a.hist_out, threads);
  });
  return ffi::Error::Success();
}

}  // namespace
}  // namespace jboost

using jboost::Guarded;

XLA_FFI_DEFINE_HANDLER_SYMBOL(JboostLevel, Guarded<jboost::LevelImpl>::Call,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::U8>>()   // bins (..., F, n)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // payload (..., n, C)
                                  .Arg<ffi::Buffer<ffi::S32>>()  // leaf (..., n) in [0, L)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // parent (..., F, L/2, B, C) or (..., 1)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // l2 (...)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // min_child_weight (...)
                                  .Ret<ffi::Buffer<ffi::F32>>()  // gains (..., F, B-1, 2)
                                  .Ret<ffi::Buffer<ffi::F32>>()  // hist (..., F, L, B, C) or (..., 1)
                                  .Attr<int64_t>("n_threads")
                                  .Attr<int64_t>("n_leaves")
                                  .Attr<bool>("subtract")
                                  .Attr<bool>("missing")
                                  .Attr<bool>("write_hist"));
