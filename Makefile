# maskprior: one binary, built by nvcc with cuBLAS; it trains on the GPU when there is one
# and on the CPU otherwise. Where there is no nvcc, the host compiler builds the same program
# without CUDA, which trains on the CPU. The targets that run something (run, test, check, the
# tables, bench, fuzz, ...) install the Debian packages they need first (tools/install-deps.sh;
# in a build without CUDA, Boost.Context with them);
# the builds (make, make CUDA=0, make maskprior-emulated, make dev, ...), make test-large and
# make gpu-check, which runs where nothing can be fetched, install none.
#   make            build ./maskprior
#   make CUDA=0     build it without CUDA, by the host compiler alone (the default without nvcc);
#                   CXX=clang++ for clang (CUDA=0's programs and the emulated ones)
#   make run        the headline experiment: default, qk-svd, qk-opt and mask init on a Boolean
#                   task (TASK=maj3), with the table and the prior-mass plots; JOBS=N runs at once
#                   (one per core on a CPU)
#   make test       the everyday check, 1.5 minutes after the build on 2 cores: every unit test (the
#                   command line's included), the GPU tests on the CPU emulation of CUDA (emu/),
#                   the kernel lab's checks, the scripts' tests, the documents' names and counts, and
#                   the ptxas report's kernels
#   make check      everything that needs no GPU: make test, then the emulated GPU tests and the
#                   command line under the sanitizers, the ten planted bugs the emulation must
#                   catch, the build without CUDA at another vector width (its unit tests, and its
#                   runs' bytes against ./maskprior's), the kernel course's blanks failing, its
#                   solutions passing and a mistake planted in each step's kernel named (step 9
#                   training the model), runs killed and continued,
#                   every parser's fuzzer for a few seconds, the schedulers, gpu-check's way of
#                   running the GPU tests on a planted crash, gpu-check rehearsed (CI runs this)
#   make check-arm64  the program and the unit tests cross-built for ARM64 and run under qemu-user,
#                   their runs' bytes compared with this machine's (not in CI)
#   make HOST_MARCH=x86-64-v3  the host code for any AVX2 CPU (default native; armv8-a for ARM64)
#   make ARCH=80    GPU code for another compute capability (default: this machine's GPU, else 90)
#   make CUDA_HOME=/usr/local/cuda-13.0  that CUDA's nvcc (default: nvcc on PATH, else /usr/local/cuda's);
#                   EXTRA_NVCCFLAGS="..." more nvcc flags (say -lineinfo for a profiler)
#   make maskprior-emulated  ./maskprior-emulated: the same program with its kernels run on
#                   the CPU (--device cuda); EMU_OPT="-O0 -g" to step through a CUDA thread in gdb
#   make test-emulated  the GPU tests alone, on the emulation
#   make table-boolean  the Boolean table: 4 tasks x 5 variants x 3 seeds, 60 runs (BOOLEAN_ARGS="--paper
#                   --seeds 5"); SCHEDULER=list before any table (or make run) prints its runs instead
#   make table-boolean-targets  Boolean targets the paper did not run (--task boolean): 7 targets, each with
#                   4 variants and 3 seeds, and cyclic3's mask with its own G and with the G read off
#                   its target: 90 runs (BOOLEAN_TARGETS_ARGS="--seeds N")
#   make table-boolean-data-g  G from the target (the oracle) against G from the seen data alone
#                   (--g-from data): 17 targets, each with the default, the mask with either G, 3 seeds:
#                   153 runs (BOOLEAN_DATA_G_ARGS="--seeds N")
#   make sweep-2parity  which settings make 2parity extrapolate, and which do not: 22 settings, 66 runs
#   make table-arithmetic  add3 and mul2 with little data: 8 fractions x 4 inits x 3 seeds, 96 runs
#                   (ARITHMETIC_ARGS="--paper --seeds N")
#   make table-vision  a ViT on Fashion-MNIST and CIFAR-10: 2 data sets x 7 variants x 3 seeds, 42 runs,
#                   2 epochs (83 minutes on a 2-core AMD EPYC; VISION_ARGS="--seeds N --epochs E", or
#                   "--paper" for a GPU)
#   make table-lm   a causal LM on a TinyStories sample and WikiText-2: 2 data sets x 6 variants x 2 seeds,
#                   24 runs, 2000 steps (about 40 minutes on a 2-core Intel Xeon; LM_ARGS="--seeds N
#                   --steps S", or "--paper" for a GPU)
#   make table-prior-robustness  when learning the mask matters: the Boolean tasks with a G made partly
#                   wrong, learnable, frozen and QK priors, the mask at 1, 10 and 100 x lr: 189 runs
#                   (PRIOR_ARGS="--seeds N")
#   make test-sanitize  every unit test and a short run of each task family under AddressSanitizer
#                   and UndefinedBehaviorSanitizer (about 17 minutes with the build; make check runs part)
#   make tests/emulated_tests_tsan  the emulated GPU tests under ThreadSanitizer, which names both CUDA
#                   threads of a race in a block (make check runs the emulation's own tests under it,
#                   built alone: make tests/emulation_tests_tsan)
#   make test-faults  runs killed (SIGKILL) and stopped (SIGTERM, SIGINT, SIGUSR1) at exact points and
#                   at 20 random moments each, each continued with --continue, must end bit-identical
#                   to an uninterrupted run
#   make test-large the logits' kernels past 2^31 floats (a GPU with ~18 GB; also in gpu-check-full)
#   make gpu-check  on a GPU, with binaries built elsewhere (it never builds): a preflight of the GPU and
#                   the binaries, then step limits summing to at most 8.25 minutes, checked before it
#                   starts: the correctness stage (a short run of each task family, the GPU cases at
#                   every kernel version, a process per test file, make run's model GPU vs CPU), the
#                   kernel lab and the profiles, compute-sanitizer's four tools, the speed stage
#                   against PyTorch last; then which defaults to switch. GPU_CHECK_RETURN=DIR keeps what
#                   a device call brings back, rewritten after every step. make gpu-check-full: the
#                   paper-size runs, 9 minutes. make gpu-check-rehearsal: the same plan and call here,
#                   on the emulation, with planted faults (docs/gpu.md)
#   make ptxas-report  every kernel's registers, stack and spills from ptxas, in dev/ptxas-report.txt
#   make dev        the kernel lab (dev/): every version of a kernel checked and timed; make dev-emulated
#                   the same programs on the CPU emulation (correctness only)
#   make exercise   the kernel course (dev/exercises/README.md), nine steps from the mask term to training
#                   the model with your kernels: STEP=N checks step N's blank (which fails), EXERCISE=FILE
#                   any step's file (your copy, or a solution), against the CPU on the emulation
#   make bench      CPU speed against PyTorch eager (the make-run, wide, ViT and LM models) and
#                   against this machine's FMA peak and mul+add ceiling (tools/fma_peak);
#                   HOST_MARCH=x86-64-v3: the AVX2 build, against PyTorch held to AVX2 too
#   make fuzz       every input parser under libFuzzer with ASan and UBSan, 10^6 inputs each
#                   (FUZZ_ARGS="--seconds S"; clang); make fuzz-smoke: 10 s each (tests/fuzz/)
# docs/testing.md says what each test checks, docs/gpu.md what gpu-check runs.
# The CUDA toolkit's nvcc (whose own cuBLAS it links): CUDA_HOME's when given, else the nvcc on
# PATH, else /usr/local/cuda's. CUDA=1 builds ./maskprior, the unit tests and the kernel lab with it.
# CUDA=0, the default where there is no nvcc (and `make CUDA=0` where there is one), builds
# ./maskprior and the unit tests with the host compiler alone, as maskprior-emulated is built: it
# trains on the CPU, and runs its CUDA code on the emulation (emu/) only when --device cuda asks,
# to check it; the unit tests' GPU cases skip. Its CPU runs write the nvcc build's bytes.
CUDA_HOME ?=
ifeq ($(origin NVCC),undefined)
NVCC_ON_PATH := $(or $(shell command -v nvcc 2>/dev/null),$(wildcard /usr/local/cuda/bin/nvcc),nvcc)
NVCC      := $(if $(CUDA_HOME),$(CUDA_HOME)/bin/nvcc,$(NVCC_ON_PATH))
endif
NVCC_FOUND := $(shell command -v $(NVCC) 2>/dev/null)
ifeq ($(origin CUDA),undefined)
CUDA      := $(if $(or $(CUDA_HOME),$(NVCC_FOUND)),1,0)
WITHOUT_CUDA_WHY := no nvcc found (CUDA_HOME, PATH, /usr/local/cuda)
else
WITHOUT_CUDA_WHY := CUDA=0
endif
ifeq ($(CUDA),1)
ifeq ($(NVCC_FOUND),)
$(error maskprior: no nvcc at $(NVCC): CUDA_HOME names a CUDA toolkit, or make CUDA=0 builds without one)
endif
else ifneq ($(CUDA),0)
$(error maskprior: CUDA must be 0 or 1, got '$(CUDA)')
endif
# The host compiler: CXX (g++ by default; clang++ needs libomp-14-dev for OpenMP). It builds the
# programs without nvcc (CUDA=0's, the emulated ones); nvcc hands host code to its own, g++.
# more nvcc flags for every nvcc build (-lineinfo, -G, -Xptxas -v, ...)
EXTRA_NVCCFLAGS ?=
# GPU code: native code for ARCH plus PTX that newer GPUs can compile. ARCH is the compute
# capability of this machine's GPU when nvidia-smi finds one (90 = H100/H200), else 90.
GPU_ARCH  := $(shell nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | grep -E '^[0-9]+\.[0-9]+$$' | head -1 | tr -d .)
ARCH      ?= $(or $(GPU_ARCH),90)
# the commit the binary is built from, recorded in every run's metrics.json
GIT_COMMIT := $(or $(shell git describe --always --dirty 2>/dev/null),unknown)
# an extra include folder (the GPU machine has no Debian packages: make gpu-include copies
# the doctest, nlohmann and stb headers to gpu_include/, for a build there by hand)
EXTRA_INCLUDE ?=
# the Python with PyTorch: Debian's python3-torch lives in /usr/bin/python3
PYTHON    ?= /usr/bin/python3
export MASKPRIOR_PYTHON = $(PYTHON)
# OpenMP threads that wait passively: libgomp's default spins, and on a machine where
# anything else runs, spinning threads make a CPU run 10-50x slower (measured; README)
export OMP_WAIT_POLICY ?= passive
# make run: the task, the seeds and the optimizer of the headline experiment
TASK      ?= maj3
SEEDS     ?= 1 2 3 4 5
OPTIMIZER ?= adam
# make table-boolean: --paper (GOTU's model size, for a GPU) and/or --seeds N
BOOLEAN_ARGS ?=
# make table-boolean-targets: --seeds N
BOOLEAN_TARGETS_ARGS ?=
# make table-boolean-data-g: --seeds N
BOOLEAN_DATA_G_ARGS ?=
# make table-arithmetic: --paper (Lee et al.'s model size, for a GPU) and/or --seeds N
ARITHMETIC_ARGS ?=
# make table-vision: --paper (ViT-Tiny, for a GPU), --seeds N, --epochs E
VISION_ARGS ?=
# make table-lm: --paper (a GPU size), --seeds N, --steps S
LM_ARGS ?=
# make table-prior-robustness: --seeds N
PRIOR_ARGS ?=

# Host code: HOST_MARCH picks the instructions. On x86-64 native by default (this machine's
# widest vectors; x86-64-v3 for a binary that must start on any AVX2 machine, such as the GPU
# machine); for ARM64 (the compiler's target, $(CXX) -dumpmachine) armv8-a, whose NEON vectors
# every ARM64 CPU has. -ffp-contract=off: a multiply and an add round separately, as written, never
# fused, so CPU results are the same bits on every CPU of an architecture and at every HOST_MARCH
# (cpu_fast/gemm.h; tests/nocuda_check.sh; across architectures, docs/speed.md).
# -fno-trapping-math: no program here reads the floating-point exception flags, so the compiler
# may turn a comparison into a vector select (vexp's range checks); no value changes.
HOST_TARGET := $(shell $(CXX) -dumpmachine 2>/dev/null)
HOST_MARCH ?= $(if $(filter aarch64%,$(HOST_TARGET)),armv8-a,native)
# the C compiler of tools/fma_peak (make bench)
HOST_CC   ?= gcc
# The settings that shape a build without being files: .build-settings (git-ignored) holds the
# last ones, so that `make CUDA=0`, `make CXX=clang++`, `make HOST_MARCH=x86-64-v3` or
# `make ARCH=100` rebuilds every binary they shape: those of two builds never mix.
BUILD_SETTINGS := CUDA=$(CUDA) CXX=$(CXX) HOST_MARCH=$(HOST_MARCH)$(if $(filter 1,$(CUDA)), ARCH=$(ARCH))
$(shell [ "$$(cat .build-settings 2>/dev/null)" = "$(BUILD_SETTINGS)" ] || echo "$(BUILD_SETTINGS)" > .build-settings)
# what --version prints: the commit and the settings above
VERSION_DEFINES = -DMASKPRIOR_GIT_COMMIT='"$(GIT_COMMIT)"' -DMASKPRIOR_BUILD_SETTINGS='"$(BUILD_SETTINGS)"'
GENCODE   = -gencode arch=compute_$(ARCH),code=[sm_$(ARCH),compute_$(ARCH)]
INCLUDES  = -I. $(if $(EXTRA_INCLUDE),-I$(EXTRA_INCLUDE))
NVCC_HOST = -march=$(HOST_MARCH),-ffp-contract=off,-fno-trapping-math,-Wall,-Wno-parentheses
# nvcc's own front end does not know GCC's loop pragmas (cpu_fast/gemm.h: #pragma GCC unroll), which
# it passes on to the host compiler as they are: its warning 1675 ("unrecognized GCC pragma") is off
NVCC_QUIET = -diag-suppress 1675
NVCCFLAGS = -O3 -std=c++17 $(GENCODE) -DMASKPRIOR_CUDA_ARCH=$(ARCH) $(INCLUDES) -Xcompiler -fopenmp,-O3,$(NVCC_HOST) \
            $(NVCC_QUIET) $(VERSION_DEFINES) $(EXTRA_NVCCFLAGS)
# the unit tests' host code at -O1 (nvcc's -O is the host's; ptxas still builds the kernels at -O3):
# half the build (59 against 124 s of CPU) for the same run (90 against 97 s), as for the build
# without CUDA below (a 2-core AMD EPYC of family 25, model 17, 2026-12-06)
NVCC_TEST_FLAGS = -O1 -std=c++17 $(GENCODE) -DMASKPRIOR_CUDA_ARCH=$(ARCH) $(INCLUDES) -Xcompiler -fopenmp,-O1,$(NVCC_HOST) \
            $(NVCC_QUIET) $(VERSION_DEFINES) $(EXTRA_NVCCFLAGS)
# cuBLAS (matmul version 1) and cuBLASLt (version 2, layers/matmul_lt.cuh)
LDLIBS    = -lcublas -lcublasLt -lgomp -lz
HEADERS   = $(wildcard *.cuh attention/*.h attention/*.cuh cpu_fast/*.h gpu/*.h gpu/*.cuh layers/*.h layers/*.cuh prior/*.h \
            prior/*.cuh recipe/*.h recipe/*.cuh run/*.h run/*.cuh tasks/*.h)

# The CUDA emulation (emu/): the host compiler builds the same sources with MASKPRIOR_CUDA_EMULATION,
# which puts emu/'s CUDA and cuBLAS in place of the real ones; fibers from Boost.Context run the
# threads of a block. No GPU and no nvcc needed.
EMU_CXX   ?= $(CXX)
EMU_OPT   ?= -O2
EMU_CODE  = -std=c++17 -march=$(HOST_MARCH) -ffp-contract=off -fno-trapping-math -fopenmp -Wall -Wno-parentheses $(INCLUDES) -DMASKPRIOR_CUDA_EMULATION
EMU_BASE  = $(EMU_CODE) $(VERSION_DEFINES)
EMU_FLAGS = $(EMU_BASE) $(EMU_OPT)
# the same tests under AddressSanitizer and UndefinedBehaviorSanitizer: out-of-bounds reads and
# writes in a kernel beyond the emulation's guard bytes, and undefined arithmetic. The sanitizer
# builds carry -g1, the debug information's line tables alone: enough for every report's file and
# line, and a third less compiling than -g (whose variables a report never prints)
EMU_SANITIZE = $(EMU_BASE) -O1 -g1 -fsanitize=address,undefined -fno-omit-frame-pointer
# and under ThreadSanitizer, each CUDA thread a fiber of its own (emu/threads.h): a race between two
# threads of a block is reported with both named. No OpenMP: libgomp is not instrumented.
EMU_TSAN  = $(filter-out -fopenmp,$(EMU_BASE)) -Wno-unknown-pragmas -O1 -g1 -fsanitize=thread
EMU_LIBS  = -lboost_context -lz
EMU_HEADERS = $(wildcard emu/*.h)
EMU_TESTS = $(wildcard tests/*.cu tests/*.h)

# The kernel lab (dev/, dev/README.md): one program per kernel family that runs every version of
# it, checks each against the CPU reference and times it with CUDA events, in one table.
#   make dev           with nvcc, for a GPU (ARCH, HOST_MARCH as above)
#   make dev-emulated  on the CPU emulation of CUDA: the checks only (make test runs them, --quick)
DEV_NAMES    = attention_forward attention_backward matmul
DEV_BINS     = $(DEV_NAMES:%=dev/%)
DEV_EMULATED = $(DEV_NAMES:%=dev/%-emulated)
# make exercise, the kernel course (dev/exercises/README.md, dev/exercises/check/exercise.sh): STEP=N
# checks step N's blank, EXERCISE=FILE any step's file (EXERCISE=N is STEP=N); each step's check is
# built into build/exercises/ at EXERCISE_OPT ("-O0 -g" to step through a CUDA thread in gdb)
EXERCISE     ?=
STEP         ?=
EXERCISE_OPT ?= -O1

# ---- fuzzing (tests/fuzz/) ----
# One libFuzzer harness per input parser (tests/fuzz/fuzz_<name>.cpp), built by clang++ with
# AddressSanitizer and UndefinedBehaviorSanitizer (Debian's clang and libclang-rt-14-dev) into
# tests/fuzz/bin/ (git-ignored); tests/fuzz/run_fuzz.sh runs them one after another, one core.
#   make fuzz        FUZZ_ARGS (default: 10^6 executions per harness; "--seconds S" for a time)
#   make fuzz-smoke  about 10 s per harness (tests/fuzz/smoke.sh, for the test suite)
FUZZ_CXX   ?= clang++
FUZZ_FLAGS  = -std=c++17 -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined \
              -fno-sanitize-recover=all -Wall -MMD -MP $(INCLUDES)
FUZZ_NAMES  = safetensors structure arithmetic idx cifar image token_file vocabulary target
FUZZ_BINS   = $(FUZZ_NAMES:%=tests/fuzz/bin/fuzz_%)
FUZZ_ARGS  ?= --runs 1000000

.PHONY: all run test check check-arm64 test-emulated table-boolean table-boolean-targets table-boolean-data-g table-arithmetic table-vision table-lm \
        table-prior-robustness test-large sweep-2parity \
        gpu-check gpu-check-full gpu-check-rehearsal gpu-include ptxas-report bench deps-run deps-test deps-check deps-tables deps-bench deps-arm64 clean test-sanitize test-faults \
        fuzz fuzz-smoke dev dev-emulated exercise

all: maskprior

ifeq ($(CUDA),1)
maskprior: main.cu $(HEADERS) .build-settings
	$(NVCC) $(NVCCFLAGS) -o $@ main.cu $(LDLIBS)

tests/unit_tests: $(wildcard tests/*.cu tests/*.h) $(HEADERS) .build-settings
	$(NVCC) $(NVCC_TEST_FLAGS) -o $@ tests/unit_tests.cu $(LDLIBS)
else
# The build without CUDA: the same sources by the host compiler, the emulation in CUDA's place
# (MASKPRIOR_WITHOUT_CUDA: gpu/cuda.cuh), the program at -O3 as nvcc's host code; the unit tests at
# -O1, which builds them in half the time (63 against 130 s of CPU) and runs them about as
# fast (66 against 62 s; a 2-core AMD EPYC of family 25, model 17, for x86-64-v2, 2026-12-06)
WITHOUT_CUDA_FLAGS = $(EMU_BASE) -DMASKPRIOR_WITHOUT_CUDA -O3
WITHOUT_CUDA_TEST_FLAGS = $(EMU_BASE) -DMASKPRIOR_WITHOUT_CUDA -O1
maskprior: main.cu $(HEADERS) $(EMU_HEADERS) .build-settings
	@echo "maskprior: $(WITHOUT_CUDA_WHY): building with $(CXX) alone, without CUDA: it trains on the CPU" \
	      "(--device cuda: the CUDA code on the emulation, emu/, to check it)"
	$(CXX) $(WITHOUT_CUDA_FLAGS) -o $@ -x c++ main.cu -x none $(EMU_LIBS)

tests/unit_tests: $(wildcard tests/*.cu tests/*.h) $(HEADERS) $(EMU_HEADERS) .build-settings
	$(CXX) $(WITHOUT_CUDA_TEST_FLAGS) -o $@ -x c++ tests/unit_tests.cu -x none $(EMU_LIBS)
endif

maskprior-emulated: main.cu $(HEADERS) $(EMU_HEADERS) .build-settings
	$(EMU_CXX) $(EMU_FLAGS) -o $@ -x c++ main.cu -x none $(EMU_LIBS)

tests/emulated_tests: $(EMU_TESTS) $(HEADERS) $(EMU_HEADERS) .build-settings
	$(EMU_CXX) $(EMU_FLAGS) -o $@ -x c++ tests/emulated_tests.cu -x none $(EMU_LIBS)

tests/emulated_tests_asan: $(EMU_TESTS) $(HEADERS) $(EMU_HEADERS) .build-settings
	$(EMU_CXX) $(EMU_SANITIZE) -o $@ -x c++ tests/emulated_tests.cu -x none $(EMU_LIBS)

tests/emulated_tests_tsan: $(EMU_TESTS) $(HEADERS) $(EMU_HEADERS) .build-settings
	$(EMU_CXX) $(EMU_TSAN) -o $@ -x c++ tests/emulated_tests.cu -x none $(EMU_LIBS)

# the emulation's own tests alone (tests/emulation_tests.cu) under ThreadSanitizer: what make check runs
# under it, built in a fraction of the whole suite's time
tests/emulation_tests_tsan: $(EMU_TESTS) $(HEADERS) $(EMU_HEADERS) .build-settings
	$(EMU_CXX) $(EMU_TSAN) -o $@ -x c++ tests/emulation_tests.cu -x none $(EMU_LIBS)

# The host code under AddressSanitizer and UndefinedBehaviorSanitizer, nvcc handing the flags to
# the host compiler (the CPU path runs every layer on the host; the kernels' own check is
# tests/emulated_tests_asan): any report stops the program with a non-zero exit.
SANITIZE_FLAGS = -O1 -std=c++17 $(GENCODE) -DMASKPRIOR_CUDA_ARCH=$(ARCH) $(INCLUDES) $(EXTRA_NVCCFLAGS) \
            -Xcompiler -fopenmp,-O1,-g1,-march=$(HOST_MARCH),-ffp-contract=off,-fno-trapping-math,-Wall,-Wno-parentheses \
            -Xcompiler -fsanitize=address,-fsanitize=undefined,-fno-sanitize-recover=all,-fno-omit-frame-pointer \
            $(NVCC_QUIET) $(VERSION_DEFINES)

ifeq ($(CUDA),1)
maskprior-sanitize: main.cu $(HEADERS) .build-settings
	$(NVCC) $(SANITIZE_FLAGS) -o $@ main.cu $(LDLIBS)

tests/unit_tests_sanitize: $(wildcard tests/*.cu tests/*.h) $(HEADERS) .build-settings
	$(NVCC) $(SANITIZE_FLAGS) -o $@ tests/unit_tests.cu $(LDLIBS)
else
WITHOUT_CUDA_SANITIZE = $(EMU_BASE) -DMASKPRIOR_WITHOUT_CUDA -O1 -g1 -fsanitize=address,undefined \
            -fno-sanitize-recover=all -fno-omit-frame-pointer
maskprior-sanitize: main.cu $(HEADERS) $(EMU_HEADERS) .build-settings
	$(CXX) $(WITHOUT_CUDA_SANITIZE) -o $@ -x c++ main.cu -x none $(EMU_LIBS)

tests/unit_tests_sanitize: $(wildcard tests/*.cu tests/*.h) $(HEADERS) $(EMU_HEADERS) .build-settings
	$(CXX) $(WITHOUT_CUDA_SANITIZE) -o $@ -x c++ tests/unit_tests.cu -x none $(EMU_LIBS)
endif

# the unit tests and a short run of each task family under the sanitizers (tests/sanitize.sh)
test-sanitize: deps-test maskprior-sanitize tests/unit_tests_sanitize
	@sh tests/sanitize.sh

# runs killed and stopped by signals at exact points and 20 times each at random moments, continued, compared
test-faults: deps-test maskprior
	@sh tests/test_faults.sh --timed 20

# the Debian packages of each set (tools/install-deps.sh says what each holds), with clang's when
# the host compiler is clang++, and Boost.Context when the build is without CUDA (it compiles in the
# emulation, emu/, whose fibers are Boost.Context's; the nvcc build needs no Boost)
deps-run deps-test deps-check deps-tables deps-bench deps-arm64:
	@sh tools/install-deps.sh $(@:deps-%=%) $(if $(findstring clang,$(CXX)),clang) $(if $(filter 0,$(CUDA)),without-cuda)

run: deps-run maskprior
	@SEEDS="$(SEEDS)" OPTIMIZER=$(OPTIMIZER) sh experiments/headline.sh $(TASK)

# what make test runs, and what make check runs (tests/run_all.sh), each list with its longest builds
# first: make -j starts its goals in the order given, so that no long build is left alone at the end
TEST_BINARIES  = tests/unit_tests maskprior tests/emulated_tests maskprior-emulated $(DEV_EMULATED)
CHECK_BINARIES = tests/emulated_tests_asan tests/unit_tests maskprior-sanitize maskprior tests/emulation_tests_tsan \
                 tests/emulated_tests maskprior-emulated $(FUZZ_BINS) $(DEV_EMULATED)

# how many binaries make test and make check build at once: one a core (each is one translation unit)
BUILD_JOBS ?= $(shell nproc 2>/dev/null || echo 2)

test: deps-test
	@$(MAKE) --no-print-directory -j$(BUILD_JOBS) $(TEST_BINARIES)
	@sh tests/run_all.sh

check: deps-check
	@$(MAKE) --no-print-directory -j$(BUILD_JOBS) $(CHECK_BINARIES)
	@sh tests/run_all.sh --check

# ARM64 without an ARM64 machine (tests/arm64_check.sh; CI does not run it): Debian's cross compiler
# builds the program and the unit tests without CUDA in a copy of the tree (build/arm64/),
# qemu-aarch64 runs the unit tests and short runs of each task family, whose bytes are compared with
# this machine's ./maskprior's (docs/speed.md: which results differ across architectures, and why)
check-arm64: deps-arm64 maskprior
	@sh tests/arm64_check.sh

test-emulated: deps-test maskprior-emulated tests/emulated_tests
	./tests/emulated_tests --no-intro=true

ifeq ($(CUDA),1)
dev: $(DEV_BINS)
else
dev ptxas-report:
	@echo "maskprior: make $@ needs nvcc, and this build is without CUDA ($(WITHOUT_CUDA_WHY))" \
	      "$(if $(filter dev,$@),(make dev-emulated: the lab's checks on the emulation))" >&2; exit 2
endif

dev-emulated: $(DEV_EMULATED)

$(DEV_BINS): dev/%: dev/%.cu dev/dev_common.h dev/dev_check.h $(HEADERS) .build-settings
	$(NVCC) $(NVCCFLAGS) -o $@ $< $(LDLIBS)

$(DEV_EMULATED): dev/%-emulated: dev/%.cu dev/dev_common.h dev/dev_check.h $(HEADERS) $(EMU_HEADERS) .build-settings
	$(EMU_CXX) $(EMU_FLAGS) -o $@ -x c++ $< -x none $(EMU_LIBS)

# the step's check is built every time (a few seconds), so that it is never another file's build that runs
exercise: deps-test
	@EMU_CXX="$(EMU_CXX)" EXERCISE_FLAGS="$(EMU_CODE) $(EXERCISE_OPT)" EMU_LIBS="$(EMU_LIBS)" PYTHON="$(PYTHON)" \
	    sh dev/exercises/check/exercise.sh "$(EXERCISE)" "$(STEP)"

# step 9's trainer: main.cu with ATTENTION_EXERCISE (the learner's line of attention/versions.cuh's table),
# built once at -O1 (-O0 trains several times slower) and linked with each learner's file
build/exercises/train-main.o: main.cu $(HEADERS) $(EMU_HEADERS) dev/exercises/check/train.h .build-settings
	@mkdir -p build/exercises
	$(EMU_CXX) $(EMU_BASE) -O1 -DATTENTION_EXERCISE -c -o $@ -x c++ main.cu

table-boolean: deps-tables maskprior
	@sh experiments/boolean_table.sh $(BOOLEAN_ARGS)

table-boolean-targets: deps-tables maskprior
	@sh experiments/boolean_targets_table.sh $(BOOLEAN_TARGETS_ARGS)

table-boolean-data-g: deps-tables maskprior
	@sh experiments/boolean_data_g_table.sh $(BOOLEAN_DATA_G_ARGS)

table-arithmetic: deps-tables maskprior
	@sh experiments/arithmetic_table.sh $(ARITHMETIC_ARGS)

table-vision: deps-tables maskprior
	@sh experiments/vision_table.sh $(VISION_ARGS)

table-lm: deps-tables maskprior
	@sh experiments/lm_table.sh $(LM_ARGS)

table-prior-robustness: deps-tables maskprior
	@sh experiments/prior_robustness.sh $(PRIOR_ARGS)

sweep-2parity: deps-tables maskprior
	@sh experiments/sweep_2parity.sh

# on the GPU machine (tests/gpu_check.py, docs/gpu.md): python3 there is the one with PyTorch
gpu-check:
	@python3 tests/gpu_check.py

gpu-check-full:
	@python3 tests/gpu_check.py --full

# the same plan flown here without a GPU, on the emulation and stand-ins (make check runs it)
gpu-check-rehearsal: deps-test maskprior tests/unit_tests maskprior-emulated tests/emulated_tests $(DEV_EMULATED)
	@sh tests/test_gpu_check.sh

# Every kernel of main.cu compiled for sm_90 under ptxas -v: registers, stack frame, spill stores and
# loads, static shared memory, a line each, in dev/ptxas-report.txt with the nvcc version and the date
# (dev/ptxas_report.py). It fails when a kernel has a stack frame or spills. No GPU needed. make test
# fails when the report lacks a kernel main.cu's build compiles (tests/test_ptxas_report.sh).
PTXAS_FLAGS = -O3 -std=c++17 -cubin -arch=sm_90 -DMASKPRIOR_CUDA_ARCH=90 $(INCLUDES) -DMASKPRIOR_GIT_COMMIT='""' \
              -DMASKPRIOR_BUILD_SETTINGS='""' $(NVCC_QUIET) $(EXTRA_NVCCFLAGS)
ifeq ($(CUDA),1)
ptxas-report:
	$(PYTHON) dev/ptxas_report.py dev/ptxas-report.txt $(NVCC) $(PTXAS_FLAGS) -o /dev/null main.cu
endif

# the kernels of a language model's logits past 2^31 floats: ~18 GB of GPU memory (skipped without a GPU)
test-large: tests/unit_tests
	MASKPRIOR_LARGE_TESTS=1 ./tests/unit_tests --no-intro=true -tc="*past 2^31*"

# Copies the headers of the Debian packages the build needs into gpu_include/ (git-ignored),
# for a GPU machine without them: carry gpu_include there and build with EXTRA_INCLUDE=gpu_include
# (make gpu-check never builds: it takes the binaries carried).
# (Linking there also needs libz.so: building here with ARCH=90 HOST_MARCH=x86-64-v3 and
# carrying the binaries avoids both.)
gpu-include: deps-test
	mkdir -p gpu_include
	cp -r /usr/include/doctest /usr/include/nlohmann /usr/include/stb /usr/include/zlib.h /usr/include/zconf.h gpu_include/

# the FMA peak and the mul+add ceiling, measured with the same -march as the binary
tools/fma_peak: tools/fma_peak.c .build-settings
	$(HOST_CC) -O2 -march=$(HOST_MARCH) -fopenmp -Wall -o $@ $<

bench: deps-bench maskprior tools/fma_peak
	@OMP_NUM_THREADS=$${OMP_NUM_THREADS:-$$(nproc)} $(PYTHON) tools/bench.py

clean:
	rm -f maskprior tests/unit_tests maskprior-emulated tests/emulated_tests tests/emulated_tests_asan tools/fma_peak \
	      tests/emulated_tests_tsan tests/emulation_tests_tsan \
	      maskprior-sanitize tests/unit_tests_sanitize $(DEV_BINS) $(DEV_EMULATED)
	rm -rf tests/fuzz/bin build/exercises

# each binary also depends on the headers it includes, listed by the compiler in tests/fuzz/bin/fuzz_<name>.d
tests/fuzz/bin/fuzz_%: tests/fuzz/fuzz_%.cpp
	@mkdir -p tests/fuzz/bin
	$(FUZZ_CXX) $(FUZZ_FLAGS) -o $@ $< -lz
-include $(wildcard tests/fuzz/bin/*.d)

fuzz: deps-check $(FUZZ_BINS)
	@sh tests/fuzz/run_fuzz.sh $(FUZZ_ARGS)

fuzz-smoke: deps-check $(FUZZ_BINS)
	@sh tests/fuzz/smoke.sh
