"""Build the Cython extensions under nezha/_core (the rest is pure Python)."""
import os
import shutil
import subprocess
import sys

import numpy
from Cython.Build import cythonize
from Cython.Compiler.Errors import CompileError
from setuptools import Extension, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
INCLUDE = [os.path.join(HERE, "include"), numpy.get_include()]
# -O3 lets gcc vectorise the reduction loops; the engine is I/O bound and does not care.
# NEZHA_BUILD_OPT: the sanitizer build (make asan-build) compiles at -O0: ASan and UBSan
# check the same accesses, and gcc takes 15 s for engine.c instead of 155 s at -O1.
CFLAGS = [os.environ.get("NEZHA_BUILD_OPT") or "-O3", "-std=gnu11", "-Wno-unused-function"]
MODULES = ["reduce", "engine", "ina"]
DEBUG = os.environ.get("NEZHA_BUILD_DEBUG") == "1"


def ext(name, include=(), libraries=(), optional=False):
    return Extension(
        f"nezha._core.{name}",
        [f"nezha/_core/{name}.pyx"],
        include_dirs=INCLUDE + list(include),
        libraries=list(libraries),
        extra_compile_args=CFLAGS,
        define_macros=[("CYTHON_TRACE_NOGIL", "1")] if DEBUG else [],
        optional=optional,   # a failed compile skips it instead of stopping the build
    )


def hwloc_flags():
    """(include dirs, libraries) of hwloc 2.x, or None if its headers are absent (then
    nezha.topo falls back to reading sysfs)."""
    if shutil.which("pkg-config"):
        got = subprocess.run(["pkg-config", "--cflags-only-I", "--libs-only-l", "hwloc >= 2.0"],
                             capture_output=True, text=True)
        if got.returncode != 0:
            return None   # absent, or hwloc 1.x
        words = got.stdout.split()
        return ([w[2:] for w in words if w.startswith("-I")],
                [w[2:] for w in words if w.startswith("-l")] or ["hwloc"])
    if os.path.exists("/usr/include/hwloc.h"):
        return [], ["hwloc"]
    return None


CYTHON = dict(
    compiler_directives={
        "language_level": 3,
        "embedsignature": True,
        "boundscheck": False,
        "wraparound": False,
        "cdivision": True,
        "linetrace": DEBUG,
    },
    annotate=DEBUG,
)


def extensions():
    exts = cythonize([ext(n) for n in MODULES
                      if os.path.exists(os.path.join(HERE, f"nezha/_core/{n}.pyx"))], **CYTHON)
    flags = hwloc_flags()
    if flags is None:
        print("setup.py: hwloc headers not found (Debian: libhwloc-dev): building without "
              "nezha._core.hwloc; `nezha topo` reads sysfs instead", file=sys.stderr)
        return exts
    try:
        return exts + cythonize([ext("hwloc", *flags, optional=True)], **CYTHON)
    except CompileError as e:
        print(f"setup.py: nezha._core.hwloc not built ({e})", file=sys.stderr)
        return exts


def headers():
    """The C headers shipped in the package (nezha.get_include() finds them there)."""
    d = os.path.join(HERE, "include", "nezha")
    return sorted(f for f in os.listdir(d) if f.endswith(".h")) if os.path.isdir(d) else []


class BuildPy(build_py):
    """build_py that also copies include/nezha/*.h to nezha/include/nezha/ in the build (the
    wheel), so an installed nezha has the headers `nezha info` and get_include() name."""

    def run(self):
        super().run()
        dst = os.path.join(self.build_lib, "nezha", "include", "nezha")
        os.makedirs(dst, exist_ok=True)
        for h in headers():
            self.copy_file(os.path.join(HERE, "include", "nezha", h), os.path.join(dst, h))

    def get_outputs(self, include_bytecode=1):
        return super().get_outputs(include_bytecode) + [
            os.path.join(self.build_lib, "nezha", "include", "nezha", h) for h in headers()]


# NEZHA_SETUP_PY_ONLY=1: the pure-Python part only (tests/test_packaging.py runs build_py
# without compiling or cythonizing anything in a tree others may be building)
setup(ext_modules=[] if os.environ.get("NEZHA_SETUP_PY_ONLY") == "1" else extensions(),
      cmdclass={"build_py": BuildPy})
