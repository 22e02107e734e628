// jboost's CPU kernels: one whole depth-wise tree per call (jboost.depthwise.fit_tree's compact
// path, the random forests' grower), registered by jboost/depthwise.py.
//
// Level by level, as the pure-JAX compact path computes it:
//   * the nodes that may split (not yet a leaf, at least two rows of non-zero payload) get a slot,
//     in node order, at most S_d = max(1, min(2**d, max_nodes, n // 2)) of them;
//   * a slot's node draws its m features (DrawFeatures: the hash of jboost.depthwise.node_features,
//     the same uint32 operations) or takes every feature (m >= F);
//   * its (m, B, C) histogram sums its rows in row order (rows of all-zero payload skipped: they add
//     exact zeros), its prefix sums over the bins are jboost.histograms.prefix_sum's two-level
//     blocked cumsum (blocks of 16), its gains jboost.splits.split_gains_cumulative's float
//     expressions for one node, and its split the first maximum in (feature, threshold, direction)
//     order (jboost.splits.best_split_of_gains), min_split_gain subtracted; a node whose best gain is
//     not positive, or that has no slot, is a leaf (a null split: feature 0, threshold B - 2,
//     missing left, gain 0); so is a node whose best split would send all its rows of non-zero
//     payload one way (a split's children each hold such a row: a tree has at most as many leaves
//     as such rows, jboost.depthwise.node_capacity);
//   * every row moves to node j (left) or j + 2**d (right) of the next level.
// Rows are kept grouped by node (a stable counting sort per level), so a slot reads only its own
// rows and a level costs its rows and its splittable nodes, not 2**d. A level with no splittable
// node ends the growth (the deeper levels are null splits that move no row).
//
// Batching (vmap_method="expand_dims"): the trees of a batch are independent; threads take whole
// trees (ForEachModel); one tree spreads a level's slots over the threads. Each slot is computed
// the same way on any thread: the result does not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "parallel.h"

namespace jboost {
namespace {

inline uint32_t Mix(uint32_t x) {  // lowbias32 (jboost.depthwise._mix)
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
  tmp->resize(n_features);
  for (int64_t f = 0; f < n_features; ++f) {
    (*tmp)[f] = {Mix(c + static_cast<uint32_t>(f) * 0x9e3779b9u), static_cast<int32_t>(f)};
  }
  std::nth_element(tmp->begin(), tmp->begin() + (m - 1), tmp->end());
  for (int64_t i = 0; i < m; ++i) out[i] = (*tmp)[i].second;
  std::sort(out, out + m);
}

struct Settings {
  int64_t n_features, n, c, n_bins, depth, m, max_nodes;
  bool draw, missing;
  float l2, msg, mcw;
};

// A sum over the K outputs in the order of XLA's CPU row reduction (measured: 16 accumulators,
// output k into accumulator k % 16, then halved pairwise), so that the gains are bitwise those of
// jboost.splits.split_gains_cumulative (checked for K <= 40; K = 1: the value itself).
template <typename Term>
inline float SumOutputs(int64_t k, Term term) {
  if (k == 1) return 0.0f + term(0);
  float acc[16] = {0.0f};
  for (int64_t j = 0; j < k; ++j) acc[j % 16] += term(j);
  for (int64_t w = 8; w >= 1; w /= 2) {
    for (int64_t i = 0; i < w; ++i) acc[i] = acc[i] + acc[i + w];
  }
  return acc[0];
}

// Score of a node: sum_k where(H_k + l2 > 0, G_k * (G_k / (H_k + l2)), 0).
inline float Score(const float* g, const float* h, int64_t k, float l2) {
  return SumOutputs(k, [&](int64_t j) {
    const float denom = h[j] + l2;
    return denom > 0.0f ? g[j] * (g[j] / denom) : 0.0f;
  });
}

inline float HessSum(const float* h, int64_t k) {
  return SumOutputs(k, [&](int64_t j) { return h[j]; });
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

struct SlotScratch {
  std::vector<float> hist;   // (m, B, C), then its prefix sums in place
  std::vector<float> left, right, miss;
  std::vector<std::pair<uint32_t, int32_t>> draw;
};

struct Best {
  int32_t pos = 0, threshold = 0;
  bool right = false;
  float gain = 0.0f;  // best - min_split_gain
};

// One slot's histogram, prefix sums, gains and first best split.
Best SplitSlot(const Settings& s, const uint8_t* X, const float* payload, const int32_t* rows,
               int64_t n_rows, const int32_t* feats, SlotScratch* sc) {
  const int64_t B = s.n_bins, C = s.c, K = C / 2, m = s.m;
  sc->hist.assign(m * B * C, 0.0f);
  float* hist = sc->hist.data();
  for (int64_t q = 0; q < m; ++q) {
    const uint8_t* col = X + static_cast<int64_t>(feats[q]) * s.n;
    float* hq = hist + q * B * C;
    for (int64_t r = 0; r < n_rows; ++r) {
      const int32_t i = rows[r];
      const int64_t b = std::min<int64_t>(col[i], B - 1);
      const float* p = payload + static_cast<int64_t>(i) * C;
      float* cell = hq + b * C;
      for (int64_t ch = 0; ch < C; ++ch) cell[ch] += p[ch];
    }
  }
  // jboost.histograms.prefix_sum: within blocks of 16 bins, then the block totals' cumsum minus
  // the block's own total added to each block (B <= 16: one plain cumsum).
  constexpr int64_t kBlock = 16;
  for (int64_t q = 0; q < m; ++q) {
    float* hq = hist + q * B * C;
    for (int64_t ch = 0; ch < C; ++ch) {
      if (B <= kBlock) {
        float acc = 0.0f;
        for (int64_t b = 0; b < B; ++b) hq[b * C + ch] = acc = acc + hq[b * C + ch];
        continue;
      }
      float run = 0.0f;  // cumsum of the block totals
      for (int64_t start = 0; start < B; start += kBlock) {
        const int64_t end = std::min(B, start + kBlock);
        float acc = 0.0f;
        for (int64_t b = start; b < end; ++b) hq[b * C + ch] = acc = acc + hq[b * C + ch];
        run = run + acc;  // padding bins (zeros) leave the block total unchanged
        const float offset = run - acc;
        for (int64_t b = start; b < end; ++b) hq[b * C + ch] = hq[b * C + ch] + offset;
      }
    }
  }
  sc->left.resize(C);
  sc->right.resize(C);
  sc->miss.resize(C);
  float* left = sc->left.data();
  float* right = sc->right.data();
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
    const float parent = Score(total, total + K, K, s.l2);
    for (int64_t t = 0; t < nt; ++t) {
      const float* present = hq + t * C;
      // A bin no row of the node is in leaves the left sums, and so both gains, those of t - 1:
      // they cannot be a new first maximum (nor a first NaN).
      if (t > 0 && SameBits(present, present - C, C)) continue;
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
          const bool ok = HessSum(left + K, K) >= s.mcw && HessSum(right + K, K) >= s.mcw;
          if (!ok) {
            gain = 0.0f;  // 0 + where(ok, ., 0)
          } else {
            const float leaf_gain =
                (Score(left, left + K, K, s.l2) + Score(right, right + K, K, s.l2)) - parent;
            gain = 0.0f + leaf_gain;
          }
        }
        const int64_t idx = (q * nt + t) * 2 + d;
        // The first maximum; NaN counts as the largest (argmax's and max's NaN rules).
        if (best_idx < 0 || gain > best || (std::isnan(gain) && !std::isnan(best))) {
          best = gain;
          best_idx = idx;
        }
      }
    }
  }
  Best out;
  const float gain = best - s.msg;
  if (gain > 0.0f) {
    out.pos = static_cast<int32_t>(best_idx / (2 * nt));
    const int64_t j = best_idx % (2 * nt);
    out.threshold = static_cast<int32_t>(j / 2);
    out.right = (j % 2) == 1;
    out.gain = gain;
  }
  return out;
}

inline int64_t NodeSlots(int64_t n, int64_t max_nodes, int64_t d) {
  return std::max<int64_t>(1, std::min<int64_t>({int64_t{1} << d, max_nodes, n / 2}));
}

void GrowTree(const Settings& s, const uint8_t* X, const float* payload, uint32_t s0, uint32_t s1,
              int32_t* features, int32_t* thresholds, int32_t* missing_right, float* gains,
              int32_t* leaf, int64_t n_threads) {
  const int64_t n = s.n, C = s.c, B = s.n_bins;
  const int64_t n_rules = (int64_t{1} << s.depth) - 1;
  std::fill(features, features + n_rules, 0);
  std::fill(thresholds, thresholds + n_rules, static_cast<int32_t>(B - 2));
  std::fill(missing_right, missing_right + n_rules, 0);
  std::fill(gains, gains + n_rules, 0.0f);
  std::fill(leaf, leaf + n, 0);
  // Rows of non-zero payload, grouped by node (row order within a node).
  // Scratch kept by the calling thread across trees and calls (no page faults of fresh memory
  // per tree); local references, so that the slots' threads read the caller's.
  thread_local std::vector<int32_t> tl_part, tl_grouped, tl_next;
  thread_local std::vector<int64_t> tl_start, tl_count;
  thread_local std::vector<uint8_t> tl_active, tl_ok;
  thread_local std::vector<SlotScratch> tl_scratch;
  auto &part = tl_part, &grouped = tl_grouped, &next = tl_next;
  auto &start = tl_start, &count = tl_count;
  auto &active = tl_active, &ok = tl_ok;
  auto& scratch = tl_scratch;
  part.clear();
  for (int64_t i = 0; i < n; ++i) {
    const float* p = payload + i * C;
    bool any = false;
    for (int64_t ch = 0; ch < C; ++ch) any |= p[ch] != 0.0f;
    if (any) part.push_back(static_cast<int32_t>(i));
  }
  grouped.assign(part.begin(), part.end());
  next.resize(part.size());
  start.assign({0, static_cast<int64_t>(part.size())});  // node j: [start[j], start[j+1])
  active.assign(1, 1);
  const int64_t m = s.draw ? s.m : s.n_features;
  std::vector<int32_t> all(s.n_features);
  for (int64_t f = 0; f < s.n_features; ++f) all[f] = static_cast<int32_t>(f);
  if (static_cast<int64_t>(scratch.size()) < n_threads) scratch.resize(std::max<int64_t>(1, n_threads));
  Settings ss = s;
  ss.m = m;
  for (int64_t d = 0; d < s.depth; ++d) {
    const int64_t n_nodes = int64_t{1} << d;
    const int64_t cap = NodeSlots(n, s.max_nodes, d);
    std::vector<int64_t> slot_node;
    for (int64_t j = 0; j < n_nodes && static_cast<int64_t>(slot_node.size()) < cap; ++j) {
      if (active[j] && start[j + 1] - start[j] >= 2) slot_node.push_back(j);
    }
    const int64_t n_slots = static_cast<int64_t>(slot_node.size());
    if (n_slots == 0) break;  // every deeper rule is a null split: no row moves
    std::vector<int32_t> drawn(n_slots * m);
    std::vector<Best> best(n_slots);
    const int64_t T = std::max<int64_t>(1, std::min<int64_t>(n_threads, n_slots));
    Parallel(T, [&](int64_t t) {
      SlotScratch* sc = &scratch[t];
      for (int64_t k = n_slots * t / T; k < n_slots * (t + 1) / T; ++k) {
        const int64_t j = slot_node[k];
        int32_t* fk = drawn.data() + k * m;
        if (s.draw) {
          DrawFeatures(s0, s1, d, j, s.n_features, m, &sc->draw, fk);
        } else {
          std::copy(all.begin(), all.end(), fk);
        }
        const int32_t* own = grouped.data() + start[j];
        const int64_t n_own = start[j + 1] - start[j];
        Best b = SplitSlot(ss, X, payload, own, n_own, fk, sc);
        if (b.gain > 0.0f) {  // a split sends rows both ways, else the node is a leaf
          const uint8_t* col = X + static_cast<int64_t>(fk[b.pos]) * n;
          int64_t n_right = 0;
          for (int64_t q = 0; q < n_own; ++q) {
            const int32_t v = col[own[q]];
            n_right += (v == static_cast<int32_t>(B - 1)) ? b.right : v > b.threshold;
          }
          if (n_right == 0 || n_right == n_own) b.gain = 0.0f;
        }
        best[k] = b;
      }
    });
    ok.assign(n_nodes, 0);
    const int64_t base = n_nodes - 1;
    for (int64_t k = 0; k < n_slots; ++k) {
      const Best& b = best[k];
      if (!(b.gain > 0.0f)) continue;
      const int64_t j = slot_node[k];
      ok[j] = 1;
      features[base + j] = drawn[k * m + b.pos];
      thresholds[base + j] = b.threshold;
      missing_right[base + j] = b.right ? 1 : 0;
      gains[base + j] = b.gain;
    }
    // Route every row (its node's rule; a leaf's null split sends it left).
    const int32_t missing_bin = static_cast<int32_t>(B - 1);
    for (int64_t i = 0; i < n; ++i) {
      const int32_t j = leaf[i];
      if (!ok[j]) continue;
      const int32_t v = X[static_cast<int64_t>(features[base + j]) * n + i];
      const bool r = v == missing_bin ? missing_right[base + j] != 0 : v > thresholds[base + j];
      leaf[i] = j + (r ? static_cast<int32_t>(n_nodes) : 0);
    }
    // Regroup the participating rows by their new node (stable).
    const int64_t n_next = 2 * n_nodes;
    count.assign(n_next + 1, 0);
    for (int32_t i : grouped) ++count[leaf[i] + 1];
    for (int64_t j = 0; j < n_next; ++j) count[j + 1] += count[j];
    start.assign(count.begin(), count.end());
    // Stable: scan in row order (grouped is ordered by node, then row; rows of one new node come
    // from one old node, so their order is row order).
    for (int32_t i : grouped) next[count[leaf[i]]++] = i;
    grouped.swap(next);
    active.assign(n_next, 0);
    for (int64_t j = 0; j < n_nodes; ++j) active[j] = active[j + n_nodes] = ok[j];
  }
}

// jboost.tree.newton_leaf_values of the tree's leaves, from the rows: the leaves' sums (every
// row, in row order, as jax.ops.segment_sum) and counts of rows of non-zero payload; the sums
// and counts of every node (node j of level d: children j and j + 2**d); the root's Newton value,
// then level by level each node's own value where a row reaches it and its hessian sum is at
// least min_child_weight, its parent's value otherwise. values: (2**D, K).
void LeafValues(const Settings& s, const float* payload, const int32_t* leaf, float* values) {
  const int64_t C = s.c, K = C / 2, L = int64_t{1} << s.depth;
  // Levels stored one after the other: level d at offset (2**d - 1) (node sums, counts).
  // Scratch kept by the thread across trees and calls (no page faults of fresh memory per tree).
  thread_local std::vector<float> tl_sums, tl_prev, tl_cur;  // (used by this thread only)
  thread_local std::vector<int64_t> tl_counts;
  auto &sums = tl_sums, &prev = tl_prev, &cur = tl_cur;  // one TLS lookup, not one per access
  auto& counts = tl_counts;
  sums.assign((2 * L - 1) * C, 0.0f);
  counts.assign(2 * L - 1, 0);
  float* leaf_sums = sums.data() + (L - 1) * C;
  int64_t* leaf_counts = counts.data() + (L - 1);
  for (int64_t i = 0; i < s.n; ++i) {
    const float* p = payload + i * C;
    float* o = leaf_sums + static_cast<int64_t>(leaf[i]) * C;
    bool any = false;
    for (int64_t ch = 0; ch < C; ++ch) {
      o[ch] += p[ch];
      any |= p[ch] != 0.0f;
    }
    leaf_counts[leaf[i]] += any;
  }
  for (int64_t d = s.depth - 1; d >= 0; --d) {
    const int64_t w = int64_t{1} << d;
    float* lv = sums.data() + (w - 1) * C;
    const float* ch_ = sums.data() + (2 * w - 1) * C;
    for (int64_t j = 0; j < w; ++j) {
      for (int64_t c = 0; c < C; ++c) lv[j * C + c] = (0.0f + ch_[j * C + c]) + ch_[(j + w) * C + c];
      counts[w - 1 + j] = counts[2 * w - 1 + j] + counts[2 * w - 1 + j + w];
    }
  }
  // Values level by level in a (2**D, K) buffer: level d's in its first 2**d rows.
  auto value = [&](const float* node, float* out) {
    for (int64_t k = 0; k < K; ++k) {
      const float denom = node[K + k] + s.l2;
      out[k] = denom > 0.0f ? -node[k] / denom : 0.0f;
    }
  };
  prev.resize(L * K);
  cur.resize(L * K);
  value(sums.data(), prev.data());
  for (int64_t d = 1; d <= s.depth; ++d) {
    const int64_t w = int64_t{1} << d, half = w / 2;
    const float* lv = sums.data() + (w - 1) * C;
    const int64_t* lc = counts.data() + (w - 1);
    for (int64_t j = 0; j < w; ++j) {
      const float* node = lv + j * C;
      const float h = HessSum(node + K, K);
      if (lc[j] > 0 && h >= s.mcw) {
        value(node, cur.data() + j * K);
      } else {
        const float* from = prev.data() + (j % half) * K;
        float* to = cur.data() + j * K;
        for (int64_t k = 0; k < K; ++k) to[k] = from[k];
      }
    }
    prev.swap(cur);
  }
  std::copy(prev.begin(), prev.begin() + L * K, values);
}

ffi::Error DepthwiseTreeImpl(ffi::Buffer<ffi::U8> X, ffi::Buffer<ffi::F32> payload,
                             ffi::Buffer<ffi::U32> seed, ffi::Buffer<ffi::F32> l2,
                             ffi::Buffer<ffi::F32> msg, ffi::Buffer<ffi::F32> mcw,
                             ffi::ResultBuffer<ffi::S32> features,
                             ffi::ResultBuffer<ffi::S32> thresholds,
                             ffi::ResultBuffer<ffi::S32> missing_right,
                             ffi::ResultBuffer<ffi::F32> gains, ffi::ResultBuffer<ffi::S32> leaf,
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
  if (xd.size() != nb + 2 || pd.size() != nb + 2) {
    return ffi::Error::InvalidArgument("jboost depthwise tree: X (..., F, n), payload (..., n, C)");
  }
  const int64_t n_features = xd[nb], n = xd[nb + 1], c = pd[nb + 1];
  const int64_t n_rules = (int64_t{1} << depth) - 1;
  std::vector<int64_t> ox, op, os, ol2, omsg, omcw, of, ot, om, og, ol, ov;
  if (pd[nb] != n || ld[nb] != n || c < 2 || c % 2 != 0 || n_bins < 2 || n_bins > 256 ||
      depth < 0 || depth > 30 || max_features < 1 || max_nodes < 1 ||
      !BatchOffsets(xd, 2, shape, &ox) || !BatchOffsets(pd, 2, shape, &op) ||
      !BatchOffsets(seed.dimensions(), 1, shape, &os) ||
      !BatchOffsets(l2.dimensions(), 0, shape, &ol2) ||
      !BatchOffsets(msg.dimensions(), 0, shape, &omsg) ||
      !BatchOffsets(mcw.dimensions(), 0, shape, &omcw) ||
      !BatchOffsets(features->dimensions(), 1, shape, &of) ||
      !BatchOffsets(thresholds->dimensions(), 1, shape, &ot) ||
      !BatchOffsets(missing_right->dimensions(), 1, shape, &om) ||
      !BatchOffsets(gains->dimensions(), 1, shape, &og) ||
      !BatchOffsets(ld, 1, shape, &ol) || !BatchOffsets(values->dimensions(), 2, shape, &ov) ||
      features->dimensions()[nb] != n_rules || values->dimensions()[nb] != n_rules + 1 ||
      values->dimensions()[nb + 1] != c / 2) {
    return ffi::Error::InvalidArgument("jboost depthwise tree: inconsistent shapes");
  }
  if (n > kMaxIndex) return CheckIndexable("jboost depthwise tree", n, 0, 0, 0);
  ForEachModel(n_models, n_threads, [&](int64_t mi, int64_t threads) {
    Settings s{n_features, n, c, n_bins, depth, max_features, max_nodes,
               max_features < n_features, missing, l2.typed_data()[ol2[mi]],
               msg.typed_data()[omsg[mi]], mcw.typed_data()[omcw[mi]]};
    const uint32_t* sd = seed.typed_data() + os[mi];
    GrowTree(s, X.typed_data() + ox[mi], payload.typed_data() + op[mi], sd[0], sd[1],
             features->typed_data() + of[mi], thresholds->typed_data() + ot[mi],
             missing_right->typed_data() + om[mi], gains->typed_data() + og[mi],
             leaf->typed_data() + ol[mi], threads);
    LeafValues(s, payload.typed_data() + op[mi], leaf->typed_data() + ol[mi],
               values->typed_data() + ov[mi]);
  });
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
                                  .Arg<ffi::Buffer<ffi::U32>>()  // seed (..., 2)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // l2 (...)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // min_split_gain (...)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // min_child_weight (...)
                                  .Ret<ffi::Buffer<ffi::S32>>()  // features (..., 2**D - 1)
                                  .Ret<ffi::Buffer<ffi::S32>>()  // thresholds (..., 2**D - 1)
                                  .Ret<ffi::Buffer<ffi::S32>>()  // missing_right (..., 2**D - 1)
                                  .Ret<ffi::Buffer<ffi::F32>>()  // gains (..., 2**D - 1)
                                  .Ret<ffi::Buffer<ffi::S32>>()  // leaf (..., n)
                                  .Ret<ffi::Buffer<ffi::F32>>()  // leaf values (..., 2**D, K)
                                  .Attr<int64_t>("depth")
                                  .Attr<int64_t>("n_bins")
                                  .Attr<int64_t>("max_features")
                                  .Attr<int64_t>("max_nodes")
                                  .Attr<int64_t>("n_threads")
                                  .Attr<bool>("missing"));
