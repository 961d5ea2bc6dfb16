# tinyfold entry points. The build itself is CMake (CMakeLists.txt); this file
# installs what is missing, configures, builds, and runs or tests.
#
#   make run     deps + Release build of the tinyfold binary alone in build/, and
#                of its GPU module where a GPU is usable (the output in
#                build/make-run.log, shown only on failure) + a 20-step training run
#   make test    deps + build of everything (binary and tests) + every test (ctest)
#   make asan    a second build in build-asan/ with ASan+UBSan, unit tests and fuzz
#                replays (ctest -j)
#   make bench   the CPU benchmark (bench/cpu.sh)
#   make fuzz    the readers' libFuzzer targets (safetensors, data file, checkpoint
#                metadata, compare's and report's inputs), FUZZ_SECONDS (120) / 5
#                each, as many at once as there are processors (FUZZ_JOBS); ctest
#                replays each target's seeds and their mutations without clang
#   make report-check  `tinyfold report` rendered by headless Chromium, checked not blank
#   make hip     the GPU backend compiled with hipcc for AMD GPUs in build-hip/
#                (Debian's hipcc 5.2: gfx90a and gfx940; HIP_ARCHS overrides)
#   make hostemu the portable GPU kernels' test_cuda_ops cases on the CPU emulator,
#                at warp width 32 and 64, and the profiler's GPU event timer on it
#   make clean   remove both build directories
#
# WITH_MPI=1 also installs Open MPI (the two-rank tests need mpirun).
# With CI=true warnings are errors (-DTF_WERROR=ON). Extra CMake options go in
# CMAKE_ARGS, e.g. make test CMAKE_ARGS=-DTF_CUDA=OFF.

SHELL := /bin/bash
# The build's make (under cmake --build) is a sub-make of this one and would
# print "Entering/Leaving directory" around every step: progress and errors only.
MAKEFLAGS += --no-print-directory
BUILD ?= build
ASAN_BUILD ?= build-asan
HIP_BUILD ?= build-hip
HIP_ARCHS ?=
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
FUZZ_SECONDS ?= 120
EXTRA_PKGS ?=
PKGS := cmake build-essential pkg-config libopenblas-openmp-dev libcjson-dev libcmocka-dev
# oneDNN: the CPU's bf16 GEMMs on AVX512-BF16 (CMake TF_DNNL=AUTO finds it;
# without it they widen to fp32 for OpenBLAS, so the build works either way)
PKGS += libdnnl-dev
# Optional: MPI for data parallel runs across processes (mpirun -np P tinyfold
# train). WITH_MPI=1 installs it (CI does, so the two-rank test runs); the build
# finds it when present (CMake TF_MPI=AUTO) and works without it.
WITH_MPI ?= 0
ifeq ($(WITH_MPI),1)
PKGS += openmpi-bin libopenmpi-dev
endif

CMAKE_ARGS ?=
CMAKE_FLAGS := -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)
ifeq ($(CI),true)
CMAKE_FLAGS += -DTF_WERROR=ON
endif
# The sanitizer build: no CUDA (its runtime and ASan do not mix), -O1 so the
# numerical tests stay quick, assertions on.
ASAN_FLAGS := -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-O1 -g -fno-omit-frame-pointer" \
              -DTF_SANITIZE=ON $(CMAKE_ARGS) -DTF_CUDA=OFF -DTF_MPI=OFF $(filter -DTF_WERROR=ON,$(CMAKE_FLAGS))

.PHONY: all deps build run test asan bench fuzz report-check hip hostemu clean

all: build

# Installs only what dpkg says is missing: nothing to do means no apt at all;
# apt-get's output goes to a temporary log, shown (its end) only on failure.
deps:
	@if ! command -v dpkg-query >/dev/null 2>&1; then \
	  echo "tinyfold: not a Debian system: make sure these (or their equivalents) are installed: $(PKGS)"; \
	  exit 0; \
	fi; \
	missing=""; \
	for p in $(PKGS) $(EXTRA_PKGS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	[ -z "$$missing" ] && exit 0; \
	if [ "$$(id -u)" = 0 ]; then sudo=""; \
	elif command -v sudo >/dev/null 2>&1; then sudo="sudo"; \
	else echo "tinyfold: missing packages and no root or sudo to install them; as root run: apt-get install -y --no-install-recommends$$missing" >&2; exit 1; fi; \
	log=$$(mktemp "$${TMPDIR:-/tmp}/tinyfold-apt.XXXXXX") || exit 1; \
	echo "tinyfold: installing$$missing"; \
	if $$sudo apt-get update -qq >"$$log" 2>&1 && \
	   $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
	     $$missing >>"$$log" 2>&1; then rm -f "$$log"; \
	else tail -n 20 "$$log"; \
	  echo "tinyfold: apt-get failed (its output: $$log); install these packages, then rerun make:$$missing" >&2; \
	  exit 1; fi

build: deps
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS)

# Only what the run uses (the test programs build under `make test`), quietly:
# the configure and compile output goes to a log, printed when a step fails.
# The GPU module (target tinyfold_gpu, loaded for a GPU run only) is built when
# the machine has a GPU its driver can use: NVIDIA's control device or
# `nvidia-smi -L` listing one, or ROCm's /dev/kfd. HAVE_GPU=0 or 1 overrides.
HAVE_GPU ?= $(shell { [ -e /dev/nvidiactl ] || [ -e /dev/kfd ] || nvidia-smi -L >/dev/null 2>&1; } \
                    && echo 1 || echo 0)
RUN_LOG := $(BUILD)/make-run.log
RUN_TARGETS = tinyfold$(if $(filter 1,$(HAVE_GPU)), tinyfold_gpu)
comma := ,
RUN_WHAT = $(BUILD)/tinyfold$(if $(filter 1,$(HAVE_GPU)), and its GPU module)$(comma) output in \
           $(RUN_LOG)$(if $(filter 1,$(HAVE_GPU)),, (no GPU found: the GPU module is left to make build))
run: deps
	@mkdir -p $(BUILD)
	@echo "tinyfold: building $(RUN_WHAT)"
	@{ cmake -S . -B $(BUILD) $(CMAKE_FLAGS) && \
	   cmake --build $(BUILD) --target $(RUN_TARGETS) -j $(JOBS); } >$(RUN_LOG) 2>&1 || \
	  { tail -n 40 $(RUN_LOG); echo "tinyfold: the build failed; the whole output is in $(RUN_LOG)" >&2; exit 1; }
	$(BUILD)/tinyfold train --backend auto --num-steps 20

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

asan: deps
	cmake -S . -B $(ASAN_BUILD) $(ASAN_FLAGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1 ctest --test-dir $(ASAN_BUILD) --output-on-failure -j $(JOBS) -R '^(test_|fuzz_replay_)'

bench: build
	TINYFOLD=$(BUILD)/tinyfold bench/cpu.sh

# The report in a real browser: Debian's chromium renders it headless to PNG.
report-check: build
	$(MAKE) deps EXTRA_PKGS="chromium python3"
	bash tests/report/render.sh $(BUILD)/tinyfold

# The readers' fuzz targets (libFuzzer via clang), bounded in time: each runs
# FUZZ_SECONDS / 5, one process each, JOBS of them at once (tests/fuzz/run.sh).
fuzz:
	$(MAKE) deps EXTRA_PKGS="clang-14 libclang-rt-14-dev python3"
	FUZZ_JOBS=$(JOBS) bash tests/fuzz/run.sh $$(( $(FUZZ_SECONDS) / 5 ))

# The HIP build: the library and the CLI (tests need a device), warnings as
# errors under CI. Compile-only here: Debian ships no AMD GPU runtime libraries
# beyond libamdhip64, and tinyfold loads rocBLAS and ROCTx at run time.
hip:
	$(MAKE) deps EXTRA_PKGS="hipcc libamdhip64-dev"
	cmake -S . -B $(HIP_BUILD) -DCMAKE_BUILD_TYPE=Release -DTF_HIP=ON -DTF_TESTS=OFF \
	  $(if $(HIP_ARCHS),-DTF_HIP_ARCHS="$(HIP_ARCHS)") $(filter -DTF_WERROR=ON,$(CMAKE_FLAGS))
	cmake --build $(HIP_BUILD) -j $(JOBS)

# The portable kernels' cases of test_cuda_ops on hostemu at both warp widths:
# every case of tests/hostemu/cases (ctest runs the quicker ones)
hostemu: deps
	bash tests/hostemu/run_tests.sh --warp 32 --list all
	bash tests/hostemu/run_tests.sh --warp 64 --list all
	bash tests/hostemu/run_prof.sh

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(HIP_BUILD)
