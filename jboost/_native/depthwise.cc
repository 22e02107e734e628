// jboost's CPU kernels: one whole depth-wise tree per call (jboost.trees.depthwise.fit_tree's compact
// path, the random forests' grower), registered by jboost/trees/depthwise.py.
//
// Level by level, as the pure-JAX compact path computes it:
//   * the nodes that may split (not yet a leaf, at least two rows of non-zero payload) get a slot,
//     in node order, at most S_d = max(1, min(2**d, max_nodes, n // 2)) of them;
//   * a slot's node draws its m features (DrawFeatures: the hash of jboost.trees.node_splits.node_features,
//     the same uint32 operations) or takes every feature (m >= F);
//   * its (m, B, C) histogram sums its rows in row order (rows of all-zero payload skipped: they add
//     exact zeros), its prefix sums over the bins are jboost.trees.histograms.prefix_sum's two-level
//     blocked cumsum (blocks of 16), its gains jboost.trees.splits.split_gains_cumulative's float
//     expressions for one node, and its split the first maximum in (feature, threshold, direction)
//     order (jboost.trees.splits.best_split_of_gains), min_split_gain subtracted; a node whose best gain is
//     not positive, or that has no slot, is a leaf (a null split: feature 0, threshold B - 2,
//     missing left, gain 0); so is a node whose best split would send all its rows of non-zero
//     payload one way (a split's children each hold such a row: a tree has at most as many leaves
//     as such rows, jboost.trees.node_table.node_capacity);
//   * every row moves to node j (left) or j + 2**d (right) of the next level.
// Rows are kept grouped by node (a stable counting sort per level), so a slot reads only its own
// rows and a level costs its rows and its splittable nodes, not 2**d. A level with no splittable
// node ends the growth (the deeper levels are null splits that move no row).
//
// Batching (vmap_method="expand_dims"): the trees of a batch are independent; threads take whole
// trees (ForEachModel); one tree spreads a level's slots over the threads. Each slot is computed
// the same way on any thread: the result does not depend on the thread count.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "parallel.h"

namespace jboost {
namespace {

inline uint32_t Mix(uint32_t x) {  // lowbias32 (jboost.trees.node_splits._mix)
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

// The m features of smallest hash of node `node` of level `level`, sorted (node_features).
void DrawFeatures(uint32_t s0, uint32_t s1, int64_t level, int64_t node, int64_t n_features,
                  int64_t m, std::vector<std::pair<uint32_t, int32_t>>* tmp, int32_t* out) {
  const uint32_t a = Mix(s0 ^ Mix(static_cast<uint32_t>(level) ^ 0x9e3779b9u));
  const uint32_t b = Mix(a ^ static_cast<uint32_t>(node));
  const uint32_t c = Mix(b ^ s1);
  auto hash = [&](int64_t f) { return Mix(c + static_cast<uint32_t>(f) * 0x9e3779b9u); };
  if (m <= 16) {  // the m smallest hashes by insertion (hashes are distinct: Mix is a bijection)
    uint32_t keep[16];
    int32_t which[16];
    int64_t held = 0;
    for (int64_t f = 0; f < n_features; ++f) {
      const uint32_t h = hash(f);
      if (held == m && h >= keep[m - 1]) continue;
      int64_t j = held < m ? held++ : m - 1;
      for (; j > 0 && keep[j - 1] > h; --j) {
        keep[j] = keep[j - 1];
        which[j] = which[j - 1];
      }
      keep[j] = h;
      which[j] = static_cast<int32_t>(f);
    }
    std::copy(which, which + m, out);
  } else {
    tmp->resize(n_features);
    for (int64_t f = 0; f < n_features; ++f) (*tmp)[f] = {hash(f), static_cast<int32_t>(f)};
    std::nth_element(tmp->begin(), tmp->begin() + (m - 1), tmp->end());
    for (int64_t i = 0; i < m; ++i) out[i] = (*tmp)[i].second;
  }
  std::sort(out, out + m);
}

struct Settings {
  int64_t n_features, n, c, n_bins, depth, m, max_nodes;
  bool draw, missing;
  float l2, msg, mcw;
  // The histograms' channels (set per tree by CompactRows): the K gradient sums, then hk hessian
  // sums; hk = 1 when every row's K hessians are bitwise equal (one sum then stands for all K:
  // the same values summed in the same order), hk = K otherwise. cc = K + hk; hs: the stride of
  // output j's hessian (0 for one shared sum, 1 for K).
  int64_t k = 0, hk = 0, cc = 0, hs = 1;
  // A node's own channels (SplitSlotSparse, one-hot rows with one shared hessian): k = the node's
  // classes only, k_all = K (every output, as HessSum counts them), acc_slot[u] = SumOutputs'
  // accumulator of class u (its output index % 16). Without: k_all = k, acc_slot null.
  int64_t k_all = 0;
  const int32_t* acc_slot = nullptr;
  // One shared hessian (hs = 0): HessSum(h) >= mcw exactly when h >= hess_min (SharedHessMin;
  // NaN: never).
  float hess_min = 0.0f;
  // Each feature's number of distinct bins over all rows (DistinctBins): a node's features occupy
  // at most that many, whatever its rows.
  const int32_t* distinct = nullptr;
};

// The number of distinct bins (clamped to B - 1, as the histograms clamp) of each of the n_features
// columns of X (F, n).
void DistinctBins(const uint8_t* X, int64_t n_features, int64_t n, int64_t n_bins,
                  std::vector<int32_t>* out) {
  out->assign(n_features, 0);
  uint8_t seen[256];
  for (int64_t f = 0; f < n_features; ++f) {
    std::memset(seen, 0, sizeof(seen));
    const uint8_t* col = X + f * n;
    int32_t count = 0;
    for (int64_t i = 0; i < n && count < n_bins; ++i) {
      const int64_t b = std::min<int64_t>(col[i], n_bins - 1);
      count += seen[b] == 0;
      seen[b] = 1;
    }
    (*out)[f] = count;
  }
}

// The payload as the histograms read it (CompactRows): row i at p + i * stride. Dense rows
// (cls null): the cc channels. One-hot rows (cls set): the row's one gradient that may be
// non-zero, of output cls[i], then its hk hessians. A histogram cell starts at +0.0f and only
// ever adds, so it is never -0.0f (x + y is -0.0f only for x = y = -0.0f), and adding a zero
// (either sign) leaves it bitwise unchanged: skipping a row's zero gradients changes no bit.
struct Rows {
  const float* p;
  int64_t stride;
  const int32_t* cls;
  const int32_t* local = nullptr;  // one-hot rows: class -> the node's channel (null: itself)
};

// Adds row i's payload to `cell` (cc channels), one-hot or dense.
template <bool kOneHot>
inline void AddRow(const Settings& s, const Rows& rows, int64_t i, float* cell) {
  const float* p = rows.p + i * rows.stride;
  if (kOneHot) {
    const int32_t c = rows.cls[i];
    cell[rows.local != nullptr ? rows.local[c] : c] += p[0];
    for (int64_t j = 0; j < s.hk; ++j) cell[s.k + j] += p[1 + j];
  } else {
    for (int64_t ch = 0; ch < s.cc; ++ch) cell[ch] += p[ch];
  }
}

// Calls body(std::true_type) for one-hot rows, body(std::false_type) for dense rows.
template <typename Body>
inline void WithRows(const Rows& rows, Body body) {
  if (rows.cls != nullptr) {
    body(std::true_type());
  } else {
    body(std::false_type());
  }
}

// The tree's weighted payload, payload[i, ch] * w[i] (the float products of jboost's
// `payload * w`), as its histograms read it, setting s's channels: hessians shared when every
// row's K are bitwise equal; one-hot rows (K >= 3) when no row has two non-zero gradients (NaN
// counts as non-zero). A forest's classification targets are both (g = -onehot, h = 1, weighted
// by the bootstrap): a row adds 2 numbers to a histogram instead of 2K. `part`: the rows of
// non-zero weighted payload, in row order (the others add exact zeros anywhere).
//
// `classes`: the unweighted payload's one-hot classes when its rows have at most one non-zero
// gradient and K bitwise-equal hessians (K >= 3; OneHotClasses), else empty. With finite
// weights the weighted payload is then one-hot with shared hessians too (equal bits times w are
// equal bits; 0 * finite w is +-0), and a row's class is the weighted one or, where its product
// is zero, another class whose weighted gradient is +-0 as well (adding +-0 to a histogram cell,
// never -0.0f, changes no bit): the same sums without looking at K values per row and tree.
Rows CompactRows(const float* payload, const float* w, const std::vector<int32_t>& classes,
                 Settings* s, std::vector<float>* store, std::vector<int32_t>* cls,
                 std::vector<int32_t>* part) {
  const int64_t n = s->n, C = s->c, K = C / 2;
  bool finite = !classes.empty();
  for (int64_t i = 0; i < n && finite; ++i) finite = std::isfinite(w[i]);
  if (finite) {
    s->k = K;
    s->k_all = K;
    s->hk = 1;
    s->cc = K + 1;
    s->hs = 0;
    store->resize(n * 2);
    part->clear();
    for (int64_t i = 0; i < n; ++i) {
      const float* p = payload + i * C;
      float* q = store->data() + i * 2;
      q[0] = p[classes[i]] * w[i];
      q[1] = p[K] * w[i];
      if (q[0] != 0.0f || q[1] != 0.0f) part->push_back(static_cast<int32_t>(i));
    }
    return Rows{store->data(), 2, classes.data()};
  }
  bool shared = true, onehot = K >= 3;
  for (int64_t i = 0; i < n && (shared || onehot); ++i) {
    const float* p = payload + i * C;
    const float wi = w[i];
    const float h0 = p[K] * wi;
    for (int64_t j = 1; j < K && shared; ++j) {
      const float hj = p[K + j] * wi;
      shared = std::memcmp(&hj, &h0, 4) == 0;
    }
    int64_t nonzero = 0;
    for (int64_t j = 0; j < K && onehot; ++j) nonzero += p[j] * wi != 0.0f;
    onehot = onehot && nonzero <= 1;
  }
  s->k = K;
  s->k_all = K;
  s->hk = shared ? 1 : K;
  s->cc = K + s->hk;
  s->hs = (shared && K > 1) ? 0 : 1;
  const int64_t stride = onehot ? 1 + s->hk : s->cc;
  store->resize(n * stride);
  cls->resize(onehot ? n : 0);
  part->clear();
  for (int64_t i = 0; i < n; ++i) {
    const float* p = payload + i * C;
    const float wi = w[i];
    float* q = store->data() + i * stride;
    bool any = false;
    if (onehot) {
      int32_t j = 0;
      while (j + 1 < K && p[j] * wi == 0.0f) ++j;
      (*cls)[i] = j;
      q[0] = p[j] * wi;
      any = q[0] != 0.0f;
      for (int64_t u = 0; u < s->hk; ++u) {
        q[1 + u] = p[K + u] * wi;
        any |= q[1 + u] != 0.0f;
      }
    } else {
      for (int64_t ch = 0; ch < s->cc; ++ch) {
        q[ch] = p[ch] * wi;
        any |= q[ch] != 0.0f;
      }
    }
    if (any) part->push_back(static_cast<int32_t>(i));
  }
  return Rows{store->data(), stride, onehot ? cls->data() : nullptr};
}

// The one-hot classes of an unweighted payload (n, C) for CompactRows: each row's first non-zero
// gradient (K - 1 when none), provided K >= 3, no row has two non-zero gradients (NaN counts as
// non-zero) and every row's K hessians are bitwise equal; else empty.
void OneHotClasses(const float* payload, int64_t n, int64_t C, std::vector<int32_t>* out) {
  const int64_t K = C / 2;
  out->clear();
  if (K < 3) return;
  out->resize(n);
  for (int64_t i = 0; i < n; ++i) {
    const float* p = payload + i * C;
    int64_t nonzero = 0;
    int32_t first = static_cast<int32_t>(K - 1);
    for (int64_t j = K - 1; j >= 0; --j) {
      if (p[j] != 0.0f) {
        ++nonzero;
        first = static_cast<int32_t>(j);
      }
    }
    bool shared = nonzero <= 1;
    for (int64_t j = 1; j < K && shared; ++j) shared = std::memcmp(p + K + j, p + K, 4) == 0;
    if (!shared) {
      out->clear();
      return;
    }
    (*out)[i] = first;
  }
}

inline float HessSum(const float* h, const struct Settings& s);

// The smallest float h (in value order, -0.0f before +0.0f) whose shared-hessian sum
// HessSum (K copies of h in SumOutputs' order) is at least s.mcw, NaN when none is. That sum
// is a fixed sequence of float additions of h and earlier sums, each rounded monotonically, so
// it never decreases as h grows: HessSum(h) >= mcw exactly when h >= this (false for a NaN h
// as for a NaN sum). Found by bisection over the floats in value order.
float SharedHessMin(const Settings& s) {
  auto key_of = [](float x) {  // floats in value order -> unsigned integers in order
    uint32_t u;
    std::memcpy(&u, &x, 4);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  };
  auto float_of = [](uint32_t key) {
    const uint32_t u = (key & 0x80000000u) ? (key & 0x7fffffffu) : ~key;
    float x;
    std::memcpy(&x, &u, 4);
    return x;
  };
  auto ok = [&](uint32_t key) {
    const float h = float_of(key);
    return HessSum(&h, s) >= s.mcw;
  };
  uint32_t lo = key_of(-std::numeric_limits<float>::infinity());
  uint32_t hi = key_of(std::numeric_limits<float>::infinity());
  if (!ok(hi)) return std::numeric_limits<float>::quiet_NaN();
  while (lo < hi) {  // the first key in [lo, hi] that is ok (hi is)
    const uint32_t mid = lo + (hi - lo) / 2;
    if (ok(mid)) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return float_of(lo);
}

// SumOutputs' last step: its 16 running sums halved pairwise, each step with a fixed trip count
// (unrolled, lanewise).
inline float Halved(float* acc) {
  for (int64_t i = 0; i < 8; ++i) acc[i] = acc[i] + acc[i + 8];
  for (int64_t i = 0; i < 4; ++i) acc[i] = acc[i] + acc[i + 4];
  for (int64_t i = 0; i < 2; ++i) acc[i] = acc[i] + acc[i + 2];
  return acc[0] + acc[1];
}

// A sum over the K outputs in the order of XLA's CPU row reduction (measured: 16 accumulators,
// output k into accumulator k % 16, then halved pairwise), so that the gains are bitwise those of
// jboost.trees.splits.split_gains_cumulative (checked for K <= 40; K = 1: the value itself).
template <typename Term>
inline float SumOutputs(int64_t k, Term term) {
  if (k == 1) return 0.0f + term(0);
  alignas(16) float acc[16] = {0.0f};
  int64_t j = 0;
  for (; j + 16 <= k; j += 16) {  // whole rows of the 16 accumulators (fixed trip: vectorized)
    for (int64_t i = 0; i < 16; ++i) acc[i] += term(j + i);
  }
  for (int64_t i = 0; j + i < k; ++i) acc[i] += term(j + i);
  return Halved(acc);
}

// Score of a node: sum_k where(H_k + l2 > 0, G_k * (G_k / (H_k + l2)), 0); output k's hessian
// at h[k * hs]. Over a node's own classes (s.acc_slot set): each class's term into its own
// accumulator, in class order, then SumOutputs' halving. A class of no row of the node has
// G = +0.0f (its cells are never written, and +0 - +0 = +0) and so the term +0.0f (or 0.0f where
// the denominator is not positive): adding it leaves an accumulator bitwise unchanged (they start
// at +0.0f and only add terms that are never -0.0f), so the sum is bitwise SumOutputs' over K.
inline float Score(const float* g, const float* h, const Settings& s) {
  auto term = [&](int64_t j) {
    const float denom = h[j * s.hs] + s.l2;
    return denom > 0.0f ? g[j] * (g[j] / denom) : 0.0f;
  };
  if (s.acc_slot == nullptr) return SumOutputs(s.k, term);
  float acc[16] = {0.0f};
  for (int64_t u = 0; u < s.k; ++u) acc[s.acc_slot[u]] += term(u);
  return Halved(acc);
}

// The hessian sum over all K outputs (k_all; one shared sum counted K times).
inline float HessSum(const float* h, const Settings& s) {
  if (s.hs == 0) {
    const float h0 = h[0];
    return SumOutputs(s.k_all, [h0](int64_t) { return h0; });
  }
  return SumOutputs(s.k_all, [&](int64_t j) { return h[j]; });
}

inline bool SameBits(const float* a, const float* b, int64_t c) {
  for (int64_t i = 0; i < c; ++i) {
    uint32_t x, y;
    std::memcpy(&x, a + i, 4);
    std::memcpy(&y, b + i, 4);
    if (x != y) return false;
  }
  return true;
}

// A list of at most 256 bins (no allocation, no capacity check on push_back).
struct BinList {
  int32_t v[256];
  size_t n = 0;
  void clear() { n = 0; }
  void push_back(int32_t b) { v[n++] = b; }
  size_t size() const { return n; }
  int32_t operator[](size_t u) const { return v[u]; }
  const int32_t* begin() const { return v; }
  const int32_t* end() const { return v + n; }
};

struct SlotScratch {
  std::vector<float> hist;   // (m, B, C), then its prefix sums in place
  std::vector<float> left, right, miss;
  // The sparse path (SplitSlotSparse): one feature's (B, C) cells, kept zero
  // between features; the node's occupied bins; block totals and offsets; the prefix sums at the
  // bins the split search reads (cum, row slot[t] for bin t).
  std::vector<float> cells, blocks, cum, run;
  std::vector<uint8_t> touched;  // touched: the dense path's (m, B) bins with rows
  BinList occupied, needed, rel;
  std::vector<int32_t> slot, bslot;
  // The sparse path's node classes (one-hot rows): the classes in order, class -> channel (-1
  // between nodes), each one's score accumulator.
  std::vector<int32_t> active, local, acc_slot;
  std::vector<std::pair<uint32_t, int32_t>> draw;
};

struct Best {
  int32_t pos = 0, threshold = 0;
  bool right = false;
  float gain = 0.0f;  // best - min_split_gain
  int64_t n_right = 0;  // GrowTree: the node's rows of non-zero payload its split sends right
};

// Both missing directions of threshold t of the node's q-th feature (left sums `present`, the
// prefix sum at t), folded into the first maximum (best, best_idx) in (feature, threshold,
// direction) order: jboost.trees.splits.split_gains_cumulative's float expressions.
inline void EvalThreshold(const Settings& s, int64_t q, int64_t t, const float* present,
                          const float* total, const float* miss, float parent, bool no_missing,
                          SlotScratch* sc, float* best, int64_t* best_idx) {
  const int64_t C = s.cc, K = s.k, nt = s.n_bins - 1;
  float* left = sc->left.data();
  float* right = sc->right.data();
  for (int64_t d = 0; d < 2; ++d) {
    float gain;
    if (d == 1 && !s.missing) {
      gain = -std::numeric_limits<float>::infinity();
    } else if (d == 1 && no_missing) {
      continue;  // left sums equal direction 0's (x + 0 == x): the same gain, not a new max
    } else {
      for (int64_t ch = 0; ch < C; ++ch) {
        left[ch] = d == 0 ? present[ch] + miss[ch] : present[ch];
        right[ch] = total[ch] - left[ch];
      }
      const bool ok = s.hs == 0 ? left[K] >= s.hess_min && right[K] >= s.hess_min
                                : HessSum(left + K, s) >= s.mcw && HessSum(right + K, s) >= s.mcw;
      if (!ok) {
        gain = 0.0f;  // 0 + where(ok, ., 0)
      } else {
        const float leaf_gain = (Score(left, left + K, s) + Score(right, right + K, s)) - parent;
        gain = 0.0f + leaf_gain;
      }
    }
    const int64_t idx = (q * nt + t) * 2 + d;
    // The first maximum; NaN counts as the largest (argmax's and max's NaN rules).
    if (*best_idx < 0 || gain > *best || (std::isnan(gain) && !std::isnan(*best))) {
      *best = gain;
      *best_idx = idx;
    }
  }
}

// The split of the first maximum `best` at candidate `best_idx` ((feature slot, threshold,
// direction) flattened; nt thresholds), min_split_gain subtracted: a leaf unless positive.
inline Best BestOf(float best, int64_t best_idx, int64_t nt, float msg) {
  Best out;
  const float gain = best - msg;
  if (gain > 0.0f) {
    out.pos = static_cast<int32_t>(best_idx / (2 * nt));
    const int64_t j = best_idx % (2 * nt);
    out.threshold = static_cast<int32_t>(j / 2);
    out.right = (j % 2) == 1;
    out.gain = gain;
  }
  return out;
}

constexpr int64_t kBlock = 16;  // jboost.trees.histograms.prefix_sum's block of bins

// A set of bins (B <= 256), iterated in increasing order.
struct BinSet {
  uint64_t w[4] = {0, 0, 0, 0};
  void add(int64_t b) { w[b >> 6] |= uint64_t{1} << (b & 63); }
  bool has(int64_t b) const { return (w[b >> 6] >> (b & 63)) & 1; }
  template <typename F>
  void each(F f) const {
    for (int64_t u = 0; u < 4; ++u) {
      for (uint64_t x = w[u]; x != 0; x &= x - 1) f(u * 64 + __builtin_ctzll(x));
    }
  }
};

// SplitSlot for a node of few occupied bins (fewer than half the bins): the same split, bit for bit,
// from its occupied bins only. The dense prefix sum at bin t is acc(t) + offset(block of t):
// acc the sum of the block's bins up to t in bin order from 0.0f, offset the cumsum of the block
// totals minus the block's own (no offset for B <= 16). Empty bins add exact zeros (a sum from
// +0.0f is never -0.0f, and x + 0 == x), so acc(t) is the sum over the occupied bins <= t of the
// block, block totals likewise. The dense search skips threshold t when its prefix sums equal
// t - 1's bitwise; an empty bin that does not start a block always does (acc and offset
// unchanged), so only t = 0, occupied bins and block starts are candidates, each compared with
// t - 1 as the dense search does.
//
// One-hot rows with one shared hessian (a forest's classes): the node's histograms, prefix sums and
// gains carry only the classes of its rows (in class order; the hessian after them). Every other
// class's cells stay +0.0f, as do its prefix sums and left/right sums (+0 + +0, +0 - +0), and its
// score terms add nothing (Score): the same split, bit for bit, at a cost that follows the node's
// classes, not K (a deep node of letter's forest holds 1-3 of its 26).
JBOOST_AVX2_CLONES Best SplitSlotSparse(const Settings& s_all, const uint8_t* X, const Rows& rows_all,
                     const int32_t* rows, int64_t n_rows, const int32_t* feats, SlotScratch* sc) {
  Settings s = s_all;
  Rows payload = rows_all;
  auto& act = sc->active;
  act.clear();
  if (rows_all.cls != nullptr && s_all.hk == 1) {
    if (static_cast<int64_t>(sc->local.size()) < s_all.k) sc->local.assign(s_all.k, -1);
    int32_t* local = sc->local.data();
    for (int64_t r = 0; r < n_rows; ++r) {
      const int32_t c = rows_all.cls[rows[r]];
      if (local[c] < 0) {
        local[c] = 0;
        act.push_back(c);
      }
    }
    std::sort(act.begin(), act.end());
    sc->acc_slot.resize(act.size());
    for (size_t u = 0; u < act.size(); ++u) {
      local[act[u]] = static_cast<int32_t>(u);
      sc->acc_slot[u] = act[u] & 15;  // SumOutputs' accumulator of output act[u]
    }
    s.k = static_cast<int64_t>(act.size());
    s.cc = s.k + 1;
    s.acc_slot = sc->acc_slot.data();
    payload.local = local;
  }
  const int64_t B = s.n_bins, C = s.cc, K = s.k, m = s.m, nt = B - 1;
  const bool blocked = B > kBlock;
  const int64_t n_blocks = blocked ? (B + kBlock - 1) / kBlock : 1;
  if (static_cast<int64_t>(sc->cells.size()) < B * C) sc->cells.assign(B * C, 0.0f);
  sc->slot.resize(B);
  sc->left.resize(C);
  sc->right.resize(C);
  sc->miss.resize(C);
  float* cells = sc->cells.data();
  auto& occ = sc->occupied;
  auto& needed = sc->needed;
  float best = 0.0f;
  int64_t best_idx = -1;
  auto block_of = [&](int64_t b) { return blocked ? b / kBlock : 0; };
  for (int64_t q = 0; q < m; ++q) {
    const uint8_t* col = X + static_cast<int64_t>(feats[q]) * s.n;
    BinSet marked;  // the occupied bins
    WithRows(payload, [&](auto one_hot) {
      for (int64_t r = 0; r < n_rows; ++r) {
        const int32_t i = rows[r];
        const int64_t b = std::min<int64_t>(col[i], B - 1);
        marked.add(b);
        AddRow<decltype(one_hot)::value>(s, payload, i, cells + b * C);
      }
    });
    occ.clear();
    marked.each([&](int64_t b) { occ.push_back(static_cast<int32_t>(b)); });
    // The blocks the search reads: block 0, each occupied block and its neighbours, and the
    // last two bins' blocks (rel, sorted; bslot[k]: block k's place in it). Every other block is
    // empty and follows an empty block: each of its prefix sums is 0 + the running total of the
    // block totals, bitwise its predecessor bin's, so no bin of it is a candidate or read. A
    // block start is a candidate in an occupied block or right after one (start, k's bit). At most
    // 16 blocks (B <= 256): bit masks.
    auto& rel = sc->rel;
    uint32_t rel_mask = 1, start = 0;
    for (int32_t b : occ) {
      const int64_t k = block_of(b);
      const uint32_t own = (uint32_t{1} << k) | (k + 1 < n_blocks ? uint32_t{1} << (k + 1) : 0);
      start |= own;
      rel_mask |= own | (k > 0 ? uint32_t{1} << (k - 1) : 0);
    }
    rel_mask |= (uint32_t{1} << block_of(B - 2)) | (uint32_t{1} << block_of(B - 1));
    rel.clear();
    for (uint32_t x = rel_mask; x != 0; x &= x - 1) rel.push_back(__builtin_ctz(x));
    const int64_t R = static_cast<int64_t>(rel.size());
    sc->bslot.resize(n_blocks);
    for (int64_t u = 0; u < R; ++u) sc->bslot[rel[u]] = static_cast<int32_t>(u);
    // Their totals (occupied bins in bin order) and offsets (the running total skips the empty
    // blocks' zeros: x + 0 == x).
    sc->blocks.assign(2 * R * C, 0.0f);
    float* totals = sc->blocks.data();
    float* offsets = totals + R * C;
    for (int32_t b : occ) {
      float* tk = totals + sc->bslot[block_of(b)] * C;
      const float* cell = cells + static_cast<int64_t>(b) * C;
      for (int64_t ch = 0; ch < C; ++ch) tk[ch] = tk[ch] + cell[ch];
    }
    if (blocked) {  // per channel in block order; blocks outer, channels inner (vectorised)
      sc->run.assign(C, 0.0f);
      float* run = sc->run.data();
      for (int64_t u = 0; u < R; ++u) {
        const float* tu = totals + u * C;
        float* ou = offsets + u * C;
        for (int64_t ch = 0; ch < C; ++ch) {
          run[ch] = run[ch] + tu[ch];
          ou[ch] = run[ch] - tu[ch];
        }
      }
    }
    // The bins whose prefix sums the search reads: candidates, their predecessors, B-2, B-1.
    BinSet need;
    need.add(0);
    for (int32_t b : occ) {
      if (b > 0) need.add(b - 1);
      need.add(b);
    }
    for (uint32_t x = blocked ? start & ~uint32_t{1} : 0; x != 0; x &= x - 1) {
      const int64_t k = __builtin_ctz(x);
      need.add(k * kBlock - 1);
      need.add(k * kBlock);
    }
    need.add(B - 2);
    need.add(B - 1);
    needed.clear();
    need.each([&](int64_t t) { needed.push_back(static_cast<int32_t>(t)); });
    sc->cum.resize(needed.size() * C);
    float* acc = sc->left.data();  // the block's running sum (scratch until the search)
    int64_t block = -1;
    size_t next_occ = 0;
    for (size_t u = 0; u < needed.size(); ++u) {
      const int64_t t = needed[u];
      if (block_of(t) != block) {
        block = block_of(t);
        std::fill(acc, acc + C, 0.0f);
      }
      while (next_occ < occ.size() && occ[next_occ] <= t) {
        const int64_t b = occ[next_occ++];
        if (block_of(b) != block) continue;  // an earlier block's (already in its total)
        const float* cell = cells + b * C;
        for (int64_t ch = 0; ch < C; ++ch) acc[ch] = acc[ch] + cell[ch];
      }
      float* out = sc->cum.data() + u * C;
      if (blocked) {
        const float* off = offsets + static_cast<int64_t>(sc->bslot[block]) * C;
        for (int64_t ch = 0; ch < C; ++ch) out[ch] = acc[ch] + off[ch];
      } else {
        std::copy(acc, acc + C, out);
      }
      sc->slot[t] = static_cast<int32_t>(u);
    }
    auto cum = [&](int64_t t) { return sc->cum.data() + static_cast<int64_t>(sc->slot[t]) * C; };
    const float* total = cum(B - 1);
    const float* before = cum(B - 2);
    float* miss = sc->miss.data();
    bool no_missing = true;
    for (int64_t ch = 0; ch < C; ++ch) {
      miss[ch] = total[ch] - before[ch];
      no_missing &= miss[ch] == 0.0f;
    }
    const float parent = Score(total, total + K, s);
    for (int32_t t : needed) {
      if (t >= nt) break;
      const bool candidate =
          t == 0 || marked.has(t) || (blocked && t % kBlock == 0 && ((start >> (t / kBlock)) & 1));
      if (!candidate || (t > 0 && SameBits(cum(t), cum(t - 1), C))) continue;
      EvalThreshold(s, q, t, cum(t), total, miss, parent, no_missing, sc, &best, &best_idx);
    }
    for (int32_t b : occ) {  // the cells back to zero for the next feature
      float* cell = cells + static_cast<int64_t>(b) * C;
      for (int64_t ch = 0; ch < C; ++ch) cell[ch] = 0.0f;
    }
  }
  for (int32_t c : act) sc->local[c] = -1;
  return BestOf(best, best_idx, nt, s.msg);
}

// One slot's histogram, prefix sums, gains and first best split.
JBOOST_AVX2_CLONES Best SplitSlot(const Settings& s, const uint8_t* X, const Rows& payload, const int32_t* rows,
               int64_t n_rows, const int32_t* feats, SlotScratch* sc) {
  const int64_t B = s.n_bins, C = s.cc, K = s.k, m = s.m;
  // Few occupied bins (few rows, or features of few distinct values: letter's 16 of 64 or 256
  // bins): the sparse search, bitwise the same split at a cost that follows the occupied bins.
  int64_t occupied = n_rows;
  if (s.distinct != nullptr) {
    int64_t most = 0;
    for (int64_t q = 0; q < m; ++q) most = std::max<int64_t>(most, s.distinct[feats[q]]);
    occupied = std::min(occupied, most);
  }
  if (2 * occupied < B) return SplitSlotSparse(s, X, payload, rows, n_rows, feats, sc);
  sc->hist.assign(m * B * C, 0.0f);
  sc->touched.assign(m * B, 0);
  float* hist = sc->hist.data();
  WithRows(payload, [&](auto one_hot) {
    for (int64_t q = 0; q < m; ++q) {
      const uint8_t* col = X + static_cast<int64_t>(feats[q]) * s.n;
      float* hq = hist + q * B * C;
      uint8_t* tq = sc->touched.data() + q * B;
      for (int64_t r = 0; r < n_rows; ++r) {
        const int32_t i = rows[r];
        const int64_t b = std::min<int64_t>(col[i], B - 1);
        AddRow<decltype(one_hot)::value>(s, payload, i, hq + b * C);
        tq[b] = 1;
      }
    }
  });
  // jboost.trees.histograms.prefix_sum: within blocks of 16 bins (each from 0.0f), then the block
  // totals' cumsum minus the block's own total added to each block (B <= 16: one plain cumsum).
  // Per channel, the float operations of that order; bins outer, channels inner.
  sc->blocks.resize(2 * C);
  float* run = sc->blocks.data();  // cumsum of the block totals
  float* offset = run + C;
  for (int64_t q = 0; q < m; ++q) {
    float* hq = hist + q * B * C;
    std::fill(run, run + C, 0.0f);
    const int64_t block = B <= kBlock ? B : kBlock;
    for (int64_t start = 0; start < B; start += block) {
      const int64_t end = std::min(B, start + block);
      float* first = hq + start * C;
      for (int64_t ch = 0; ch < C; ++ch) first[ch] = 0.0f + first[ch];
      for (int64_t b = start + 1; b < end; ++b) {
        float* cur = hq + b * C;
        const float* prev = cur - C;
        for (int64_t ch = 0; ch < C; ++ch) cur[ch] = prev[ch] + cur[ch];
      }
      if (B <= kBlock) break;
      const float* acc = hq + (end - 1) * C;  // the block's total (padding bins add zeros)
      for (int64_t ch = 0; ch < C; ++ch) {
        run[ch] = run[ch] + acc[ch];
        offset[ch] = run[ch] - acc[ch];
      }
      for (int64_t b = start; b < end; ++b) {
        float* cur = hq + b * C;
        for (int64_t ch = 0; ch < C; ++ch) cur[ch] = cur[ch] + offset[ch];
      }
    }
  }
  sc->left.resize(C);
  sc->right.resize(C);
  sc->miss.resize(C);
  float* miss = sc->miss.data();
  float best = 0.0f;
  int64_t best_idx = -1;
  const int64_t nt = B - 1;
  for (int64_t q = 0; q < m; ++q) {
    const float* hq = hist + q * B * C;
    const float* total = hq + (B - 1) * C;
    const float* before = hq + (B - 2) * C;
    bool no_missing = true;  // then both directions' gains are equal: direction 1 never a new max
    for (int64_t ch = 0; ch < C; ++ch) {
      miss[ch] = total[ch] - before[ch];
      no_missing &= miss[ch] == 0.0f;
    }
    const float parent = Score(total, total + K, s);
    const uint8_t* tq = sc->touched.data() + q * B;
    for (int64_t t = 0; t < nt; ++t) {
      const float* present = hq + t * C;
      // Left sums bitwise those of t - 1 give both gains of t - 1 again: never a new first
      // maximum (nor a first NaN), so skipping them, or not, changes nothing. A bin no row of the
      // node is in has them unless it starts a block (acc restarts from 0.0f: checked).
      if (t > 0 && !tq[t] && (B <= kBlock || t % kBlock != 0 || SameBits(present, present - C, C))) {
        continue;
      }
      EvalThreshold(s, q, t, present, total, miss, parent, no_missing, sc, &best, &best_idx);
    }
  }
  return BestOf(best, best_idx, nt, s.msg);
}

// Whether a row of bin v goes right at a split (threshold, missing side); B - 1 is the missing bin.
inline bool GoesRight(int32_t v, int32_t missing_bin, int32_t threshold, bool missing_right) {
  return v == missing_bin ? missing_right : v > threshold;
}

inline int64_t NodeSlots(int64_t n, int64_t max_nodes, int64_t d) {
  return std::max<int64_t>(1, std::min<int64_t>({int64_t{1} << d, max_nodes, n / 2}));
}

// The tree's node table (jboost.trees.depthwise.DepthwiseTrees): N node slots, N + 1 leaves.
struct Table {
  int64_t cap;  // N
  int32_t *features, *thresholds, *missing_right, *children, *level_counts;
  float *gains, *values;
  int32_t* leaf;  // (n,) each row's table leaf
};

// Grows the tree into `t`, level by level over the level's present nodes only (the children of
// the last level's splits, in heap order: lefts j, then rights j + 2**d), so a level costs its
// rows and nodes, never 2**d. Splitting nodes get table ids in (level, heap) order, leaves too
// (a leaf's level is the level where its node stops): jboost.trees.node_table.dense_table's numbering
// of the pure-JAX levels. node_parent/leaf_parent: each id's parent node (-1: the root).
// Returns false when the tree needs more than t.cap nodes (node_capacity's bound broken).
bool GrowTree(const Settings& s, const uint8_t* X, const Rows& rows,
              const std::vector<int32_t>& part, uint32_t s0, uint32_t s1,
              const Table& t, std::vector<int32_t>* node_parent, std::vector<int32_t>* leaf_parent,
              int64_t n_threads) {
  const int64_t n = s.n, B = s.n_bins, N = t.cap;
  std::fill(t.features, t.features + N, 0);
  std::fill(t.thresholds, t.thresholds + N, static_cast<int32_t>(B - 2));
  std::fill(t.missing_right, t.missing_right + N, 0);
  std::fill(t.gains, t.gains + N, 0.0f);
  std::fill(t.children, t.children + 2 * N, -1);
  std::fill(t.level_counts, t.level_counts + s.depth, 0);
  std::fill(t.leaf, t.leaf + n, 0);
  node_parent->assign(N, -1);
  leaf_parent->assign(N + 1, -1);
  // Scratch kept by the calling thread across trees and calls (no page faults of fresh memory
  // per tree); local references, so that the slots' threads read the caller's.
  thread_local std::vector<int32_t> tl_grouped, tl_next, tl_code, tl_rank;
  thread_local std::vector<int32_t> tl_parent, tl_side;
  thread_local std::vector<int64_t> tl_start, tl_start2, tl_heap;
  thread_local std::vector<SlotScratch> tl_scratch;
  auto &grouped = tl_grouped, &next = tl_next;
  auto &code = tl_code, &rank = tl_rank, &parent = tl_parent, &side = tl_side;
  auto &start = tl_start, &start2 = tl_start2, &heap = tl_heap;
  auto& scratch = tl_scratch;
  // Rows of non-zero payload grouped by present node (row order within a node; node k's from
  // start[k]). The other rows (of zero payload) find their leaves by the finished tree's splits.
  grouped.assign(part.begin(), part.end());
  start.assign({0, static_cast<int64_t>(part.size())});
  heap.assign(1, 0);
  parent.assign(1, -1);
  side.assign(1, 0);
  const int64_t m = s.draw ? s.m : s.n_features;
  std::vector<int32_t> all(s.n_features);
  for (int64_t f = 0; f < s.n_features; ++f) all[f] = static_cast<int32_t>(f);
  if (static_cast<int64_t>(scratch.size()) < n_threads) scratch.resize(std::max<int64_t>(1, n_threads));
  Settings ss = s;
  ss.m = m;
  int32_t n_nodes_used = 0, n_leaves_used = 0;
  const int32_t missing_bin = static_cast<int32_t>(B - 1);
  // Present nodes that do not split become leaves (in present order); their rows end there.
  auto place = [&](int64_t k, int32_t c) {
    code[k] = c;
    if (parent[k] >= 0) t.children[2 * parent[k] + side[k]] = c;
  };
  for (int64_t d = 0;; ++d) {
    const int64_t P = static_cast<int64_t>(heap.size());
    code.assign(P, 0);
    std::vector<int64_t> slot_node;  // present indices with a histogram slot
    if (d < s.depth) {
      const int64_t cap = NodeSlots(n, s.max_nodes, d);
      for (int64_t k = 0; k < P && static_cast<int64_t>(slot_node.size()) < cap; ++k) {
        if (start[k + 1] - start[k] >= 2) slot_node.push_back(k);
      }
    }
    const int64_t n_slots = static_cast<int64_t>(slot_node.size());
    std::vector<int32_t> drawn(n_slots * m);
    std::vector<Best> best(n_slots);
    if (n_slots > 0) {
      const int64_t T = std::max<int64_t>(1, std::min<int64_t>(n_threads, n_slots));
      Parallel(T, [&](int64_t th) {
        SlotScratch* sc = &scratch[th];
        for (int64_t q = n_slots * th / T; q < n_slots * (th + 1) / T; ++q) {
          const int64_t k = slot_node[q];
          int32_t* fk = drawn.data() + q * m;
          if (s.draw) {
            DrawFeatures(s0, s1, d, heap[k], s.n_features, m, &sc->draw, fk);
          } else {
            std::copy(all.begin(), all.end(), fk);
          }
          const int32_t* own = grouped.data() + start[k];
          const int64_t n_own = start[k + 1] - start[k];
          Best b = SplitSlot(ss, X, rows, own, n_own, fk, sc);
          if (b.gain > 0.0f) {  // a split sends rows both ways, else the node is a leaf
            const uint8_t* col = X + static_cast<int64_t>(fk[b.pos]) * n;
            int64_t n_right = 0;
            for (int64_t r = 0; r < n_own; ++r) {
              const int32_t v = col[own[r]];
              n_right += GoesRight(v, missing_bin, b.threshold, b.right);
            }
            if (n_right == 0 || n_right == n_own) b.gain = 0.0f;
            b.n_right = n_right;
          }
          best[q] = b;
        }
      });
    }
    // Splits first (their ids, in present order), then this level's leaves.
    std::vector<int32_t> split_q(P, -1);  // slot of a splitting present node
    for (int64_t q = 0; q < n_slots; ++q) {
      if (best[q].gain > 0.0f) split_q[slot_node[q]] = static_cast<int32_t>(q);
    }
    rank.assign(P, -1);
    int32_t n_split = 0;
    for (int64_t k = 0; k < P; ++k) {
      if (split_q[k] < 0) continue;
      if (n_nodes_used >= N) return false;
      const Best& b = best[split_q[k]];
      const int32_t id = n_nodes_used++;
      t.features[id] = drawn[split_q[k] * m + b.pos];
      t.thresholds[id] = b.threshold;
      t.missing_right[id] = b.right ? 1 : 0;
      t.gains[id] = b.gain;
      (*node_parent)[id] = parent[k];
      ++t.level_counts[d];
      place(k, id);
      rank[k] = n_split++;
    }
    for (int64_t k = 0; k < P; ++k) {
      if (split_q[k] >= 0) continue;
      const int32_t l = n_leaves_used++;
      (*leaf_parent)[l] = parent[k];
      place(k, ~l);
    }
    // The rows of a leaf end there; a split's rows go to its children (the next level's present
    // nodes: the lefts of the splits in present order, then their rights), each child's in row
    // order (a stable partition of the node's rows, which are in row order).
    const int64_t P2 = 2 * n_split;
    start2.assign(P2 + 1, 0);
    for (int64_t k = 0; k < P; ++k) {
      if (rank[k] < 0) continue;
      const int64_t n_right = best[split_q[k]].n_right;
      start2[rank[k] + 1] = (start[k + 1] - start[k]) - n_right;
      start2[rank[k] + n_split + 1] = n_right;
    }
    for (int64_t k = 0; k < P2; ++k) start2[k + 1] += start2[k];
    next.resize(start2[P2]);
    for (int64_t k = 0; k < P; ++k) {
      const int32_t c = code[k];
      const int32_t* own = grouped.data() + start[k];
      const int64_t n_own = start[k + 1] - start[k];
      if (c < 0) {
        for (int64_t r = 0; r < n_own; ++r) t.leaf[own[r]] = ~c;
        continue;
      }
      const uint8_t* col = X + static_cast<int64_t>(t.features[c]) * n;
      const int32_t threshold = t.thresholds[c];
      const bool missing_right = t.missing_right[c] != 0;
      int32_t* left = next.data() + start2[rank[k]];
      int32_t* right = next.data() + start2[rank[k] + n_split];
      for (int64_t r = 0; r < n_own; ++r) {
        const int32_t i = own[r];
        const int32_t v = col[i];
        if (GoesRight(v, missing_bin, threshold, missing_right)) {
          *right++ = i;
        } else {
          *left++ = i;
        }
      }
    }
    if (n_split == 0) break;
    std::vector<int64_t> heap2(P2);
    std::vector<int32_t> parent2(P2), side2(P2);
    for (int64_t k = 0; k < P; ++k) {
      if (rank[k] < 0) continue;
      heap2[rank[k]] = heap[k];
      heap2[rank[k] + n_split] = heap[k] + (int64_t{1} << d);
      parent2[rank[k]] = parent2[rank[k] + n_split] = code[k];
      side2[rank[k]] = 0;
      side2[rank[k] + n_split] = 1;
    }
    start.swap(start2);
    grouped.swap(next);
    heap.swap(heap2);
    parent.swap(parent2);
    side.swap(side2);
  }
  // The rows of zero payload: down the finished tree's splits (the decisions the levels make),
  // 8 rows at a time (independent walks).
  const int32_t root = n_nodes_used > 0 ? 0 : ~0;
  constexpr int kLanes = 8;
  int32_t lane_row[kLanes], lane_code[kLanes];
  int n_lanes = 0;
  auto walk = [&]() {
    for (bool more = true; more;) {
      more = false;
      for (int j = 0; j < n_lanes; ++j) {
        const int32_t c = lane_code[j];
        if (c < 0) continue;
        const int32_t v = X[static_cast<int64_t>(t.features[c]) * n + lane_row[j]];
        const int32_t to =
            t.children[2 * c + GoesRight(v, missing_bin, t.thresholds[c], t.missing_right[c] != 0)];
        lane_code[j] = to;
        more |= to >= 0;
      }
    }
    for (int j = 0; j < n_lanes; ++j) t.leaf[lane_row[j]] = ~lane_code[j];
    n_lanes = 0;
  };
  size_t u = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (u < part.size() && part[u] == i) {
      ++u;
      continue;
    }
    lane_row[n_lanes] = static_cast<int32_t>(i);
    lane_code[n_lanes++] = root;
    if (n_lanes == kLanes) walk();
  }
  walk();
  return true;
}

// jboost.trees.family.newton_leaf_values of the table's leaves, as the dense levels compute them: each
// leaf's sums (every row, in row order, as jax.ops.segment_sum) and count of rows of non-zero
// payload; a node's sums (0 + left) + right, bottom-up (children have larger ids); the root's
// Newton value, then each node's and leaf's own value where a row of non-zero payload reaches it
// and its hessian sum is at least min_child_weight, its parent's value otherwise (a leaf of the
// dense levels has its node's sums at every level below it, so the same value). values:
// (N + 1, K), zero for unused leaves.
void LeafValues(const Settings& s, const Rows& rows, const std::vector<int32_t>& part,
                const Table& t, const std::vector<int32_t>& node_parent,
                const std::vector<int32_t>& leaf_parent) {
  const int64_t C = s.cc, K = s.k, N = t.cap;
  thread_local std::vector<float> tl_lsums, tl_nsums, tl_nvalue;
  thread_local std::vector<int64_t> tl_lcount, tl_ncount;
  auto &lsums = tl_lsums, &nsums = tl_nsums, &nvalue = tl_nvalue;
  auto &lcount = tl_lcount, &ncount = tl_ncount;
  int64_t used = 0;
  while (used < N && t.gains[used] > 0.0f) ++used;
  const int64_t L = used + 1;
  lsums.assign(L * C, 0.0f);
  lcount.assign(L, 0);
  WithRows(rows, [&](auto one_hot) {  // the rows of zero payload add exact zeros: skipped
    for (int32_t i : part) {
      AddRow<decltype(one_hot)::value>(s, rows, i, lsums.data() + static_cast<int64_t>(t.leaf[i]) * C);
      ++lcount[t.leaf[i]];
    }
  });
  nsums.assign(std::max<int64_t>(used, 1) * C, 0.0f);
  ncount.assign(std::max<int64_t>(used, 1), 0);
  for (int64_t i = used - 1; i >= 0; --i) {
    const int32_t* kid = t.children + 2 * i;
    const float* a = kid[0] >= 0 ? nsums.data() + kid[0] * C : lsums.data() + (~kid[0]) * C;
    const float* b = kid[1] >= 0 ? nsums.data() + kid[1] * C : lsums.data() + (~kid[1]) * C;
    for (int64_t c = 0; c < C; ++c) nsums[i * C + c] = (0.0f + a[c]) + b[c];
    ncount[i] = (kid[0] >= 0 ? ncount[kid[0]] : lcount[~kid[0]]) +
                (kid[1] >= 0 ? ncount[kid[1]] : lcount[~kid[1]]);
  }
  auto value = [&](const float* node, float* out) {
    for (int64_t k = 0; k < K; ++k) {
      const float denom = node[K + k * s.hs] + s.l2;
      out[k] = denom > 0.0f ? -node[k] / denom : 0.0f;
    }
  };
  auto own_or = [&](const float* node, int64_t n_rows, const float* fallback, float* out) {
    if (fallback == nullptr || (n_rows > 0 && HessSum(node + K, s) >= s.mcw)) {
      value(node, out);
    } else {
      for (int64_t k = 0; k < K; ++k) out[k] = fallback[k];
    }
  };
  nvalue.assign(std::max<int64_t>(used, 1) * K, 0.0f);
  for (int64_t i = 0; i < used; ++i) {  // parents first (smaller ids)
    const int32_t up = node_parent[i];
    own_or(nsums.data() + i * C, ncount[i], up >= 0 ? nvalue.data() + up * K : nullptr,
           nvalue.data() + i * K);
  }
  std::fill(t.values, t.values + (N + 1) * K, 0.0f);
  for (int64_t l = 0; l < L; ++l) {
    const int32_t up = leaf_parent[l];
    own_or(lsums.data() + l * C, lcount[l], up >= 0 ? nvalue.data() + up * K : nullptr,
           t.values + l * K);
  }
}

ffi::Error DepthwiseTreeImpl(ffi::Buffer<ffi::U8> X, ffi::Buffer<ffi::F32> payload,
                             ffi::Buffer<ffi::F32> weights, ffi::Buffer<ffi::U32> seed, ffi::Buffer<ffi::F32> l2,
                             ffi::Buffer<ffi::F32> msg, ffi::Buffer<ffi::F32> mcw,
                             ffi::ResultBuffer<ffi::S32> features,
                             ffi::ResultBuffer<ffi::S32> thresholds,
                             ffi::ResultBuffer<ffi::S32> missing_right,
                             ffi::ResultBuffer<ffi::F32> gains, ffi::ResultBuffer<ffi::S32> children,
                             ffi::ResultBuffer<ffi::S32> level_counts, ffi::ResultBuffer<ffi::S32> leaf,
                             ffi::ResultBuffer<ffi::F32> values, int64_t depth, int64_t n_bins, int64_t max_features,
                             int64_t max_nodes, int64_t n_threads, bool missing) {
  auto ld = leaf->dimensions();
  if (ld.size() < 1) return ffi::Error::InvalidArgument("jboost depthwise tree: leaf must be (..., n)");
  const size_t nb = ld.size() - 1;
  std::vector<int64_t> shape(ld.begin(), ld.begin() + nb);
  int64_t n_models = 1;
  for (int64_t v : shape) n_models *= v;
  auto xd = X.dimensions();
  auto pd = payload.dimensions();
  auto wd = weights.dimensions();
  if (xd.size() != nb + 2 || pd.size() != nb + 2 || wd.size() != nb + 1) {
    return ffi::Error::InvalidArgument(
        "jboost depthwise tree: X (..., F, n), payload (..., n, C), weights (..., n)");
  }
  const int64_t n_features = xd[nb], n = xd[nb + 1], c = pd[nb + 1];
  std::vector<int64_t> ox, op, ow, os, ol2, omsg, omcw, of, ot, om, og, oc, olc, ol, ov;
  if (pd[nb] != n || ld[nb] != n || c < 2 || c % 2 != 0 || n_bins < 2 || n_bins > 256 ||
      depth < 1 || depth > 30 || max_features < 1 || max_nodes < 1 ||
      features->dimensions().size() != nb + 1 ||
      wd[nb] != n || !BatchOffsets(xd, 2, shape, &ox) || !BatchOffsets(pd, 2, shape, &op) ||
      !BatchOffsets(wd, 1, shape, &ow) ||
      !BatchOffsets(seed.dimensions(), 1, shape, &os) ||
      !BatchOffsets(l2.dimensions(), 0, shape, &ol2) ||
      !BatchOffsets(msg.dimensions(), 0, shape, &omsg) ||
      !BatchOffsets(mcw.dimensions(), 0, shape, &omcw) ||
      !BatchOffsets(features->dimensions(), 1, shape, &of) ||
      !BatchOffsets(thresholds->dimensions(), 1, shape, &ot) ||
      !BatchOffsets(missing_right->dimensions(), 1, shape, &om) ||
      !BatchOffsets(gains->dimensions(), 1, shape, &og) ||
      !BatchOffsets(children->dimensions(), 2, shape, &oc) ||
      !BatchOffsets(level_counts->dimensions(), 1, shape, &olc) ||
      !BatchOffsets(ld, 1, shape, &ol) || !BatchOffsets(values->dimensions(), 2, shape, &ov)) {
    return ffi::Error::InvalidArgument("jboost depthwise tree: inconsistent shapes");
  }
  const int64_t cap = features->dimensions()[nb];
  if (cap < 1 || thresholds->dimensions()[nb] != cap || missing_right->dimensions()[nb] != cap ||
      gains->dimensions()[nb] != cap || children->dimensions()[nb] != cap ||
      children->dimensions()[nb + 1] != 2 || level_counts->dimensions()[nb] != depth ||
      values->dimensions()[nb] != cap + 1 || values->dimensions()[nb + 1] != c / 2) {
    return ffi::Error::InvalidArgument("jboost depthwise tree: inconsistent table shapes");
  }
  if (n > kMaxIndex) return CheckIndexable("jboost depthwise tree", n, 0, 0, 0);
  std::atomic<bool> overflow{false};
  // Each X's distinct bins, once per call (a forest's trees share one X: a batch offset of 0).
  std::vector<int64_t> xs(ox.begin(), ox.end());
  std::sort(xs.begin(), xs.end());
  xs.erase(std::unique(xs.begin(), xs.end()), xs.end());
  std::vector<std::vector<int32_t>> distinct(xs.size());
  for (size_t u = 0; u < xs.size(); ++u) {
    DistinctBins(X.typed_data() + xs[u], n_features, n, n_bins, &distinct[u]);
  }
  // Each payload's one-hot classes, once per call (a forest's trees share one payload and differ
  // by their row weights).
  std::vector<int64_t> ps(op.begin(), op.end());
  std::sort(ps.begin(), ps.end());
  ps.erase(std::unique(ps.begin(), ps.end()), ps.end());
  std::vector<std::vector<int32_t>> classes(ps.size());
  if (ps.size() < static_cast<size_t>(n_models)) {  // shared by trees (else per tree is as cheap)
    for (size_t u = 0; u < ps.size(); ++u) OneHotClasses(payload.typed_data() + ps[u], n, c, &classes[u]);
  }
  ForEachModel(n_models, n_threads, [&](int64_t mi, int64_t threads) {
    Settings s{n_features, n, c, n_bins, depth, max_features, max_nodes,
               max_features < n_features, missing, l2.typed_data()[ol2[mi]],
               msg.typed_data()[omsg[mi]], mcw.typed_data()[omcw[mi]]};
    const uint32_t* sd = seed.typed_data() + os[mi];
    Table t{cap,
            features->typed_data() + of[mi],
            thresholds->typed_data() + ot[mi],
            missing_right->typed_data() + om[mi],
            children->typed_data() + oc[mi],
            level_counts->typed_data() + olc[mi],
            gains->typed_data() + og[mi],
            values->typed_data() + ov[mi],
            leaf->typed_data() + ol[mi]};
    thread_local std::vector<int32_t> node_parent, leaf_parent, cls, part;
    thread_local std::vector<float> store;
    s.distinct = distinct[std::lower_bound(xs.begin(), xs.end(), ox[mi]) - xs.begin()].data();
    const Rows rows = CompactRows(
        payload.typed_data() + op[mi], weights.typed_data() + ow[mi],
        classes[std::lower_bound(ps.begin(), ps.end(), op[mi]) - ps.begin()], &s, &store, &cls, &part);
    if (s.hs == 0) s.hess_min = SharedHessMin(s);
    if (!GrowTree(s, X.typed_data() + ox[mi], rows, part, sd[0], sd[1], t, &node_parent,
                  &leaf_parent, threads)) {
      overflow = true;
      return;
    }
    LeafValues(s, rows, part, t, node_parent, leaf_parent);
  });
  if (overflow) {
    return ffi::Error::Internal("jboost depthwise tree: a tree needs more node slots than its "
                                "table holds (jboost.trees.node_table.node_capacity); please report it");
  }
  return ffi::Error::Success();
}

}  // namespace
}  // namespace jboost

using jboost::Guarded;

XLA_FFI_DEFINE_HANDLER_SYMBOL(JboostDepthwiseTree, Guarded<jboost::DepthwiseTreeImpl>::Call,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::U8>>()   // X (..., F, n) bins
                                  .Arg<ffi::Buffer<ffi::F32>>()  // payload (..., n, C)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // row weights (..., n)
                                  .Arg<ffi::Buffer<ffi::U32>>()  // seed (..., 2)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // l2 (...)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // min_split_gain (...)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // min_child_weight (...)
                                  .Ret<ffi::Buffer<ffi::S32>>()  // features (..., N)
                                  .Ret<ffi::Buffer<ffi::S32>>()  // thresholds (..., N)
                                  .Ret<ffi::Buffer<ffi::S32>>()  // missing_right (..., N)
                                  .Ret<ffi::Buffer<ffi::F32>>()  // gains (..., N)
                                  .Ret<ffi::Buffer<ffi::S32>>()  // children (..., N, 2)
                                  .Ret<ffi::Buffer<ffi::S32>>()  // level_counts (..., D)
                                  .Ret<ffi::Buffer<ffi::S32>>()  // leaf (..., n) table leaves
                                  .Ret<ffi::Buffer<ffi::F32>>()  // leaf values (..., N + 1, K)
                                  .Attr<int64_t>("depth")
                                  .Attr<int64_t>("n_bins")
                                  .Attr<int64_t>("max_features")
                                  .Attr<int64_t>("max_nodes")
                                  .Attr<int64_t>("n_threads")
                                  .Attr<bool>("missing"));
