# Adaptive DHiSparse: trace-driven simulator + reference CUDA kernels.
#
#   make          build bin/dhtrace, bin/dhsim, bin/dhsweep, bin/dhcal (and bin/dhbench, bin/dhreplay when nvcc exists)
#   make run      the built-in default: GLM-5.3, 100K context, concurrency 128, all policies,
#                 every figure with its 95 % interval (builds bin/dhsim only; about 45 CPU s)
#   make test     unit and differential tests (no GPU needed); ends with "N passed, N failed"
#   make sanitize the same tests under AddressSanitizer + UndefinedBehaviorSanitizer (build-san/)
#   make fuzz     libFuzzer harnesses of the input readers (build-fuzz/; tests/fuzz/RESULTS.md)
#   make bench    CPU benchmarks of the trace tools, the simulator and the sweeps (figures in bench/)
#   make gpubench kernel microbenchmarks on the local CUDA GPU (bin/dhbench)
#   make figs     regenerate paper-figs/ (PNG, PDF, data) with gnuplot (builds the CPU tools only)
#
# Layering: common/ <- traces/ <- sim/ <- analysis/, sweep/.  The kernel library (kernels/lib/, kernels/dhk.h)
# and the kernels' versions use nothing of them but common/dh_err; the GPU replay (kernels/replay/)
# sits above both the kernels and sim/.
# Each directory's *.c files form one static library; a file named dh*.c is a tool's main().

# Debian packages the build needs; `make deps` installs them (run as root) or prints the command.
DEB_PKGS := libhdf5-dev hdf5-tools libgsl-dev libcmocka-dev libinih-dev librandom123-dev \
            gnuplot-nox pkg-config python3-h5py libopenmpi-dev openmpi-bin slurm-wlm munge
PKGS     := hdf5 gsl cmocka inih

CC      ?= cc
CFLAGS  ?= -O2 -g -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -Wno-format-truncation -MMD -MP
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   = $(shell pkg-config --libs $(PKGS) 2>/dev/null)
HDF5_LIBDIR = $(shell pkg-config --variable=libdir hdf5 2>/dev/null)
CPPFLAGS = -I. $(PKG_CFLAGS)
LDLIBS   = $(PKG_LIBS) -lhdf5_hl -lm -lpthread

# CUDA ?= auto builds the kernels when nvcc is found; CUDA=0 skips them, CUDA=1 insists.
CUDA      ?= auto
NVCC      ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
NVCCFLAGS ?= -O3 -std=c++17 -lineinfo -Xcompiler -Wall
ifeq ($(CUDA),auto)
  BUILD_CUDA := $(if $(NVCC),1,0)
else
  BUILD_CUDA := $(CUDA)
endif
# The GPU tools are fat binaries (kernels/README.md, "GPU architectures"): machine code for each
# architecture of CUDA_ARCHS that the installed nvcc supports (Ampere sm_80 and sm_86, Ada
# sm_89, Hopper sm_90, Blackwell sm_100 and sm_120; sm_87, sm_103, sm_121 run the code of
# sm_80, sm_100, sm_120), PTX of the newest for the GPUs after it, and the wgmma units
# (*_wgmma.cu) for sm_90a alone. At run time kernels/karch.c picks the versions the GPU can
# run. `make CUDA_ARCHS=90` builds for one architecture (minutes less of nvcc).
CUDA_ARCHS_ALL := 80 86 89 90 100 120
ifeq ($(BUILD_CUDA),1)
  NVCC_SM    := $(patsubst sm_%,%,$(filter sm_%,$(shell $(NVCC) --list-gpu-code 2>/dev/null)))
  CUDA_ARCHS ?= $(if $(NVCC_SM),$(filter $(NVCC_SM),$(CUDA_ARCHS_ALL)),$(CUDA_ARCHS_ALL))
  ifneq ($(shell echo '$(CUDA_ARCHS)' | grep -Eqx ' *([0-9]+ *)+' || echo bad),)
    $(error CUDA_ARCHS='$(CUDA_ARCHS)': list architectures as numbers, e.g. CUDA_ARCHS="80 90")
  endif
endif
CUDA_PTX    = $(lastword $(CUDA_ARCHS))
NVCC_GENCODE = $(foreach a,$(CUDA_ARCHS),-gencode=arch=compute_$(a),code=sm_$(a)) \
               -gencode=arch=compute_$(CUDA_PTX),code=compute_$(CUDA_PTX) $(if $(NVCC_THREADS),--threads $(NVCC_THREADS))
# NVCC_THREADS=N compiles a unit's architectures on N threads (0: one per CPU), for machines with
# more cores than make -j keeps busy.

BUILD := build
BIN   := bin
# A tool main is dh<name>.c; dh_<name>.c (e.g. common/dh_err.c) is library code.
lib_src = $(filter-out $(filter-out $(1)/dh_%.c,$(wildcard $(1)/dh*.c)),$(wildcard $(1)/*.c))
lib_obj = $(patsubst %.c,$(BUILD)/%.o,$(call lib_src,$(1)))

COMMON_OBJ   := $(call lib_obj,common)
TRACES_OBJ   := $(call lib_obj,traces)
SIM_OBJ      := $(call lib_obj,sim)
ANALYSIS_OBJ := $(call lib_obj,analysis)
KREF_OBJ     := $(call lib_obj,kernels)
LIBS_OBJ     := $(ANALYSIS_OBJ) $(SIM_OBJ) $(TRACES_OBJ) $(KREF_OBJ) $(COMMON_OBJ)

SWEEP_OBJ    := $(call lib_obj,sweep)

TOOLS := $(BIN)/dhtrace $(BIN)/dhsim $(BIN)/dhsweep $(BIN)/dhcal $(BIN)/dhconfig
TEST_SRC  := $(wildcard tests/test_*.c)
TEST_BINS := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRC))

ifeq ($(BUILD_CUDA),1)
  GPU_TOOLS := bin/dhbench bin/dhreplay
endif

# Expert-parallel all-to-all benchmark (kernels/a2a/README.md). NCCL is looked for under
# NCCL_HOME when set, else beside nvcc, under /usr/local/cuda*, and in the Debian multiarch
# directory (libnccl-dev). Without NCCL, bin/dha2a is skipped with a note: it is the one tool
# that needs it, and a machine without NCCL has no multi-GPU all-to-all to measure anyway.
# NCCL_LIB (the library file) and NCCL_INC (the folder of nccl.h) may also be given directly
# (kernels/a2a/build.sh does, for NCCL from Python's nvidia-nccl wheel).
NCCL_DIRS := $(if $(NCCL_HOME),$(NCCL_HOME),$(patsubst %/bin/nvcc,%,$(NVCC)) /usr/local/cuda /usr/local/cuda-* /usr)
NCCL_LIB  ?= $(firstword $(foreach d,$(NCCL_DIRS),$(wildcard $(d)/lib64/libnccl.so $(d)/lib/libnccl.so \
               $(d)/lib/x86_64-linux-gnu/libnccl.so $(d)/lib/aarch64-linux-gnu/libnccl.so)))
NCCL_INC  ?= $(firstword $(foreach d,$(NCCL_DIRS),$(patsubst %/nccl.h,%,$(wildcard $(d)/include/nccl.h))))
ifeq ($(BUILD_CUDA),1)
  ifneq ($(and $(NCCL_LIB),$(NCCL_INC)),)
    GPU_TOOLS += bin/dha2a
  else
    $(warning note: NCCL (libnccl.so + nccl.h) not found; bin/dha2a is not built (set NCCL_HOME))
  endif
endif

.PHONY: all deps run test bench gpubench figs clean replay
all: deps-check $(TOOLS) $(GPU_TOOLS)

# Missing Debian packages: install them when root, otherwise print the exact command.
.PHONY: deps-check
deps-check:
	@missing=""; for p in $(DEB_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then echo "installing:$$missing"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing) >/dev/null || exit 1; \
	  else echo "missing Debian packages; run: sudo apt-get install -y$$missing"; exit 1; fi; fi
deps: deps-check

$(BUILD)/%.o: %.c | deps-check
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(BIN)/dhtrace: $(BUILD)/traces/dhtrace.o $(TRACES_OBJ) $(COMMON_OBJ)
	@mkdir -p $(BIN)
	$(CC) $(CFLAGS) -o $@ $(filter %.o,$^) $(LDLIBS)
$(BIN)/dhsim: $(BUILD)/sim/dhsim.o $(SIM_OBJ) $(TRACES_OBJ) $(COMMON_OBJ)
	@mkdir -p $(BIN)
	$(CC) $(CFLAGS) -o $@ $(filter %.o,$^) $(LDLIBS)
# Sweeps (sweep/): dhsweep is compiled and linked with mpicc when it is found (OpenMPI,
# libopenmpi-dev), so that `mpirun -n N bin/dhsweep run FILE` shares the points between
# ranks; without it dhsweep runs on threads alone (dhsweep --version says which). MPICC is
# looked up when the rule runs, after deps-check has installed the packages. The commit
# (git describe) every tool records (common/version.h) is a -D define of common/version.c
# alone; build/commit.stamp changes only when it does, so that file is recompiled then and
# only then.
MPICC     ?= $(shell command -v mpicc 2>/dev/null)
DH_COMMIT := $(shell git describe --always --dirty 2>/dev/null || echo unknown)
.PHONY: FORCE
$(BUILD)/commit.stamp: FORCE
	@mkdir -p $(BUILD); echo '$(DH_COMMIT)' | cmp -s - $@ || echo '$(DH_COMMIT)' > $@
$(BUILD)/common/version.o $(BUILD)/gpu/common/version.o: $(BUILD)/commit.stamp
$(BUILD)/common/version.o: CPPFLAGS += -DDH_COMMIT='"$(DH_COMMIT)"'
$(BUILD)/gpu/common/version.o: GPU_C_INC += -DDH_COMMIT='"$(DH_COMMIT)"'
$(BUILD)/sweep/dhsweep.o: sweep/dhsweep.c | deps-check
	@mkdir -p $(dir $@)
	$(if $(MPICC),$(MPICC) -DDH_MPI,$(CC)) $(CPPFLAGS) $(CFLAGS) -c $< -o $@
$(BIN)/dhsweep: $(BUILD)/sweep/dhsweep.o $(SWEEP_OBJ) $(SIM_OBJ) $(TRACES_OBJ) $(COMMON_OBJ)
	@mkdir -p $(BIN)
	$(if $(MPICC),$(MPICC),$(CC)) $(CFLAGS) -o $@ $(filter %.o,$^) $(LDLIBS)
$(BIN)/dhcal: $(BUILD)/analysis/dhcal.o $(LIBS_OBJ)
	@mkdir -p $(BIN)
	$(CC) $(CFLAGS) -o $@ $(filter %.o,$^) $(LDLIBS)
# The config files' schema (docs/CONFIG.md), from every loader's table: sweep/ included.
$(BIN)/dhconfig: $(BUILD)/analysis/dhconfig.o $(LIBS_OBJ) $(SWEEP_OBJ)
	@mkdir -p $(BIN)
	$(CC) $(CFLAGS) -o $@ $(filter %.o,$^) $(LDLIBS)

# ---- Kernels (kernels/README.md) ----
# The library (kernels/lib/*.cu, API kernels/dhk.h) is built once into build/kernels/libdhk.a;
# the numbered versions and their benchmarks (kernels/versions/*.cu) and the benchmarks'
# helpers (kernels/bench.cu) into build/kernels/libdhkbench.a. bin/dhbench and bin/dhreplay
# link both: each program pulls from an archive only the objects it needs. *_wgmma.cu files
# use wgmma, which only the sm_90a target has; every other .cu file is built for CUDA_ARCHS,
# its instructions of later architectures guarded by __CUDA_ARCH__ (kernels/karch.h).
# nvcc writes each object's header dependencies (-MMD), read back by the -include at the end.
#
# The GPU tools need no Debian package: their C objects (the kernels' CPU references, and for
# the replay the host side and the simulator modules it runs) are built under build/gpu/ with
# -I. alone, without pkg-config and without the deps-check, so that
#   make bin/dhbench bin/dhreplay [INIH_INC=DIR INIH_LIB=DIR R123_INC=DIR]
# works on a CUDA machine that has only nvcc, a C compiler, libinih and the Random123 headers
# (DIR/ini.h and DIR/libinih.so, DIR/Random123/philox.h; by default the system's).
KLIB_OBJ   := $(patsubst %.cu,$(BUILD)/%.cu.o,$(wildcard kernels/lib/*.cu))
KBENCH_OBJ := $(patsubst %.cu,$(BUILD)/%.cu.o,kernels/bench.cu $(wildcard kernels/versions/*.cu))
NVCC_DEPS   = -MMD -MP -MF $(@:.o=.d)

$(BUILD)/%.cu.o: %.cu $(BUILD)/cuda-archs.stamp
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) $(NVCC_GENCODE) -DDHK_CUDA_ARCHS='"$(CUDA_ARCHS)"' -I. $(NVCC_DEPS) -c $< -o $@
$(BUILD)/%_wgmma.cu.o: %_wgmma.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -gencode=arch=compute_90a,code=sm_90a -I. $(NVCC_DEPS) -c $< -o $@
# The architectures' list changes only when CUDA_ARCHS does: then every generic unit is rebuilt.
$(BUILD)/cuda-archs.stamp: FORCE
	@mkdir -p $(BUILD); echo '$(CUDA_ARCHS)' | cmp -s - $@ || echo '$(CUDA_ARCHS)' > $@
$(BUILD)/kernels/libdhk.a: $(KLIB_OBJ)
	@rm -f $@
	ar rcs $@ $^
$(BUILD)/kernels/libdhkbench.a: $(KBENCH_OBJ)
	@rm -f $@
	ar rcs $@ $^

# C objects of the GPU tools (see above): plain C11 with libc, libinih and Random123 only.
# The replay's host side is every library file of common/, traces/ and sim/ except those that
# read or write HDF5 or call GSL (GPU_C_NEEDS_HDF5): a module the simulator gains is in the replay's
# archive with no edit here, and the linker takes from it what kernels/replay/rp_host.c uses.
GPU_C_NEEDS_HDF5 := common/h5attr.c common/h5det.c common/h5init.c common/stats.c traces/h5pre.c traces/trace.c traces/trace_info.c \
                    sim/out.c
GPU_C_INC   := -I. $(if $(INIH_INC),-I$(INIH_INC)) $(if $(R123_INC),-I$(R123_INC))
KGPU_C_OBJ  := $(patsubst %.c,$(BUILD)/gpu/%.o,$(call lib_src,kernels) common/dh_err.c)
REPLAY_C_SRC := kernels/replay/rp_host.c analysis/rcfg.c \
                $(filter-out $(GPU_C_NEEDS_HDF5),$(call lib_src,sim) $(call lib_src,traces) $(call lib_src,common))
REPLAY_C_OBJ := $(patsubst %.c,$(BUILD)/gpu/%.o,$(REPLAY_C_SRC))
INIH_LIBS   := $(if $(INIH_LIB),-L$(INIH_LIB) -Xlinker -rpath -Xlinker $(INIH_LIB)) -linih
# Built as part of `make` or `make test`, they wait for the deps-check (which installs Random123 and
# libinih on a fresh machine) like every other object; built by name (make bin/dhbench ...), not.
GPU_C_ORDER := $(if $(filter-out bin/dhbench bin/dhreplay bin/dha2a,$(or $(MAKECMDGOALS),all)),deps-check)
$(BUILD)/gpu/%.o: %.c | $(GPU_C_ORDER)
	@mkdir -p $(dir $@)
	$(CC) $(GPU_C_INC) $(CFLAGS) -c $< -o $@
$(BUILD)/gpu/libreplayhost.a: $(REPLAY_C_OBJ)
	@rm -f $@
	ar rcs $@ $^

# CUPTI (the toolkit's activity API) for dhbench --timing kernel, looked for beside nvcc: include/
# or extras/CUPTI/include, lib64/, lib/ or extras/CUPTI/lib64 (CUPTI_INC, the folder of cupti.h, and
# CUPTI_LIB, the library file, may be given). Without it dhbench builds and refuses the option.
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
CUPTI_INC ?= $(patsubst %/cupti.h,%,$(firstword $(wildcard $(CUDA_HOME)/include/cupti.h $(CUDA_HOME)/extras/CUPTI/include/cupti.h)))
CUPTI_LIB ?= $(firstword $(wildcard $(CUDA_HOME)/lib64/libcupti.so $(CUDA_HOME)/extras/CUPTI/lib64/libcupti.so \
               $(CUDA_HOME)/lib/libcupti.so $(CUDA_HOME)/lib/x86_64-linux-gnu/libcupti.so $(CUDA_HOME)/lib/aarch64-linux-gnu/libcupti.so))
ifeq ($(BUILD_CUDA),1)
  ifneq ($(and $(CUPTI_INC),$(CUPTI_LIB)),)
    $(BUILD)/kernels/dhbench.cu.o: NVCCFLAGS += -DDHK_CUPTI -I$(CUPTI_INC)
    CUPTI_LIBS := -L$(dir $(CUPTI_LIB)) -lcupti -Xlinker -rpath -Xlinker $(dir $(CUPTI_LIB))
  else
    $(warning note: CUPTI (cupti.h + libcupti.so) not found beside nvcc; dhbench --timing kernel is refused (set CUPTI_INC, CUPTI_LIB))
  endif
endif
bin/dhbench: $(BUILD)/kernels/dhbench.cu.o $(BUILD)/kernels/libdhkbench.a $(BUILD)/kernels/libdhk.a $(KGPU_C_OBJ)
	@mkdir -p bin
	$(NVCC) $(NVCCFLAGS) -o $@ $(filter %.o,$^) $(filter %.a,$^) -lcublasLt -lpthread $(CUPTI_LIBS)

# The GPU check of SGLang's hot-buffer kernel against its CPU steps (kernels/sglcheck.cu).
bin/dhsglcheck: $(BUILD)/kernels/sglcheck.cu.o $(BUILD)/kernels/libdhk.a $(KGPU_C_OBJ)
	@mkdir -p bin
	$(NVCC) $(NVCCFLAGS) -o $@ $(filter %.o,$^) $(filter %.a,$^) -lcublasLt -lpthread

bin/dha2a: kernels/a2a/dha2a.cu kernels/a2a/a2a_plan.h $(BUILD)/gpu/kernels/a2a/a2a_plan.o $(BUILD)/gpu/common/dh_err.o
	@test -n "$(NCCL_LIB)" -a -n "$(NCCL_INC)" || { echo "bin/dha2a: NCCL not found (libnccl.so and nccl.h); set NCCL_HOME"; exit 1; }
	@mkdir -p bin
	$(NVCC) $(NVCCFLAGS) $(NVCC_GENCODE) -I. -I$(NCCL_INC) -o $@ $< $(BUILD)/gpu/kernels/a2a/a2a_plan.o \
	  $(BUILD)/gpu/common/dh_err.o -L$(dir $(NCCL_LIB)) -l:$(notdir $(NCCL_LIB)) -Xlinker -rpath=$(dir $(NCCL_LIB))

# Only the sources and objects are linked: -MMD adds the headers a test includes to its
# prerequisites, which must not reach the compiler's command line.
$(BUILD)/tests/%: tests/%.c $(LIBS_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $(filter %.c %.o,$^) $(LDLIBS)

# Benchmark and calibration programs of the traces library (bench/*.c).
BENCH_BINS := $(patsubst bench/%.c,$(BUILD)/bench/%,$(wildcard bench/*.c))
$(BUILD)/bench/%: bench/%.c $(TRACES_OBJ) $(COMMON_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $(filter %.c %.o,$^) $(LDLIBS)

# make run builds only the simulator it runs (seconds), not the GPU tools (minutes with nvcc).
run: deps-check bin/dhsim
	./bin/dhsim --compare

# make sanitize: the whole `make test` under AddressSanitizer and UndefinedBehaviorSanitizer,
# halting on the first report, leaks included. The sanitized build lives in build-san/ (tools
# in build-san/bin); the command-line tests name bin/..., so they run in build-san/tree, a
# tree of links to this one whose bin is build-san/bin.
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
SAN_ENV   := ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1 \
             UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp:print_suppressions=0
.PHONY: sanitize
sanitize: deps-check
	$(MAKE) CUDA=0 BUILD=build-san BIN=build-san/bin CFLAGS="$(CFLAGS) -O1 $(SAN_FLAGS)" \
	  build-san/bin/dhtrace build-san/bin/dhsim build-san/bin/dhsweep build-san/bin/dhcal build-san/bin/dhconfig \
	  $(patsubst tests/%.c,build-san/tests/%,$(TEST_SRC))
	@rm -rf build-san/tree && mkdir -p build-san/tree && \
	  for e in * .[!.]*; do case "$$e" in bin|build*|.git) ;; *) ln -s "$(CURDIR)/$$e" build-san/tree/;; esac; done && \
	  ln -s "$(CURDIR)/build-san/bin" build-san/tree/bin
	cd build-san/tree && CUDA=0 $(SAN_ENV) sh tests/run.sh $(patsubst tests/%.c,$(CURDIR)/build-san/tests/%,$(TEST_SRC))

# make fuzz: libFuzzer harnesses (tests/fuzz/) of the trace reader, the INI loader with --set and
# dhcal's CSV reader, built with clang (the one target that needs it; `make fuzz` installs it as
# root like the other packages). `make test` runs each for a few seconds when clang is there;
# FUZZ_SECONDS=N make fuzz-run runs each for N seconds on the committed corpus.
FUZZ_DEB_PKGS := clang libclang-rt-dev
CLANG     ?= $(shell command -v clang 2>/dev/null)
FUZZ_DIR  := build-fuzz
FUZZ_FLAGS := -O1 -g -std=c11 -D_GNU_SOURCE -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_NAMES := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BINS  := $(patsubst %,$(FUZZ_DIR)/fuzz_%,$(FUZZ_NAMES))
FUZZ_OBJ   := $(patsubst %.c,$(FUZZ_DIR)/%.o,$(foreach d,common traces sim analysis kernels,$(call lib_src,$(d))))
FUZZ_SECONDS ?= 60
.PHONY: fuzz fuzz-run fuzz-if-clang
fuzz:
	@$(MAKE) --no-print-directory deps-check DEB_PKGS="$(FUZZ_DEB_PKGS)"
	$(MAKE) CLANG=clang $(FUZZ_BINS)
fuzz-if-clang: $(if $(CLANG),$(FUZZ_BINS))
$(FUZZ_DIR)/%.o: %.c | deps-check
	@mkdir -p $(dir $@)
	$(CLANG) $(CPPFLAGS) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@
$(FUZZ_DIR)/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_OBJ)
	$(CLANG) $(CPPFLAGS) $(FUZZ_FLAGS) -fsanitize=fuzzer -o $@ $(filter %.c %.o,$^) $(LDLIBS)
fuzz-run: fuzz
	for n in $(FUZZ_NAMES); do mkdir -p $(FUZZ_DIR)/corpus/$$n && \
	  $(FUZZ_DIR)/fuzz_$$n -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 \
	    -artifact_prefix=$(FUZZ_DIR)/ $(FUZZ_DIR)/corpus/$$n tests/fuzz/corpus/$$n || exit 1; done

test: all $(TEST_BINS) fuzz-if-clang
	@sh tests/run.sh $(TEST_BINS)

bench: all
	sh bench/run.sh

# GPU replay of decode steps (kernels/replay/README.md): the kernels, and the simulator's hot
# buffer and trace generator on the host (nvcc, libinih, Random123; see the kernels above).
# Built with the other GPU tools so that CI (nvcc, no GPU) keeps it compiling.
replay: bin/dhreplay
bin/dhreplay: $(BUILD)/kernels/replay/dhreplay.cu.o $(BUILD)/kernels/libdhkbench.a $(BUILD)/kernels/libdhk.a \
              $(BUILD)/gpu/libreplayhost.a $(KGPU_C_OBJ)
	@mkdir -p bin
	$(NVCC) $(NVCCFLAGS) -o $@ $(filter %.o,$^) $(filter %.a,$^) -lcublasLt -lpthread -lm $(INIH_LIBS)

gpubench: bin/dhbench
	sh kernels/gpubench.sh measurements/local

# The figures need the CPU tools only (no GPU tools are built for them).
figs: deps-check bin/dhsim bin/dhsweep
	sh paper-figs/make-figs.sh

# `make -s print-VAR` prints a make variable (the tests ask it whether NCCL was found).
print-%:
	@echo '$($*)'

clean:
	rm -rf $(BUILD) bin build-san $(FUZZ_DIR)

-include $(shell find $(BUILD) $(if $(CLANG),$(FUZZ_DIR)) -name '*.d' 2>/dev/null)
