// jboost's CPU kernels: split gains from cumulative histograms (used by level.cc and
// split_gains.cc).
#ifndef JBOOST_NATIVE_GAINS_H_
#define JBOOST_NATIVE_GAINS_H_

#include <cstdint>
#include <cstring>
#include <limits>

namespace jboost {

// ---------------------------------------------------------------------------------------------
// Split gains (jboost.trees.splits.split_gains_cumulative), from one feature's cumulative histograms
// cum (L, B, C) of the level's L leaves (C = 2K: gradient sums, then hessian sums; bin B - 1 the
// missing bin): out (B - 1, 2), out[t, d] = sum over leaves whose children both have hessian
// sum >= min_child_weight of S(left) + S(right) - S(leaf), S(G, H) = sum_k G_k (G_k / (H_k + l2))
// (0 where H_k + l2 <= 0); direction d = 0 sends missing rows left (left = cum[t] + missing),
// d = 1 right (left = cum[t]); without missing rows (missing = false) d = 1 is -inf. The same
// float expressions as the JAX function, summed over leaves in leaf order.
// (Any even C <= 16; C = 2 goes by change points: GainEvents; C > 16: WideGains.)
void FeatureGains(const float* cum, int64_t n_leaves, int64_t n_bins, int64_t c, float l2,
                  float mcw, bool missing, float* out, float* acc);

// FeatureGains for one output (C = 2), by change points. A leaf's left sums cum[t] only change
// at the bins where its histogram is non-zero, and so does its gain: the gain is computed once
// per change point (and once for an empty left side), vectorised over the change points, and
// the leaf adds, at each change point t, the difference from its previous gain to an event
// array; a feature's gains are then the running sums of the events over t. The differences of
// float gains are exact in double and the sums run in double, rounded once to float. The result
// does not depend on which superset of its change points a leaf reports (an unchanged gain adds
// exactly 0): changes read off cumulative histograms (GainEvents::AddCumulative) and the
// non-zero cells found while building them (the sparse level in Level) give bitwise the same
// gains. Leaves are added in leaf order; a leaf with hessian sum below a positive
// min_child_weight has no admissible split (its children cannot both reach it) and adds nothing.
// (Floats per bin of scratch: kGainScratch.)
constexpr int64_t kGainScratch = 10;

// The gains of `m` change points of one leaf plus its empty left side (entry 0 of gs, hs: 0),
// as events: base[d] += gain(empty), ev[d * nt + pos[i]] += gain(i) - gain(i - 1).
void LeafEvents(int64_t m, const int32_t* pos, const float* gs, const float* hs, float G, float H,
                float mg, float mh, float l2, float mcw, bool missing, int64_t nt, double* ev,
                double* base, float* q);

// One feature's gain events, in kGainScratch * B floats of scratch (8-byte aligned).
struct GainEvents {
  int64_t nt;
  double* ev;    // (2, nt)
  double base[2] = {0.0, 0.0};
  int32_t* pos;  // (nt + 1) change points of the current leaf (entry 0: the empty left side)
  float* gs;     // (nt + 1) their cumulative gradient sums
  float* hs;     // (nt + 1) and hessian sums
  float* q;      // (nt + 1) gains

  GainEvents(float* scratch, int64_t n_bins) : nt(n_bins - 1) {
    ev = reinterpret_cast<double*>(scratch);
    pos = reinterpret_cast<int32_t*>(ev + 2 * nt);
    gs = reinterpret_cast<float*>(pos + nt + 1);
    hs = gs + nt + 1;
    q = hs + nt + 1;
    std::memset(ev, 0, sizeof(double) * 2 * nt);
    pos[0] = -1;
    gs[0] = hs[0] = 0.0f;
  }

  // The leaf's m change points are in pos, gs, hs [1, m]; its totals G, H include the
  // missing bin, whose sums are (mg, mh) (computed as G - cum[nt - 1], as the JAX function).
  void AddLeaf(int64_t m, float G, float H, float mg, float mh, float l2, float mcw, bool missing) {
    if (mcw > 0.0f && !(H >= mcw)) return;
    LeafEvents(m, pos, gs, hs, G, H, mg, mh, l2, mcw, missing, nt, ev, base, q);
  }

  // A leaf's (B, 2) cumulative histogram: its change points are where cum[t] differs (in bits)
  // from cum[t - 1] (t = 0: from 0).
  void AddCumulative(const float* h, float l2, float mcw, bool missing) {
    const float G = h[2 * nt], H = h[2 * nt + 1];
    if (mcw > 0.0f && !(H >= mcw)) return;
    uint64_t prev = 0;
    int64_t m = 0;
    for (int64_t t = 0; t < nt; ++t) {  // branch-free: written always, kept when changed
      uint64_t w;
      std::memcpy(&w, h + 2 * t, sizeof(w));
      pos[m + 1] = static_cast<int32_t>(t);
      gs[m + 1] = h[2 * t];
      hs[m + 1] = h[2 * t + 1];
      m += w != prev;
      prev = w;
    }
    AddLeaf(m, G, H, G - h[2 * (nt - 1)], H - h[2 * (nt - 1) + 1], l2, mcw, missing);
  }

  // out (B - 1, 2): the running sums of the events, rounded to float.
  void Write(float* out, bool missing) const {
    double a0 = base[0], a1 = base[1];
    const double* e1 = ev + nt;
    for (int64_t t = 0; t < nt; ++t) {
      a0 += ev[t];
      out[2 * t] = static_cast<float>(a0);
      if (missing) {
        a1 += e1[t];
        out[2 * t + 1] = static_cast<float>(a1);
      } else {
        out[2 * t + 1] = -std::numeric_limits<float>::infinity();
      }
    }
  }
};

// FeatureGains for wide payloads (C > 16), the same float expressions and the same order of
// sums (outputs j = 0..K-1 per bin, leaves in order), vectorised over the bins: each leaf's
// cumulative sums are transposed to (C, u) first, so that output j's sums over the bins are
// contiguous. Only the bins [0, u) are computed (u >= 1): the caller knows that every leaf's
// cumulative sums at bins [u, B - 1) are those of bin u - 1 (no row is there), so their gains are
// those of bin u - 1 too; bin B - 1 holds the leaf's total. `scratch`: WideGainScratch floats.
inline int64_t WideGainScratch(int64_t n_bins, int64_t c) { return (c + 8) * n_bins + 2 * c; }

void WideGains(const float* cum, int64_t n_leaves, int64_t n_bins, int64_t c, int64_t u, float l2,
               float mcw, bool missing, float* out, float* scratch);

// `scratch` holds kGainScratch * n_bins floats (8-byte aligned), WideGainScratch for C > 16.
void Gains(const float* cum, int64_t n_leaves, int64_t n_bins, int64_t c, float l2, float mcw,
           bool missing, float* out, float* scratch);

}  // namespace jboost

#endif  // JBOOST_NATIVE_GAINS_H_
