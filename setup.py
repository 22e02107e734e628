"""Builds jboost's optional CPU kernels (jboost/_native/*.cc, XLA FFI custom calls).

Everything else about the package is in pyproject.toml. The extension is optional: without a
C++17 compiler the install succeeds and jboost runs its pure-JAX histograms. It is compiled
against the XLA FFI headers of the jaxlib installed in the build environment (``jaxlib`` is a
build requirement in pyproject.toml; ``jax.ffi.include_dir()`` is that same folder); the FFI's C
API is versioned and checked by XLA when a handler is called.
"""

import os
import sys
from concurrent.futures import ThreadPoolExecutor

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
    """A plain shared library loaded with ctypes (no Python module init function), its sources
    compiled side by side, one per core (setuptools compiles one at a time)."""

    def build_extension(self, ext):
        compiler = self.compiler
        if getattr(compiler, "compiler_type", None) != "unix" or not all(
                hasattr(compiler, a) for a in ("_setup_compile", "_get_cc_args", "_compile")):
            return super().build_extension(ext)
        serial = compiler.compile

        def compile_side_by_side(sources, output_dir=None, macros=None, include_dirs=None,
                                 debug=0, extra_preargs=None, extra_postargs=None, depends=None):
            macros, objects, extra, pp_opts, build = compiler._setup_compile(
                output_dir, macros, include_dirs, sources, depends, extra_postargs)
            cc_args = compiler._get_cc_args(pp_opts, debug, extra_preargs)

            def one(obj):
                if obj in build:  # else up to date
                    src, src_ext = build[obj]
                    compiler._compile(obj, src, src_ext, cc_args, extra, pp_opts)

            with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
                list(pool.map(one, objects))
            return objects

        compiler.compile = compile_side_by_side
        try:
            return super().build_extension(ext)
        finally:
            compiler.compile = serial

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
