"""Build the Cython extensions under nezha/_core (the rest is pure Python)."""
import os

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
INCLUDE = [os.path.join(HERE, "include"), numpy.get_include()]
# -O3 lets gcc vectorise the reduction loops; the engine is I/O bound and does not care.
CFLAGS = ["-O3", "-std=gnu11", "-Wno-unused-function"]
MODULES = ["reduce", "engine"]
DEBUG = os.environ.get("NEZHA_BUILD_DEBUG") == "1"


def ext(name):
    return Extension(
        f"nezha._core.{name}",
        [f"nezha/_core/{name}.pyx"],
        include_dirs=INCLUDE,
        extra_compile_args=CFLAGS,
        define_macros=[("CYTHON_TRACE_NOGIL", "1")] if DEBUG else [],
    )


setup(
    ext_modules=cythonize(
        [ext(n) for n in MODULES if os.path.exists(os.path.join(HERE, f"nezha/_core/{n}.pyx"))],
        compiler_directives={
            "language_level": 3,
            "embedsignature": True,
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "linetrace": DEBUG,
        },
        annotate=DEBUG,
    ),
)
