// jboost's CPU kernels: split gains from cumulative histograms (see gains.h).
#include "gains.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

#include "parallel.h"
#include "rows.h"

namespace jboost {

void FeatureGains(const float* cum, int64_t n_leaves, int64_t n_bins, int64_t c, float l2,
                  float mcw, bool missing, float* out, float* acc) {
  const int64_t k = c / 2;
  const int64_t nt = n_bins - 1;
  auto score = [l2](float g, float h) {
    const float denom = h + l2;
    return denom > 0.0f ? g * (g / denom) : 0.0f;
  };
  float* acc0 = acc;
  float* acc1 = acc + nt;
  for (int64_t t = 0; t < 2 * nt; ++t) acc[t] = 0.0f;
  for (int64_t leaf = 0; leaf < n_leaves; ++leaf) {
    const float* h = cum + leaf * n_bins * c;
    const float* total = h + nt * c;
    float miss[16], parent = 0.0f;
    for (int64_t j = 0; j < c; ++j) miss[j] = nt > 0 ? total[j] - h[(nt - 1) * c + j] : total[j];
    for (int64_t j = 0; j < k; ++j) parent += score(total[j], total[k + j]);
    for (int64_t d = 0; d < (missing ? 2 : 1); ++d) {
      float* a = d == 0 ? acc0 : acc1;
      for (int64_t t = 0; t < nt; ++t) {
        float sl = 0.0f, sr = 0.0f, hl = 0.0f, hr = 0.0f;
        for (int64_t j = 0; j < k; ++j) {
          const float gl = d == 0 ? h[t * c + j] + miss[j] : h[t * c + j];
          const float xl = d == 0 ? h[t * c + k + j] + miss[k + j] : h[t * c + k + j];
          const float gr = total[j] - gl, xr = total[k + j] - xl;
          sl += score(gl, xl);
          sr += score(gr, xr);
          hl += xl;
          hr += xr;
        }
        const float gain = sl + sr - parent;
        a[t] += (hl >= mcw && hr >= mcw) ? gain : 0.0f;
      }
    }
  }
  for (int64_t t = 0; t < nt; ++t) {
    out[2 * t] = acc0[t];
    out[2 * t + 1] = missing ? acc1[t] : -std::numeric_limits<float>::infinity();
  }
}

// The gains of `m` change points of one leaf plus its empty left side (entry 0 of gs, hs: 0),
// as events: base[d] += gain(empty), ev[d * nt + pos[i]] += gain(i) - gain(i - 1).
JBOOST_AVX2_CLONES
void LeafEvents(int64_t m, const int32_t* pos, const float* gs, const float* hs, float G, float H,
                float mg, float mh, float l2, float mcw, bool missing, int64_t nt, double* ev,
                double* base, float* q) {
  const float pd = H + l2;
  const float parent = pd > 0.0f ? G * (G / pd) : 0.0f;
  for (int d = 0; d < (missing ? 2 : 1); ++d) {
    // Direction 0: missing rows go left (left = cum[t] + missing sums); 1: right.
    const float ag = d == 0 ? mg : 0.0f, ah = d == 0 ? mh : 0.0f;
    float* __restrict qq = q;
    for (int64_t i = 0; i <= m; ++i) {
      const float gl = gs[i] + ag, xl = hs[i] + ah;
      const float gr = G - gl, xr = H - xl;
      const float dl = xl + l2, dr = xr + l2;
      const bool okl = dl > 0.0f, okr = dr > 0.0f;
      const float ql = gl / (okl ? dl : 1.0f), qr = gr / (okr ? dr : 1.0f);
      const float sl = okl ? gl * ql : 0.0f;
      const float sr = okr ? gr * qr : 0.0f;
      const float gain = sl + sr - parent;
      const bool ok = (xl >= mcw) & (xr >= mcw);
      qq[i] = ok ? gain : 0.0f;
    }
    double* e = ev + d * nt;
    base[d] += static_cast<double>(qq[0]);
    for (int64_t i = 1; i <= m; ++i) {
      e[pos[i]] += static_cast<double>(qq[i]) - static_cast<double>(qq[i - 1]);
    }
  }
}

template <bool kMissingLeft>
JBOOST_AVX2_CLONES void WideDirection(const float* tr, int64_t u, int64_t k, const float* total,
                                      const float* miss, float l2, float* __restrict sl,
                                      float* __restrict sr, float* __restrict hl,
                                      float* __restrict hr) {
  for (int64_t t = 0; t < u; ++t) sl[t] = sr[t] = hl[t] = hr[t] = 0.0f;
  for (int64_t j = 0; j < k; ++j) {
    const float* __restrict g = tr + j * u;
    const float* __restrict x = tr + (k + j) * u;
    const float G = total[j], H = total[k + j];
    const float mg = kMissingLeft ? miss[j] : 0.0f, mh = kMissingLeft ? miss[k + j] : 0.0f;
    for (int64_t t = 0; t < u; ++t) {
      const float gl = kMissingLeft ? g[t] + mg : g[t];
      const float xl = kMissingLeft ? x[t] + mh : x[t];
      const float gr = G - gl, xr = H - xl;
      const float dl = xl + l2, dr = xr + l2;
      const bool okl = dl > 0.0f, okr = dr > 0.0f;
      const float ql = gl / (okl ? dl : 1.0f), qr = gr / (okr ? dr : 1.0f);
      sl[t] += okl ? gl * ql : 0.0f;
      sr[t] += okr ? gr * qr : 0.0f;
      hl[t] += xl;
      hr[t] += xr;
    }
  }
}

void WideGains(const float* cum, int64_t n_leaves, int64_t n_bins, int64_t c, int64_t u, float l2,
               float mcw, bool missing, float* out, float* scratch) {
  const int64_t k = c / 2;
  const int64_t nt = n_bins - 1;
  u = std::max<int64_t>(1, std::min(u, nt));
  float* tr = scratch;           // (c, u)
  float* sl = tr + c * u;        // (u) each
  float* sr = sl + u;
  float* hl = sr + u;
  float* hr = hl + u;
  float* acc0 = hr + u;
  float* acc1 = acc0 + u;
  float* miss = acc1 + u;        // (c)
  auto score = [l2](float g, float h) {
    const float denom = h + l2;
    return denom > 0.0f ? g * (g / denom) : 0.0f;
  };
  for (int64_t t = 0; t < u; ++t) acc0[t] = acc1[t] = 0.0f;
  for (int64_t leaf = 0; leaf < n_leaves; ++leaf) {
    const float* h = cum + leaf * n_bins * c;
    const float* total = h + nt * c;
    const float* last = h + (u - 1) * c;  // = bin nt - 1
    float parent = 0.0f;
    for (int64_t j = 0; j < c; ++j) miss[j] = total[j] - last[j];
    for (int64_t j = 0; j < k; ++j) parent += score(total[j], total[k + j]);
    for (int64_t t = 0; t < u; ++t) {
      for (int64_t j = 0; j < c; ++j) tr[j * u + t] = h[t * c + j];
    }
    for (int64_t d = 0; d < (missing ? 2 : 1); ++d) {
      if (d == 0) WideDirection<true>(tr, u, k, total, miss, l2, sl, sr, hl, hr);
      else WideDirection<false>(tr, u, k, total, miss, l2, sl, sr, hl, hr);
      float* a = d == 0 ? acc0 : acc1;
      for (int64_t t = 0; t < u; ++t) {
        const float gain = sl[t] + sr[t] - parent;
        a[t] += (hl[t] >= mcw && hr[t] >= mcw) ? gain : 0.0f;
      }
    }
  }
  for (int64_t t = 0; t < nt; ++t) {
    const int64_t s = std::min(t, u - 1);
    out[2 * t] = acc0[s];
    out[2 * t + 1] = missing ? acc1[s] : -std::numeric_limits<float>::infinity();
  }
}

// `scratch` holds kGainScratch * n_bins floats (8-byte aligned), WideGainScratch for C > 16.
void Gains(const float* cum, int64_t n_leaves, int64_t n_bins, int64_t c, float l2, float mcw,
           bool missing, float* out, float* scratch) {
  if (c > kMaxNarrowChannels) {
    WideGains(cum, n_leaves, n_bins, c, n_bins - 1, l2, mcw, missing, out, scratch);
    return;
  }
  if (c != 2) {
    FeatureGains(cum, n_leaves, n_bins, c, l2, mcw, missing, out, scratch);
    return;
  }
  GainEvents g(scratch, n_bins);
  for (int64_t leaf = 0; leaf < n_leaves; ++leaf) g.AddCumulative(cum + leaf * n_bins * 2, l2, mcw, missing);
  g.Write(out, missing);
}

}  // namespace jboost
