// jboost's CPU kernels, called from JAX as XLA FFI custom calls: histograms (see
// jboost/histograms.py) and, at the end of the file, binning (jboost/binning.py).
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
// Any number of outputs: payloads of up to 16 channels (K <= 8) take the paths below as they
// were first written; wider ones take "wide" paths (ChunkIntoWide, LevelWide, WideGains),
// vectorised over the channels and the bins, with the same sums in the same order per cell.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <cmath>
#include <limits>
#include <cstdint>
#include <cstring>
#include <exception>
#include <new>
#include <stdexcept>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

// The split-gain loop is bound by float divisions: on x86-64 Linux it is also compiled for AVX2
// (8 lanes instead of SSE2's 4), picked at load time. The same IEEE operations per lane, no FMA
// contraction (the avx2 target has no FMA): bitwise the same gains either way.
#if defined(__x86_64__) && defined(__linux__) && (defined(__GNUC__) || defined(__clang__))
#define JBOOST_AVX2_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define JBOOST_AVX2_CLONES
#endif

namespace {

// Payloads of up to this many channels (C = 2K, K <= 8 outputs) take the kernels' original
// paths; wider ones (any K) take the "wide" paths below, vectorised over the channels and the
// bins. (The narrow paths are kept as they were: bitwise the same results as before.)
constexpr int64_t kMaxNarrowChannels = 16;

// Scratch memory reused across calls by the calling (XLA) thread: no allocation or page
// faults on the hot path after the first call.
struct Scratch {
  std::unique_ptr<char[]> data;
  size_t size = 0;
  char* Get(size_t bytes) {
    if (bytes > size) {
      data.reset(new char[bytes]);
      size = bytes;
    }
    return data.get();
  }
};

struct Rows {
  const int32_t* ids;    // row ids (nullptr: dense, row r is row r)
  const int32_t* base;   // output offset of each row's slot (nullptr: 0)
  const float* payload;  // (m, C) payload of the rows
  int64_t m;
  int64_t row0;          // dense: the first row of the chunk
};

// The rows of one chunk into the histograms of features [f_begin, f_end).
// Feature f's histograms start at out + (f - f_base) * hist_size.
// With kMark, every updated cell (slot, bin) of feature f also sets bit slot * B + bin of
// bits + (f - f_base) * words (B = hist_size / (slots * c): the bit index is offset / c + bin).
template <int C, bool kDense, bool kMark>
void ChunkInto(const uint8_t* bins, int64_t n, const Rows& rs, float* out, int64_t hist_size,
               int64_t c_dyn, uint32_t max_bin, int64_t f_begin, int64_t f_end,
               int64_t f_base, uint64_t* bits, int64_t words) {
  const int64_t c = C > 0 ? C : c_dyn;
  auto bin_of = [max_bin](uint8_t b) -> int64_t {
    return static_cast<int64_t>(std::min<uint32_t>(b, max_bin));
  };
  int64_t f = f_begin;
  if (C == 2) {
    // Four features per pass over the rows: each row's id, offset and payload are loaded once
    // for four updates, and the four read-modify-write chains are independent.
    for (; f + 4 <= f_end; f += 4) {
      const uint8_t* c0 = bins + f * n;
      const uint8_t* c1 = c0 + n;
      const uint8_t* c2 = c1 + n;
      const uint8_t* c3 = c2 + n;
      float* h0 = out + (f - f_base) * hist_size;
      float* h1 = h0 + hist_size;
      float* h2 = h1 + hist_size;
      float* h3 = h2 + hist_size;
      uint64_t* m0 = kMark ? bits + (f - f_base) * words : nullptr;
      for (int64_t r = 0; r < rs.m; ++r) {
        const int64_t i = kDense ? rs.row0 + r : rs.ids[r];
        const int64_t o = kDense ? 0 : rs.base[r];
        const float g = rs.payload[2 * r], h = rs.payload[2 * r + 1];
        const int64_t e0 = o + 2 * bin_of(c0[i]), e1 = o + 2 * bin_of(c1[i]);
        const int64_t e2 = o + 2 * bin_of(c2[i]), e3 = o + 2 * bin_of(c3[i]);
        float* d0 = h0 + e0;
        float* d1 = h1 + e1;
        float* d2 = h2 + e2;
        float* d3 = h3 + e3;
        d0[0] += g; d0[1] += h;
        d1[0] += g; d1[1] += h;
        d2[0] += g; d2[1] += h;
        d3[0] += g; d3[1] += h;
        if (kMark) {
          m0[e0 >> 7] |= uint64_t{1} << ((e0 >> 1) & 63);
          m0[words + (e1 >> 7)] |= uint64_t{1} << ((e1 >> 1) & 63);
          m0[2 * words + (e2 >> 7)] |= uint64_t{1} << ((e2 >> 1) & 63);
          m0[3 * words + (e3 >> 7)] |= uint64_t{1} << ((e3 >> 1) & 63);
        }
      }
    }
  }
  for (; f < f_end; ++f) {
    const uint8_t* col = bins + f * n;
    float* hist = out + (f - f_base) * hist_size;
    uint64_t* mk = kMark ? bits + (f - f_base) * words : nullptr;
    for (int64_t r = 0; r < rs.m; ++r) {
      const int64_t i = kDense ? rs.row0 + r : rs.ids[r];
      const int64_t o = kDense ? 0 : rs.base[r];
      const int64_t e = o + bin_of(col[i]) * c;
      float* dst = hist + e;
      const float* p = rs.payload + r * c;
      for (int64_t j = 0; j < c; ++j) dst[j] += p[j];
      if (kMark) {
        const int64_t cell = e / c;
        mk[cell >> 6] |= uint64_t{1} << (cell & 63);
      }
    }
  }
}

// XLA's intra-op thread pool of the running call (the FFI context's ThreadPool), set by the
// handler (UsePool) for the duration of the call on the calling thread; null: none (then
// Parallel starts its own threads).
thread_local ffi::ThreadPool* t_pool = nullptr;

class UsePool {
 public:
  explicit UsePool(ffi::ThreadPool& pool) : previous_(t_pool) {
    t_pool = pool.num_threads() > 0 ? &pool : nullptr;
  }
  ~UsePool() { t_pool = previous_; }
  UsePool(const UsePool&) = delete;
  UsePool& operator=(const UsePool&) = delete;

 private:
  ffi::ThreadPool* previous_;
};

// The parts of a Parallel call run on XLA's pool. Parts are claimed from a shared counter by
// the calling thread and by the tasks scheduled on the pool, so the caller never waits on a
// task the pool has not started (it does the unclaimed parts itself: no deadlock when the
// pool's threads are busy, e.g. running other kernels); it waits only for parts being run.
// A task that starts after every part was claimed returns at once (the state it reads is
// shared, kept alive by the task itself).
struct PoolParts {
  std::atomic<int64_t> next{0};
  int64_t n = 0;
  void (*call)(void*, int64_t) = nullptr;
  void* fn = nullptr;  // valid while a part is unclaimed or running
  std::mutex mu;
  std::condition_variable cv;
  int64_t done = 0;    // guarded by mu
  std::vector<std::exception_ptr> errors;

  void Run() {
    for (;;) {
      const int64_t t = next.fetch_add(1);
      if (t >= n) return;
      try {
        call(fn, t);
      } catch (...) {
        errors[t] = std::current_exception();
      }
      std::lock_guard<std::mutex> lock(mu);
      if (++done == n) cv.notify_all();
    }
  }
};

template <typename Fn>
void ParallelOnPool(ffi::ThreadPool& pool, int64_t n_threads, Fn& fn) {
  auto parts = std::make_shared<PoolParts>();
  parts->n = n_threads;
  parts->call = [](void* f, int64_t t) { (*static_cast<Fn*>(f))(t); };
  parts->fn = &fn;
  parts->errors.resize(n_threads);
  const int64_t tasks = std::min<int64_t>(n_threads, pool.num_threads()) - 1;
  for (int64_t i = 0; i < tasks; ++i) pool.Schedule([parts] { parts->Run(); });
  parts->Run();
  {
    std::unique_lock<std::mutex> lock(parts->mu);
    parts->cv.wait(lock, [&] { return parts->done == parts->n; });
  }
  for (auto& e : parts->errors) {
    if (e) std::rethrow_exception(e);
  }
}

// fn(0), ..., fn(n_threads - 1), concurrently: on XLA's thread pool when the call has one (see
// UsePool), else on threads started here. An exception thrown by any of them (on any thread)
// is rethrown here after all have finished, never left to end the process; a thread that cannot
// be started has its part run on the calling thread (the parts are independent and each is
// computed the same way wherever it runs).
template <typename Fn>
void Parallel(int64_t n_threads, Fn fn) {
  if (n_threads <= 1) {
    fn(0);
    return;
  }
  if (t_pool != nullptr) {
    ParallelOnPool(*t_pool, n_threads, fn);
    return;
  }
  std::vector<std::exception_ptr> errors(n_threads);
  auto guarded = [&](int64_t t) {
    try {
      fn(t);
    } catch (...) {
      errors[t] = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  int64_t started = 1;
  try {
    pool.reserve(n_threads - 1);
    for (; started < n_threads; ++started) pool.emplace_back(guarded, started);
  } catch (...) {  // std::system_error (no more threads) or std::bad_alloc
  }
  guarded(0);
  for (int64_t t = started; t < n_threads; ++t) guarded(t);
  for (auto& th : pool) th.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

// The rows of a call, compacted: the rows whose leaf has a slot and whose payload is not all
// zero, in row-order chunks (one per thread of the compaction).
struct Compacted {
  std::vector<Rows> chunks;
  bool dense = false;
};

// Dense when there is one leaf, mapped to slot 0, that every row is in (the first level of a
// tree) and at most 1/4 of the rows have an all-zero payload: the rows need no compaction.
// Otherwise rows are compacted into `threads` chunks in parallel (scratch memory of the calling
// thread).
Compacted Compact(int64_t n, const float* p, int64_t c, const int32_t* l, const int32_t* s,
                  int64_t n_leaves, int64_t n_slots, int64_t n_bins, int64_t threads) {
  Compacted out;
  bool dense = n_leaves == 1 && s[0] == 0;
  int64_t zero_rows = 0;  // rows of all-zero payload (zero weight): worth compacting away
  for (int64_t i = 0; dense && i < n; ++i) {
    dense = l[i] == 0;
    bool nonzero = false;
    for (int64_t j = 0; j < c; ++j) nonzero |= p[i * c + j] != 0.0f;
    zero_rows += !nonzero;
  }
  dense = dense && 4 * zero_rows <= n;
  out.dense = dense;
  out.chunks.resize(threads);
  if (dense) {
    for (int64_t t = 0; t < threads; ++t) {
      const int64_t r0 = n * t / threads, r1 = n * (t + 1) / threads;
      out.chunks[t] = Rows{nullptr, nullptr, p + r0 * c, r1 - r0, r0};
    }
    return out;
  }
  static thread_local Scratch scratch;
  char* mem = scratch.Get(static_cast<size_t>(n) * (2 * sizeof(int32_t) + c * sizeof(float)));
  int32_t* ids = reinterpret_cast<int32_t*>(mem);
  int32_t* base = ids + n;
  float* cpay = reinterpret_cast<float*>(base + n);
  Parallel(threads, [&](int64_t t) {
    const int64_t r0 = n * t / threads, r1 = n * (t + 1) / threads;
    int64_t m = r0;
    for (int64_t i = r0; i < r1; ++i) {  // branch-free compaction
      const int32_t li = l[i];
      const bool in_range = static_cast<uint32_t>(li) < static_cast<uint32_t>(n_leaves);
      const int32_t si = in_range ? s[in_range ? li : 0] : -1;
      bool keep = static_cast<uint32_t>(si) < static_cast<uint32_t>(n_slots);
      bool nonzero = false;
      ids[m] = static_cast<int32_t>(i);
      base[m] = static_cast<int32_t>((keep ? si : 0) * n_bins * c);
      for (int64_t j = 0; j < c; ++j) {
        const float v = p[i * c + j];
        cpay[m * c + j] = v;
        nonzero |= v != 0.0f;
      }
      m += keep && nonzero;
    }
    out.chunks[t] = Rows{ids + r0, base + r0, cpay + r0 * c, m - r0, r0};
  });
  return out;
}

// Wide payloads (C > 16: 9 or more outputs): one row adds a run of C floats, vectorised. Two
// features per pass over the rows (each row's id, offset and payload loaded once for both).
// Every cell still sums its rows in row order: the same floats as ChunkInto.
inline void AddRun(float* __restrict dst, const float* __restrict src, int64_t c) {
  for (int64_t j = 0; j < c; ++j) dst[j] += src[j];
}

JBOOST_AVX2_CLONES
void ChunkIntoWide(bool kDense, const uint8_t* bins, int64_t n, const Rows& rs, float* out,
                   int64_t hist_size, int64_t c, uint32_t max_bin, int64_t f_begin, int64_t f_end,
                   int64_t f_base) {
  auto bin_of = [max_bin](uint8_t b) -> int64_t {
    return static_cast<int64_t>(std::min<uint32_t>(b, max_bin));
  };
  int64_t f = f_begin;
  for (; f + 2 <= f_end; f += 2) {
    const uint8_t* c0 = bins + f * n;
    const uint8_t* c1 = c0 + n;
    float* h0 = out + (f - f_base) * hist_size;
    float* h1 = h0 + hist_size;
    for (int64_t r = 0; r < rs.m; ++r) {
      const int64_t i = kDense ? rs.row0 + r : rs.ids[r];
      const int64_t o = kDense ? 0 : rs.base[r];
      const float* p = rs.payload + r * c;
      AddRun(h0 + o + bin_of(c0[i]) * c, p, c);
      AddRun(h1 + o + bin_of(c1[i]) * c, p, c);
    }
  }
  for (; f < f_end; ++f) {
    const uint8_t* col = bins + f * n;
    float* hist = out + (f - f_base) * hist_size;
    for (int64_t r = 0; r < rs.m; ++r) {
      const int64_t i = kDense ? rs.row0 + r : rs.ids[r];
      const int64_t o = kDense ? 0 : rs.base[r];
      AddRun(hist + o + bin_of(col[i]) * c, rs.payload + r * c, c);
    }
  }
}

// All chunks, in row order, into the histograms of features [f0, f1) (feature f at
// out + (f - f_base) * hist_size). (Blocking rows so that their ids and payload stay in L1
// across features measured slower: it interleaves many more column streams and histograms.)
// With `bits` (kMark, see ChunkInto): the touched cells are marked too.
void ChunksInto(const uint8_t* b, int64_t n, const Compacted& rows, float* out, int64_t hist_size,
                int64_t c, uint32_t max_bin, int64_t f0, int64_t f1, int64_t f_base,
                uint64_t* bits = nullptr, int64_t words = 0) {
  for (const Rows& rs : rows.chunks) {
    if (c > kMaxNarrowChannels && bits == nullptr) {
      ChunkIntoWide(rows.dense, b, n, rs, out, hist_size, c, max_bin, f0, f1, f_base);
      continue;
    }
    auto run = [&](auto mark) {
      constexpr bool kMark = decltype(mark)::value;
      if (c == 2) {
        if (rows.dense) ChunkInto<2, true, kMark>(b, n, rs, out, hist_size, c, max_bin, f0, f1, f_base, bits, words);
        else ChunkInto<2, false, kMark>(b, n, rs, out, hist_size, c, max_bin, f0, f1, f_base, bits, words);
      } else {
        if (rows.dense) ChunkInto<0, true, kMark>(b, n, rs, out, hist_size, c, max_bin, f0, f1, f_base, bits, words);
        else ChunkInto<0, false, kMark>(b, n, rs, out, hist_size, c, max_bin, f0, f1, f_base, bits, words);
      }
    };
    if (bits != nullptr) run(std::true_type{});
    else run(std::false_type{});
  }
}

// 1 + the last non-missing bin (in [0, B - 2]) of a (B, c) histogram with a non-zero sum, or 0:
// the bins from there to B - 2 are empty, so its prefix sums (and split gains) are constant there.
int32_t UsedBins(const float* h, int64_t n_bins, int64_t c) {
  if (c == 2) {  // one 64-bit test per bin ((g, h) pairs; a -0.0 counts as used: harmless)
    for (int64_t t = n_bins - 2; t >= 0; --t) {
      uint64_t w;
      std::memcpy(&w, h + 2 * t, sizeof(w));
      if (w & 0x7fffffff7fffffffULL) return static_cast<int32_t>(t + 1);
    }
    return 0;
  }
  for (int64_t t = n_bins - 2; t >= 0; --t) {
    for (int64_t j = 0; j < c; ++j) {
      if (h[t * c + j] != 0.0f) return static_cast<int32_t>(t + 1);
    }
  }
  return 0;
}

// Inclusive prefix sums over the bins of `q` consecutive (B, c) histograms. Each sum is a
// chain of dependent adds: four histograms are walked together so that their 4c chains overlap.
// With `used` (per histogram, see UsedBins) the empty tail of bins is filled with the running sum
// instead of adding zeros: the same values.
void PrefixSums(float* h, int64_t q, int64_t n_bins, int64_t c, const int32_t* used = nullptr) {
  const int64_t size = n_bins * c;
  int64_t k = 0;
  if (c == 2) {
    for (; k + 4 <= q; k += 4) {
      float* h0 = h + k * size;
      float* h1 = h0 + size;
      float* h2 = h1 + size;
      float* h3 = h2 + size;
      int64_t u = n_bins - 1;
      if (used != nullptr) {
        u = std::max(std::max(used[k], used[k + 1]), std::max(used[k + 2], used[k + 3]));
        u = std::max<int64_t>(u, 1);
      }
      float a0 = h0[0], b0 = h0[1], a1 = h1[0], b1 = h1[1];
      float a2 = h2[0], b2 = h2[1], a3 = h3[0], b3 = h3[1];
      for (int64_t i = 2; i < 2 * u; i += 2) {
        h0[i] = a0 += h0[i]; h0[i + 1] = b0 += h0[i + 1];
        h1[i] = a1 += h1[i]; h1[i + 1] = b1 += h1[i + 1];
        h2[i] = a2 += h2[i]; h2[i + 1] = b2 += h2[i + 1];
        h3[i] = a3 += h3[i]; h3[i + 1] = b3 += h3[i + 1];
      }
      for (int64_t i = 2 * u; i < size - 2; i += 2) {
        h0[i] = a0; h0[i + 1] = b0;
        h1[i] = a1; h1[i + 1] = b1;
        h2[i] = a2; h2[i + 1] = b2;
        h3[i] = a3; h3[i + 1] = b3;
      }
      if (size - 2 >= 2 * u) {  // the missing bin
        const int64_t i = size - 2;
        h0[i] = a0 += h0[i]; h0[i + 1] = b0 += h0[i + 1];
        h1[i] = a1 += h1[i]; h1[i + 1] = b1 += h1[i + 1];
        h2[i] = a2 += h2[i]; h2[i + 1] = b2 += h2[i + 1];
        h3[i] = a3 += h3[i]; h3[i + 1] = b3 += h3[i + 1];
      }
    }
  }
  for (; k < q; ++k) {
    float* hk = h + k * size;
    for (int64_t bin = 1; bin < n_bins; ++bin) {
      for (int64_t j = 0; j < c; ++j) hk[bin * c + j] += hk[(bin - 1) * c + j];
    }
  }
}

// Threads worth using for `work` elementary updates (one per 2**18).
int64_t ThreadsFor(int64_t n_threads, int64_t work) {
  return std::max<int64_t>(1, std::min<int64_t>(n_threads, work >> 18));
}

// out[f, slot[leaf[i]], bin, c] += payload[i, c]; rows with no slot, or an all-zero payload
// (zero sample weight), are skipped. `out` must hold F * n_slots * n_bins * c floats.
void Accumulate(const uint8_t* b, int64_t n_features, int64_t n, const float* p, int64_t c,
                const int32_t* l, const int32_t* s, int64_t n_leaves, int64_t n_slots,
                int64_t n_bins, float* o, int64_t n_threads, bool cumulative) {
  const int64_t hist_size = n_slots * n_bins * c;
  std::memset(o, 0, sizeof(float) * n_features * hist_size);
  if (n == 0 || n_features == 0 || c == 0 || n_slots == 0 || n_leaves == 0) return;
  const uint32_t max_bin = static_cast<uint32_t>(n_bins - 1);
  const int64_t threads = ThreadsFor(n_threads, n * n_features);
  const Compacted rows = Compact(n, p, c, l, s, n_leaves, n_slots, n_bins, threads);
  const int64_t f_threads = std::min<int64_t>(threads, n_features);
  Parallel(f_threads, [&](int64_t t) {
    const int64_t f0 = n_features * t / f_threads, f1 = n_features * (t + 1) / f_threads;
    ChunksInto(b, n, rows, o, hist_size, c, max_bin, f0, f1, 0);
    if (cumulative) PrefixSums(o + f0 * hist_size, (f1 - f0) * n_slots, n_bins, c);
  });
}

// Counts each leaf's rows of non-zero payload (in parallel over row chunks; integer sums, so
// independent of the thread count) and, for leaves [0, 2S) where j and j + S are siblings, maps
// the sibling with fewer such rows to slot j (which[j] = 1 when that is j + S; ties: j) and the
// other to -1.
void SmallerSlots(const float* p, const int32_t* l, int64_t n, int64_t c, int64_t n_slots,
                  int64_t n_threads, int32_t* slot, int32_t* which) {
  const int64_t n_leaves = 2 * n_slots;
  const int64_t threads = std::max<int64_t>(1, std::min<int64_t>(n_threads, n >> 16));
  std::vector<int64_t> counts(threads * n_leaves, 0);
  Parallel(threads, [&](int64_t t) {
    int64_t* cnt = counts.data() + t * n_leaves;
    for (int64_t i = n * t / threads; i < n * (t + 1) / threads; ++i) {
      const uint32_t li = static_cast<uint32_t>(l[i]);
      bool nonzero = false;
      for (int64_t j = 0; j < c; ++j) nonzero |= p[i * c + j] != 0.0f;
      if (li < static_cast<uint32_t>(n_leaves)) cnt[li] += nonzero;
    }
  });
  std::vector<int64_t> count(n_leaves, 0);
  for (int64_t t = 0; t < threads; ++t) {
    for (int64_t j = 0; j < n_leaves; ++j) count[j] += counts[t * n_leaves + j];
  }
  for (int64_t j = 0; j < n_leaves; ++j) slot[j] = -1;
  for (int64_t j = 0; j < n_slots; ++j) {
    which[j] = count[j + n_slots] < count[j] ? 1 : 0;
    slot[which[j] ? j + n_slots : j] = static_cast<int32_t>(j);
  }
}

// ---------------------------------------------------------------------------------------------
// Split gains (jboost.splits.split_gains_cumulative), from one feature's cumulative histograms
// cum (L, B, C) of the level's L leaves (C = 2K: gradient sums, then hessian sums; bin B - 1 the
// missing bin): out (B - 1, 2), out[t, d] = sum over leaves whose children both have hessian
// sum >= min_child_weight of S(left) + S(right) - S(leaf), S(G, H) = sum_k G_k (G_k / (H_k + l2))
// (0 where H_k + l2 <= 0); direction d = 0 sends missing rows left (left = cum[t] + missing),
// d = 1 right (left = cum[t]); without missing rows (missing = false) d = 1 is -inf. The same
// float expressions as the JAX function, summed over leaves in leaf order.
// (Any even C <= 16; C = 2 goes by change points: GainEvents; C > 16: WideGains.)
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
int64_t WideGainScratch(int64_t n_bins, int64_t c) { return (c + 8) * n_bins + 2 * c; }

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

// ---------------------------------------------------------------------------------------------
// Batching. Under jax.vmap the calls use vmap_method="expand_dims": every operand gets the same
// number of leading batch dimensions, each either the batch size or 1 (an unbatched operand,
// broadcast: the binned data is shared by every model of a sweep, never copied). The models of
// a batch are independent: threads take whole models, each built exactly as in an unbatched
// call with one thread, so a batch gives bitwise the results of separate calls.

// Rows are indexed, and one feature's histogram cells offset, with 32-bit ints (row ids and
// cell offsets of the compacted rows): larger inputs are rejected, never wrapped around.
constexpr int64_t kMaxIndex = std::numeric_limits<int32_t>::max();

ffi::Error CheckIndexable(const char* kernel, int64_t n_rows, int64_t n_slots, int64_t n_bins,
                          int64_t c) {
  if (n_rows > kMaxIndex) {
    return ffi::Error::InvalidArgument(
        std::string(kernel) + ": " + std::to_string(n_rows) +
        " rows; the kernel indexes rows with 32-bit ints (at most 2**31 - 1 rows per call)");
  }
  if (n_slots > 0 && n_bins > 0 && c > 0 && n_slots * n_bins > kMaxIndex / c) {
    return ffi::Error::InvalidArgument(
        std::string(kernel) + ": one feature's histograms would hold " + std::to_string(n_slots) +
        " leaves x " + std::to_string(n_bins) + " bins x " + std::to_string(c) +
        " channels (2 per output), more cells than the kernel's 32-bit offsets index "
        "(2**31 - 1): use fewer outputs, leaves or bins");
  }
  return ffi::Error::Success();
}

// Element offsets of one operand for every model of the batch.
bool BatchOffsets(ffi::Span<const int64_t> dims, size_t core_rank,
                  const std::vector<int64_t>& batch_shape, std::vector<int64_t>* offsets) {
  const size_t nb = batch_shape.size();
  if (dims.size() != nb + core_rank) return false;
  int64_t inner = 1;
  for (size_t i = nb; i < dims.size(); ++i) inner *= dims[i];
  std::vector<int64_t> stride(nb, 0);
  int64_t s = inner;
  for (size_t i = nb; i-- > 0;) {
    if (dims[i] != batch_shape[i] && dims[i] != 1) return false;
    stride[i] = dims[i] == 1 ? 0 : s;
    s *= dims[i];
  }
  int64_t total = 1;
  for (int64_t d : batch_shape) total *= d;
  offsets->assign(total, 0);
  for (int64_t m = 0; m < total; ++m) {
    int64_t rem = m, off = 0;
    for (size_t i = nb; i-- > 0;) {
      off += (rem % batch_shape[i]) * stride[i];
      rem /= batch_shape[i];
    }
    (*offsets)[m] = off;
  }
  return true;
}

// Runs fn(model, threads_for_that_model) for every model: one model uses every thread; several
// share them out whole (model t, t + T, t + 2T, ... on thread t).
template <typename Fn>
void ForEachModel(int64_t n_models, int64_t n_threads, Fn fn) {
  if (n_models == 1) {
    fn(0, n_threads);
    return;
  }
  const int64_t T = std::max<int64_t>(1, std::min(n_threads, n_models));
  Parallel(T, [&](int64_t t) {
    for (int64_t m = t; m < n_models; m += T) fn(m, 1);
  });
}

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

// ---------------------------------------------------------------------------------------------
// Binning (jboost.binning.bin_features): out[f, i] = missing_bin when X[i, f] is NaN, else the
// number of borders[f, :] strictly below X[i, f] (searchsorted, side="left"), with subnormal
// values taken as 0 as XLA's CPU comparisons do. A branch-free binary search per value; threads
// split the rows. Exact integer results: identical to the pure-JAX path.

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
// Prediction (jboost.tree.predict_raw): out[i, k] = the sum over trees t, in order from 0.0f, of
// leaf_values[t, leaf_t(i), k], with leaf_t(i) = sum_d right_{t,d}(i) << d and
// right = isnan(x) ? missing_right[t, d] : x > border[t, d], x = X[i, feature[t, d]] (subnormal
// values and borders taken as 0 as XLA's CPU comparisons do; a feature index is clamped into
// range as XLA's gather does). Rows go in blocks of kPredictBlock copied feature-major into a
// small buffer, and every tree is applied to a block before the next block: X is read once
// (the lax.scan over trees streams each tree's columns from memory), and the comparisons run
// over contiguous lanes. Each row's sum is the same float additions in the same order as the
// scan's: bitwise the same result, whatever the number of threads (threads split the rows).

constexpr int64_t kPredictBlock = 128;

inline float FlushSubnormal(float x) {
  return std::fabs(x) < std::numeric_limits<float>::min() ? 0.0f : x;
}

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
    border[j] = FlushSubnormal(borders[j]);
  }
  alignas(64) uint32_t idx[kB];
  const int64_t n_leaves = int64_t{1} << depth;
  for (int64_t b0 = r0; b0 < r1; b0 += kB) {
    const int64_t m = std::min(kB, r1 - b0);
    for (int64_t i = 0; i < kB; ++i) {  // padded rows past the end read 0 and are not written
      for (int64_t f = 0; f < n_features; ++f) {
        cols[f * kB + i] = i < m ? FlushSubnormal(X[(b0 + i) * row_stride + f * feature_stride]) : 0.0f;
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
  const int64_t blocks = (n + kPredictBlock - 1) / kPredictBlock;
  const int64_t threads = std::max<int64_t>(
      1, std::min<int64_t>({n_threads, blocks, (n * std::max<int64_t>(n_trees, 1) * (depth + 1)) >> 18}));
  Parallel(threads, [&](int64_t t) {
    const int64_t r0 = blocks * t / threads * kPredictBlock;
    const int64_t r1 = std::min(n, blocks * (t + 1) / threads * kPredictBlock);
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

template <auto Body>
struct Guarded;

template <typename... Args, ffi::Error (*Body)(Args...)>
struct Guarded<Body> {
  static ffi::Error Call(ffi::ThreadPool pool, Args... args) {
    try {
      UsePool use(pool);
      return Body(std::move(args)...);
    } catch (const std::bad_alloc&) {
      return ffi::Error(ffi::ErrorCode::kResourceExhausted,
                        "jboost kernel: out of memory (std::bad_alloc)");
    } catch (const std::exception& e) {
      return ffi::Error::Internal(std::string("jboost kernel: ") + e.what());
    } catch (...) {
      return ffi::Error::Internal("jboost kernel: unknown C++ exception");
    }
  }
};

// A test of the boundary (jboost/_native/__init__.py: SELF_TEST): throws from the calling thread
// or from a worker thread of Parallel; `what` = 0: nothing, 1: std::runtime_error,
// 2: std::bad_alloc, 3: std::runtime_error on a worker thread. out (1,) = 1 when nothing threw.
ffi::Error SelfTestImpl(ffi::ResultBuffer<ffi::S32> out, int64_t what) {
  if (what == 1) throw std::runtime_error("self-test exception");
  if (what == 2) throw std::bad_alloc();
  Parallel(2, [&](int64_t t) {
    if (what == 3 && t == 1) throw std::runtime_error("self-test exception on a worker thread");
  });
  out->typed_data()[0] = 1;
  return ffi::Error::Success();
}

}  // namespace

// The version of the targets' interface (their operands, attributes and meaning), checked by
// jboost/_native/__init__.py (ABI_VERSION) when it loads the library: a stale build is not used.
constexpr int kAbiVersion = 1;

extern "C" int JboostAbiVersion() { return kAbiVersion; }

XLA_FFI_DEFINE_HANDLER_SYMBOL(JboostSelfTest, Guarded<SelfTestImpl>::Call,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Ret<ffi::Buffer<ffi::S32>>()  // out (1,)
                                  .Attr<int64_t>("what"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(JboostHistogram, Guarded<HistogramImpl>::Call,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::U8>>()   // bins (..., F, n)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // payload (..., n, C)
                                  .Arg<ffi::Buffer<ffi::S32>>()  // leaf (..., n)
                                  .Arg<ffi::Buffer<ffi::S32>>()  // slot (..., L)
                                  .Ret<ffi::Buffer<ffi::F32>>()  // out (..., F, S, B, C)
                                  .Attr<int64_t>("n_threads")
                                  .Attr<bool>("cumulative"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(JboostHistogramSmallerSibling, Guarded<SmallerSiblingImpl>::Call,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::U8>>()   // bins (..., F, n)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // payload (..., n, C)
                                  .Arg<ffi::Buffer<ffi::S32>>()  // leaf (..., n) in [0, 2S)
                                  .Ret<ffi::Buffer<ffi::F32>>()  // out (..., F, S, B, C)
                                  .Ret<ffi::Buffer<ffi::S32>>()  // right_smaller (..., S)
                                  .Attr<int64_t>("n_threads")
                                  .Attr<bool>("cumulative"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(JboostBin, Guarded<BinImpl>::Call,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::F32>>()  // X (n, F)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // borders (F, m)
                                  .Ret<ffi::Buffer<ffi::U8>>()   // out (F, n)
                                  .Attr<int64_t>("n_threads")
                                  .Attr<int64_t>("missing_bin"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(JboostLevel, Guarded<LevelImpl>::Call,
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

XLA_FFI_DEFINE_HANDLER_SYMBOL(JboostSplitGains, Guarded<SplitGainsImpl>::Call,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::F32>>()  // cum (..., F, L, B, C)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // l2 (...)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // min_child_weight (...)
                                  .Ret<ffi::Buffer<ffi::F32>>()  // gains (..., F, B-1, 2)
                                  .Attr<int64_t>("n_threads")
                                  .Attr<bool>("missing"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(JboostPredict, Guarded<PredictImpl>::Call,
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
