"""Builds jboost's optional CPU kernels (jboost/_native/*.cc, XLA FFI custom calls).

Everything else about the package is in pyproject.toml. The extension is optional: without a
C++17 compiler the install succeeds and jboost runs its pure-JAX histograms. It is compiled
against the XLA FFI headers of the jaxlib installed in the build environment (``jaxlib`` is a
build requirement in pyproject.toml; ``jax.ffi.include_dir()`` is that same folder); the FFI's C
API is versioned and checked by XLA when a handler is called.
"""

import os
import sys

from setuptools import Extension
from setuptools import setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))


def ffi_include_dir():
    """The XLA FFI headers of the installed jaxlib (what ``jax.ffi.include_dir()`` returns), or
    ``None`` when jaxlib is not installed (then the optional extension is not built)."""
    try:
        import jaxlib
    except ImportError:
        return None
    path = os.path.join(os.path.dirname(os.path.abspath(jaxlib.__file__)), "include")
    return path if os.path.isfile(os.path.join(path, "xla", "ffi", "api", "ffi.h")) else None


FFI_INCLUDE = ffi_include_dir()
if FFI_INCLUDE is None:
    print("jboost: jaxlib's XLA FFI headers were not found: the CPU kernel is not built "
          "(jboost runs pure JAX); install jaxlib in the build environment to build it",
          file=sys.stderr)


# One file per kernel (histogram, level, split gains, binning, prediction), the code they share
# (rows: histograms from rows; gains: split gains; parallel.h: the parallel runtime and the FFI
# boundary) and abi (the ABI version checked at load).
NATIVE_SOURCES = ("histogram", "level", "split_gains", "binning", "predict", "rows", "gains", "abi",
                  "depthwise")


class BuildNative(build_ext):
    """A plain shared library loaded with ctypes (no Python module init function)."""

    def get_export_symbols(self, ext):
        return ["JboostHistogram", "JboostHistogramSmallerSibling", "JboostBin", "JboostLevel",
                "JboostSplitGains", "JboostPredict", "JboostPredictDepthwise", "JboostSelfTest",
                "JboostAbiVersion", "JboostDepthwiseTree"]


if sys.platform == "win32":
    compile_args, link_args = ["/O2", "/std:c++17"], []
else:
    # -fno-trapping-math: lets the split-gain loop (divisions under selects) vectorise; no FP
    # exceptions are used, and it allows no reassociation: results are unchanged.
    compile_args = ["-O3", "-std=c++17", "-fno-trapping-math", "-Wno-attributes"]
    link_args = ["-pthread"] if sys.platform.startswith("linux") else []

setup(
    ext_modules=[] if FFI_INCLUDE is None else [
        Extension(
            "jboost._native._kernels",
            sources=[f"jboost/_native/{name}.cc" for name in NATIVE_SOURCES],
            depends=[f"jboost/_native/{name}.h" for name in ("parallel", "rows", "gains")],
            include_dirs=[FFI_INCLUDE],
            language="c++",
            extra_compile_args=compile_args,
            extra_link_args=link_args,
            optional=True,
        )
    ],
    cmdclass={"build_ext": BuildNative},
)
