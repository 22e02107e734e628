// jboost's CPU kernels: the parallel runtime and the FFI boundary shared by every kernel
// (level.cc, histogram.cc, split_gains.cc, binning.cc, predict.cc): per-thread scratch memory,
// Parallel (parts of a call on XLA's intra-op thread pool, or on threads of its own), the batch
// (vmap) offsets, the 32-bit index limits, Guarded (no C++ exception crosses the boundary), and
// ClampSubnormal (the value a raw float is compared as: binning.cc, predict.cc).
#ifndef JBOOST_NATIVE_PARALLEL_H_
#define JBOOST_NATIVE_PARALLEL_H_

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

// The division-bound loops (split gains) and the wide row pass are also compiled for AVX2 on
// x86-64 Linux (8 lanes instead of SSE2's 4), picked at load time. The same IEEE operations per lane, no FMA
// contraction (the avx2 target has no FMA): bitwise the same gains either way.
#if defined(__x86_64__) && defined(__linux__) && (defined(__GNUC__) || defined(__clang__))
#define JBOOST_AVX2_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define JBOOST_AVX2_CLONES
#endif

namespace jboost {

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

// XLA's intra-op thread pool of the running call (the FFI context's ThreadPool), set by the
// handler (UsePool) for the duration of the call on the calling thread; null: none (then
// Parallel starts its own threads).
inline thread_local ffi::ThreadPool* t_pool = nullptr;

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

// The value a raw float feature or border is compared as (jboost.data.binning.clamp_subnormals):
// a subnormal (|x| < FLT_MIN, x != 0) is taken as the smallest normal number of its sign,
// copysign(FLT_MIN, x); NaN, normal values and zeros are unchanged (a zero keeps its sign here,
// made +0 there: comparisons do not tell them apart). So the sign of every value is seen (a
// border at 0 separates negative from positive subnormals), and only the order among
// subnormals of one sign is lost. Read off the bits, not by float comparisons: those may run
// with denormals-are-zero (as XLA's CPU code does), reading a subnormal as 0.
inline float ClampSubnormal(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof(u));
  if ((u & 0x7f800000u) == 0 && (u & 0x007fffffu) != 0) u = (u & 0x80000000u) | 0x00800000u;
  std::memcpy(&x, &u, sizeof(u));
  return x;
}

// Threads worth using for `work` elementary updates (one per 2**18).
inline int64_t ThreadsFor(int64_t n_threads, int64_t work) {
  return std::max<int64_t>(1, std::min<int64_t>(n_threads, work >> 18));
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

inline ffi::Error CheckIndexable(const char* kernel, int64_t n_rows, int64_t n_slots,
                                 int64_t n_bins, int64_t c) {
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
inline bool BatchOffsets(ffi::Span<const int64_t> dims, size_t core_rank,
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
// share them out whole, each thread taking the next model not yet taken (models of one batch
// differ in work, e.g. a sweep's subsample rates: a fixed share per thread left a thread idle
// while the other finished its share). Each model is computed on one thread the same way
// whichever thread takes it: the results do not depend on the order.
template <typename Fn>
void ForEachModel(int64_t n_models, int64_t n_threads, Fn fn) {
  if (n_models == 1) {
    fn(0, n_threads);
    return;
  }
  const int64_t T = std::max<int64_t>(1, std::min(n_threads, n_models));
  std::atomic<int64_t> next{0};
  Parallel(T, [&](int64_t) {
    for (int64_t m = next.fetch_add(1); m < n_models; m = next.fetch_add(1)) fn(m, 1);
  });
}

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

}  // namespace jboost

#endif  // JBOOST_NATIVE_PARALLEL_H_
