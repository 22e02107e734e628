// jboost's CPU kernels: the library's ABI version and a test of the FFI boundary.
#include <cstdint>
#include <new>
#include <stdexcept>

#include "parallel.h"

namespace jboost {
namespace {

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
}  // namespace jboost

using jboost::Guarded;

// The version of the targets' interface (their operands, attributes and meaning), checked by
// jboost/_native/__init__.py (ABI_VERSION) when it loads the library: a stale build is not used.
// 2: depth-wise node tables; 3: the tree kernel's row weights; 4: subnormal values and borders
// as the smallest normal number of their sign (ClampSubnormal), no longer as 0.
constexpr int kAbiVersion = 4;
extern "C" int JboostAbiVersion() { return kAbiVersion; }

XLA_FFI_DEFINE_HANDLER_SYMBOL(JboostSelfTest, Guarded<jboost::SelfTestImpl>::Call,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Ret<ffi::Buffer<ffi::S32>>()  // out (1,)
                                  .Attr<int64_t>("what"));
