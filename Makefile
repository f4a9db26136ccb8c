# Adaptive DHiSparse: trace-driven simulator + reference CUDA kernels.
#
#   make          build bin/dhtrace, bin/dhsim, bin/dhsweep, bin/dhcal (and bin/dhbench when nvcc exists)
#   make run      the built-in default: GLM-5.3, 100K context, concurrency 128, all policies
#   make test     unit and differential tests (no GPU needed); ends with "N passed, N failed"
#   make bench    CPU benchmarks of the trace tools and the simulator (figures in bench/)
#   make gpubench kernel microbenchmarks on the local CUDA GPU (bin/dhbench)
#   make figs     regenerate paper-figs/ with gnuplot
#
# Layering: common/ <- traces/ <- sim/ <- analysis/, sweep/.  kernels/ uses common/ and traces/ only.
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
CUDA_ARCH ?= sm_90
NVCCFLAGS ?= -O3 -std=c++17 -arch=$(CUDA_ARCH) -lineinfo -Xcompiler -Wall
ifeq ($(CUDA),auto)
  BUILD_CUDA := $(if $(NVCC),1,0)
else
  BUILD_CUDA := $(CUDA)
endif

BUILD := build
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

TOOLS := bin/dhtrace bin/dhsim bin/dhsweep bin/dhcal
TEST_SRC  := $(wildcard tests/test_*.c)
TEST_BINS := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRC))

# kernels/*_wgmma.cu use wgmma, which only the sm_90a target has; the rest stays sm_90.
CU_SM90A := kernels/attention_wgmma.cu kernels/indexer_wgmma.cu
CU_SRC := $(filter-out $(CU_SM90A),$(wildcard kernels/*.cu))
ifeq ($(BUILD_CUDA),1)
  GPU_TOOLS := bin/dhbench bin/dhreplay
endif

# Expert-parallel all-to-all benchmark (kernels/a2a/README.md). NCCL is looked for under
# NCCL_HOME when set, else beside nvcc, under /usr/local/cuda*, and in the Debian multiarch
# directory (libnccl-dev). Without NCCL, bin/dha2a is skipped with a note: it is the one tool
# that needs it, and a machine without NCCL has no multi-GPU all-to-all to measure anyway.
NCCL_DIRS := $(if $(NCCL_HOME),$(NCCL_HOME),$(patsubst %/bin/nvcc,%,$(NVCC)) /usr/local/cuda /usr/local/cuda-* /usr)
NCCL_LIB  := $(firstword $(foreach d,$(NCCL_DIRS),$(wildcard $(d)/lib64/libnccl.so $(d)/lib/libnccl.so \
               $(d)/lib/x86_64-linux-gnu/libnccl.so $(d)/lib/aarch64-linux-gnu/libnccl.so)))
NCCL_INC  := $(firstword $(foreach d,$(NCCL_DIRS),$(patsubst %/nccl.h,%,$(wildcard $(d)/include/nccl.h))))
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

bin/dhtrace: $(BUILD)/traces/dhtrace.o $(TRACES_OBJ) $(COMMON_OBJ)
	@mkdir -p bin
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)
bin/dhsim: $(BUILD)/sim/dhsim.o $(SIM_OBJ) $(TRACES_OBJ) $(COMMON_OBJ)
	@mkdir -p bin
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)
# Sweeps (sweep/): dhsweep is compiled and linked with mpicc when it is found (OpenMPI,
# libopenmpi-dev), so that `mpirun -n N bin/dhsweep run FILE` shares the points between
# ranks; without it dhsweep runs on threads alone (dhsweep --version says which). MPICC is
# looked up when the rule runs, after deps-check has installed the packages. The commit
# (git describe) is a -D define; build/commit.stamp changes only when it does, so the tool
# is recompiled then and only then.
MPICC     ?= $(shell command -v mpicc 2>/dev/null)
DH_COMMIT := $(shell git describe --always --dirty 2>/dev/null || echo unknown)
.PHONY: FORCE
$(BUILD)/commit.stamp: FORCE
	@mkdir -p $(BUILD); echo '$(DH_COMMIT)' | cmp -s - $@ || echo '$(DH_COMMIT)' > $@
$(BUILD)/sweep/dhsweep.o: sweep/dhsweep.c $(BUILD)/commit.stamp | deps-check
	@mkdir -p $(dir $@)
	$(if $(MPICC),$(MPICC) -DDH_MPI,$(CC)) $(CPPFLAGS) $(CFLAGS) -DDH_COMMIT='"$(DH_COMMIT)"' -c $< -o $@
bin/dhsweep: $(BUILD)/sweep/dhsweep.o $(SWEEP_OBJ) $(SIM_OBJ) $(TRACES_OBJ) $(COMMON_OBJ)
	@mkdir -p bin
	$(if $(MPICC),$(MPICC),$(CC)) $(CFLAGS) -o $@ $^ $(LDLIBS)
bin/dhcal: $(BUILD)/analysis/dhcal.o $(LIBS_OBJ)
	@mkdir -p bin
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

# Kernels: one nvcc link of every .cu file; CPU references (kernels/*.c) are plain C and tested in CI.
# dhbench needs only the CUDA toolkit and libc (it runs where no Debian package is installed), so
# it links common/dh_err.o alone; kernels/build.sh builds it with nvcc and cc only.
CU_SM90A_OBJ := $(patsubst %.cu,$(BUILD)/%.cu.o,$(CU_SM90A))
$(BUILD)/kernels/%_wgmma.cu.o: kernels/%_wgmma.cu $(wildcard kernels/*.cuh kernels/*.h)
	@mkdir -p $(dir $@)
	$(NVCC) $(filter-out -arch=%,$(NVCCFLAGS)) -gencode=arch=compute_90a,code=sm_90a -I. -c $< -o $@
bin/dhbench: $(CU_SRC) $(CU_SM90A_OBJ) $(wildcard kernels/*.cuh kernels/*.h) $(KREF_OBJ) $(BUILD)/common/dh_err.o
	@mkdir -p bin
	$(NVCC) $(NVCCFLAGS) -I. -o $@ $(CU_SRC) $(CU_SM90A_OBJ) $(KREF_OBJ) $(BUILD)/common/dh_err.o -lcublasLt -lpthread

bin/dha2a: kernels/a2a/dha2a.cu kernels/a2a/a2a_plan.h $(BUILD)/kernels/a2a/a2a_plan.o $(BUILD)/common/dh_err.o
	@test -n "$(NCCL_LIB)" -a -n "$(NCCL_INC)" || { echo "bin/dha2a: NCCL not found (libnccl.so and nccl.h); set NCCL_HOME"; exit 1; }
	@mkdir -p bin
	$(NVCC) $(NVCCFLAGS) -I. -I$(NCCL_INC) -o $@ $< $(BUILD)/kernels/a2a/a2a_plan.o \
	  $(BUILD)/common/dh_err.o -L$(dir $(NCCL_LIB)) -l:$(notdir $(NCCL_LIB)) -Xlinker -rpath=$(dir $(NCCL_LIB))

$(BUILD)/tests/%: tests/%.c $(LIBS_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $^ $(LDLIBS)

# Benchmark and calibration programs of the traces library (bench/*.c).
BENCH_BINS := $(patsubst bench/%.c,$(BUILD)/bench/%,$(wildcard bench/*.c))
$(BUILD)/bench/%: bench/%.c $(TRACES_OBJ) $(COMMON_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $^ $(LDLIBS)

run: all
	./bin/dhsim --compare

test: all $(TEST_BINS)
	@sh tests/run.sh $(TEST_BINS)

bench: all
	sh bench/run.sh

# GPU replay of decode steps (kernels/replay/README.md): nvcc, libinih, Random123.
# Built with the other GPU tools so that CI (nvcc, no GPU) keeps it compiling.
replay: bin/dhreplay
bin/dhreplay: kernels/replay/dhreplay.cu kernels/replay/rp_host.c $(wildcard kernels/*.cu kernels/*.cuh kernels/*.h) \
              sim/hotbuf.c sim/model.c sim/pol.c sim/belady.c sim/spec.c sim/specrun.c sim/union.c sim/hw.c sim/step.c \
              sim/res.c sim/evq.c traces/gen.c traces/sel.c common/cfg.c common/dh_err.c common/mem.c common/path.c kernels/kref.c
	sh kernels/replay/build.sh

gpubench: bin/dhbench
	sh kernels/gpubench.sh measurements/local

figs: all
	sh paper-figs/make-figs.sh

# `make -s print-VAR` prints a make variable (the tests ask it whether NCCL was found).
print-%:
	@echo '$($*)'

clean:
	rm -rf $(BUILD) bin

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
