# The README's two commands are `make demo` and `make test`; everything else is a helper.
VENV   ?= .venv
PY     := $(VENV)/bin/python
NP     ?= 4
export PYTHONPATH := $(CURDIR)

.PHONY: setup build demo test test-matrix test-% test-pure bench bench-kernels debug clean lint info compare asan asan-build package-check

setup:
	@bash tools/setup.sh

build: setup
	@# one build at a time (two builds writing the same .so corrupt it)
	@mkdir -p build && flock build/.lock $(PY) setup.py -q build_ext --inplace -j 2 2>&1 | grep -E "error|Error" || true
	@$(PY) -c "import nezha._core.engine, nezha._core.reduce"
	@# the `nezha` console script: an editable install, once (the build above stays in place)
	@test -x $(VENV)/bin/nezha || $(VENV)/bin/pip install -q --no-build-isolation --no-deps -e . 2>&1 | grep -v "is ignored" || true

# Multi-rail demo: a 4-host, 2-rail lab, allreduce on one rail and on both.
demo: build
	@$(PY) -m nezha demo

test: build
	$(PY) -m pytest -q -ra tests

# The collective tests (tests/test_coll_world.py, run under mpirun by test_coll_mpi.py and in
# the lab by test_coll_lab.py) on the full dtype x op x size (x algorithm x in place) products
# instead of the covering arrays CI runs (every pair that matters, each at least once):
# ~6x the cases, several times slower. Not in CI; run it after touching kernels, planner or algorithms.
test-matrix: build
	NEZHA_TEST_MATRIX=full $(PY) -m pytest -q -ra -p no:cacheprovider tests/test_coll_world.py \
		tests/test_coll_mpi.py tests/test_coll_lab.py

# make test-4: the collective tests under mpirun -np 4 (mpi4py style).
test-%: build
	$(PY) -m nezha mpirun -np $* -- $(PY) -m pytest -q -x -p no:cacheprovider tests/test_coll_world.py

bench-kernels: build
	$(PY) bench/bench_kernels.py

debug: setup
	NEZHA_BUILD_DEBUG=1 $(PY) setup.py -q build_ext --inplace --force

info: build
	$(PY) -m nezha info

clean:
	rm -rf build nezha/_core/*.c nezha/_core/*.so nezha/_core/*.html .pytest_cache

# Comparison suite (issue #4): nezha vs Gloo, Open MPI and MPTCP in one lab; COMPARE_ARGS="--rates 400mbit,100mbit" / "--quick".
compare: build
	$(PY) -m nezha bench compare $(COMPARE_ARGS)

# Sanitizer build (issue 18): the extensions with ASan + UBSan into build/asan (a copy of the
# package beside them, the tree's own build untouched), then the fuzz tests' real rank and
# INA service run on it (LD_PRELOAD of libasan, see tests/test_fuzz.py). FUZZ_SECONDS per test.
ASAN_DIR := build/asan
FUZZ_SECONDS ?= 6
asan: setup asan-build
	TEST_FUZZ_ASAN=$(ASAN_DIR) TEST_FUZZ_SECONDS=$(FUZZ_SECONDS) $(PY) -m pytest -q -s -p no:cacheprovider tests/test_fuzz.py tests/test_enginefuzz.py

# the sanitizer build alone (tests/test_asan.py builds it into a directory of its own)
asan-build:
	@mkdir -p build $(ASAN_DIR) && rm -rf $(ASAN_DIR)/nezha && cp -r nezha $(ASAN_DIR)/nezha
	@find $(ASAN_DIR)/nezha \( -name '*.so' -o -name '__pycache__' \) -prune -exec rm -rf {} +
	@flock build/.lock env NEZHA_BUILD_OPT=-O0 \
		CFLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -g" \
		LDFLAGS="-fsanitize=address,undefined" \
		$(PY) setup.py -q build_ext --build-lib $(ASAN_DIR) --build-temp $(ASAN_DIR)/tmp -j 2 \
		2>&1 | grep -E "error|Error" || true
	@ls $(ASAN_DIR)/nezha/_core/engine*.so $(ASAN_DIR)/nezha/_core/ina*.so >/dev/null

# Packaging (issue 18): `pip install .` and a built wheel, each into a fresh venv, then every
# `nezha` command from outside the tree (works, or says what it needs). 2-4 min: not in CI.
package-check:
	bash tools/package_check.sh
