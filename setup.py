"""Builds jboost's optional CPU kernel (jboost/_native/histogram.cc, an XLA FFI custom call).

Everything else about the package is in pyproject.toml. The extension is optional: without a
C++17 compiler the install succeeds and jboost runs its pure-JAX histograms. The XLA FFI
headers are vendored in jboost/_native/include (from jaxlib, Apache-2.0), so building needs no
jaxlib; the FFI's C API is versioned and checked by XLA when the handler is called.
"""

import os
import sys

from setuptools import Extension
from setuptools import setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))


class BuildNative(build_ext):
    """A plain shared library loaded with ctypes (no Python module init function)."""

    def get_export_symbols(self, ext):
        return ["JboostHistogram", "JboostHistogramSmallerSibling", "JboostBin", "JboostLevel",
                "JboostSplitGains", "JboostPredict", "JboostSelfTest", "JboostAbiVersion"]


if sys.platform == "win32":
    compile_args, link_args = ["/O2", "/std:c++17"], []
else:
    # -fno-trapping-math: lets the split-gain loop (divisions under selects) vectorise; no FP
    # exceptions are used, and it allows no reassociation: results are unchanged.
    compile_args = ["-O3", "-std=c++17", "-fno-trapping-math", "-Wno-attributes"]
    link_args = ["-pthread"] if sys.platform.startswith("linux") else []

setup(
    ext_modules=[
        Extension(
            "jboost._native._histogram",
            sources=["jboost/_native/histogram.cc"],
            include_dirs=[os.path.join("jboost", "_native", "include")],
            language="c++",
            extra_compile_args=compile_args,
            extra_link_args=link_args,
            optional=True,
        )
    ],
    cmdclass={"build_ext": BuildNative},
)
