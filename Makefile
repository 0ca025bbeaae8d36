# hone build: one C++20/CUDA executable (build/hone) and its test suites.
#
#   make            build build/hone (CUDA on when nvcc is found at CUDA_HOME; CUDA=0 forces a CPU-only build)
#   make deps       install what this machine lacks (Debian packages, cuDNN frontend headers)
#   make run        deps if missing, build, run input/demo.toml on the CPU
#   make test       deps if missing, build, run every suite; last line: N passed, N failed, N skipped
#   make test-gpu   the GPU suite alone (skipped without a GPU)
#   make fuzz       the parsers' fuzz drivers, SECONDS=N each (mk/fuzz.mk); make test runs them 3 s each
#   make soak       the CPU demo for 2,000 steps killed with SIGKILL 20 times and resumed, against one left alone
#                   (mk/soak.py; SOAK_STEPS, SOAK_KILLS, SOAK_SEED; not part of make test)
#   make bundle     dist/hone-<version>-linux-x86_64/: bin/hone, an Open MPI for machines without one, env.sh;
#                   built in its own folder (build-bundle) for every GPU of BUNDLE_SM with PTX for the newest
#   make clean
#
# Knobs: CUDA=0|1, SM=90a (GPU architecture; SMS="80 86 ..." several at once, PTX for the last), CUDA_HOME=/usr/local/cuda, BUILD=build, DEBUG=1 (-O0), V=1 (echo commands),
#        SANITIZE=address,undefined (a sanitizer build, CPU only, in its own folder build-address-undefined; there
#        `make test` runs the CPU suites unit and mpi, doc/runtime.md "Sanitizer build").

comma := ,
ifneq ($(SANITIZE),)
  BUILD ?= build-$(subst $(comma),-,$(SANITIZE))
  CUDA  := 0
endif
BUILD     ?= build
CUDA_HOME ?= /usr/local/cuda
NVCC      := $(CUDA_HOME)/bin/nvcc
SM        ?= 90a
VERSION   := $(shell cat VERSION 2>/dev/null || echo 0.0.0)

ifeq ($(origin CUDA), undefined)
  CUDA := $(if $(wildcard $(NVCC)),1,0)
endif

SM_ALLOWED := 80 86 89 90 90a 100 100a 120
ifeq ($(filter $(SM),$(SM_ALLOWED)),)
  $(error SM=$(SM) is not one of: $(SM_ALLOWED))
endif
# The bundle's GPUs (doc/building.md, "Bundles"): A100, A10/A40/L4 class, L40S/RTX 4090 class, H100/H200, B200, with
# PTX of the newest for GPUs after them (the driver compiles it). The developer build keeps one (SM) so it stays fast.
BUNDLE_SM := 80 86 89 90a 100
SMS ?= $(SM)
ifneq ($(filter-out $(SM_ALLOWED),$(SMS)),)
  $(error SMS=$(SMS): each must be one of: $(SM_ALLOWED))
endif
# The CUDA major version the binary is built against: the bundle's env.sh states it with the driver it needs.
CUDA_MAJOR := $(shell $(NVCC) --version 2>/dev/null | sed -n 's/.*release \([0-9]*\)\..*/\1/p')

ifneq ($(V),1)
  Q := @
endif

MAKEFLAGS += --no-builtin-rules
ifeq ($(filter -j%,$(MAKEFLAGS)),)
  MAKEFLAGS += -j$(shell nproc 2>/dev/null || echo 2)
endif

CCACHE := $(shell command -v ccache 2>/dev/null)
CXX    := $(CCACHE) g++
export CCACHE_BASEDIR := $(CURDIR)
# Objects are shared between checkouts of the same sources (a fresh clone, a worktree): the compile folder is not
# part of the key (debug info then names the folder of the first compile; paths inside are relative to it).
export CCACHE_NOHASHDIR := 1

# ---- dependencies found through pkg-config / mpicxx -------------------------------------------------------
PKGS := tomlplusplus hdf5 libpcre2-8 libutf8proc openblas
# Targets that install dependencies first skip this check; the recursive make they start does it.
NODEP_GOALS := deps run test test-gpu clean
ifneq ($(or $(if $(MAKECMDGOALS),,all),$(filter-out $(NODEP_GOALS),$(MAKECMDGOALS))),)
  MISSING_PKGS := $(strip $(foreach p,$(PKGS),$(if $(shell pkg-config --exists $(p) && echo y),,$(p))))
  ifneq ($(MISSING_PKGS),)
    $(error missing libraries: $(MISSING_PKGS); run 'make deps' first)
  endif
endif
# Third-party include folders are -isystem so that -Wall -Wextra speak of our code only. TOML++ is compiled into
# hone (src/config/toml_impl.cpp), not used as Debian's shared library: no TOML_SHARED_LIB.
PKG_CFLAGS := $(filter-out -DTOML_SHARED_LIB=1,$(patsubst -I%,-isystem %,$(shell pkg-config --cflags $(PKGS) 2>/dev/null)))
MPI_CFLAGS := $(patsubst -I%,-isystem %,$(shell mpicc --showme:compile 2>/dev/null)) -DOMPI_SKIP_MPICXX=1
MPI_LIBS   := $(shell mpicc --showme:link 2>/dev/null)

# ---- one binary (doc/building.md, "One binary") -----------------------------------------------------------
# Every library Debian ships as a static archive is linked in, so that at run time hone needs only glibc, MPI and
# the CUDA libraries: HDF5 with the filters it calls (szip/aec, zlib; its network drivers are never referenced, so
# libcurl, TLS, Kerberos and LDAP stay out), PCRE2, utf8proc, OpenBLAS (with the Fortran runtime its LAPACK part
# may pull), libgomp, libstdc++ and libgcc. MPI stays dynamic on purpose (the site's, matching its launcher and
# fabric), and so do the CUDA libraries (the site's driver and toolkit; cudart is static). glibc stays dynamic:
# tests/unit/test_one_binary.cpp checks that hone needs no GLIBC_ version above 2.34.
STATIC_LDIRS := $(shell pkg-config --libs-only-L hdf5 openblas 2>/dev/null)
STATIC_LIBS  := -Wl,-Bstatic -lhdf5 -lsz -laec -lz -lpcre2-8 -lutf8proc -lopenblas -lgfortran -lquadmath -Wl,-Bdynamic
GOMP_STATIC  := $(shell g++ -print-file-name=libgomp.a)

# ---- flags ------------------------------------------------------------------------------------------------
OPT      := $(if $(filter 1,$(DEBUG)),-O0,-O2)
DEFS     := -DHONE_VERSION=\"$(VERSION)\" -DHONE_CUDA=$(CUDA) -DBOOST_TEST_DYN_LINK
INCLUDES := -Isrc -Iinclude -I. -Itests
CXXFLAGS := -std=c++20 $(OPT) -g -Wall -Wextra -fopenmp -MMD -MP $(DEFS) $(INCLUDES)
HOSTDEP_CFLAGS := $(PKG_CFLAGS) $(MPI_CFLAGS)
# The test suites link Boost.Test's shared library, which brings its own libstdc++: they keep libstdc++ dynamic
# (one copy of it in the process); hone and the test programs link it statically, with the one reference it makes
# to a symbol newer than glibc 2.34 (arc4random) wrapped (src/runtime/glibc_compat.cpp). libgcc stays the system's
# libgcc_s: its static unwinder calls _dl_find_object (glibc 2.35).
LDLIBS   := $(STATIC_LDIRS) $(STATIC_LIBS) $(MPI_LIBS) $(GOMP_STATIC) -lpthread -ldl -lm
STATIC_RUNTIME := -static-libstdc++ -Wl,--wrap=arc4random

# Every finding stops the program (-fno-sanitize-recover), so a test that meets one fails.
TEST_SUITES := unit mpi slurm gpu
ifneq ($(SANITIZE),)
  SAN_FLAGS := -fsanitize=$(SANITIZE) -fno-sanitize-recover=all -fno-omit-frame-pointer
  # -O1 -g1 (line tables for the reports): half the compile time of -O2 -g, as the sanitizers' own advice.
  CXXFLAGS  += $(SAN_FLAGS) -O1 -g1
  LDLIBS    += $(SAN_FLAGS)
  TEST_SUITES := unit mpi
  # Children (hone under mpirun, the test programs) inherit these. Open MPI's own allocations at exit are not ours:
  # the slow unwinder follows their stacks through the MPI libraries (built without frame pointers), where the
  # suppressions find them (the fast one stops at an unknown frame).
  SAN_ENV := ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:strict_string_checks=1:fast_unwind_on_malloc=0 \
             LSAN_OPTIONS=suppressions=$(CURDIR)/mk/lsan.supp:print_suppressions=0 \
             UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
endif

CUDNN_FE_INC ?= $(BUILD)/deps/cudnn-frontend/include
ifeq ($(CUDA),1)
  GENCODE   := $(foreach s,$(SMS),-gencode=arch=compute_$(s),code=sm_$(s)) \
               $(if $(word 2,$(SMS)),-gencode=arch=compute_$(lastword $(SMS))$(comma)code=compute_$(lastword $(SMS)))
  NVCCFLAGS := -std=c++20 $(OPT) -lineinfo $(GENCODE) -MMD -MP $(DEFS) -Isrc -I. -Itests \
               --expt-relaxed-constexpr -Xcompiler=-Wall,-Wextra
  CUDA_CFLAGS := -isystem $(CUDA_HOME)/include -isystem $(CUDNN_FE_INC)
  LDLIBS += -L$(CUDA_HOME)/lib64 -lcudart_static -lcublasLt -lcublas -lcudnn -lnvrtc -lnccl -lrt
endif

# ---- sources ----------------------------------------------------------------------------------------------
SRC_CPP  := $(shell find src -name '*.cpp' | sort)
MAIN_OBJ := $(BUILD)/obj/src/main.o
ifeq ($(CUDA),1)
  CUDA_CPP := $(shell find cuda -name '*.cpp' 2>/dev/null | sort)
  CUDA_CU  := $(shell find cuda -name '*.cu' 2>/dev/null | sort)
endif
LIB_OBJS := $(filter-out $(MAIN_OBJ),$(SRC_CPP:%.cpp=$(BUILD)/obj/%.o)) \
            $(CUDA_CPP:%.cpp=$(BUILD)/obj/%.o) $(CUDA_CU:%.cu=$(BUILD)/obj/%.cu.o)

UNIT_SRC := $(sort $(wildcard tests/unit/*.cpp) $(wildcard tests/common/*.cpp))
MPI_SRC  := $(sort $(wildcard tests/mpi/*.cpp) $(wildcard tests/common/*.cpp))
GPU_SRC  := $(sort $(wildcard tests/gpu/*.cpp) $(wildcard tests/common/*.cpp))
SLURM_SRC := $(sort $(wildcard tests/slurm/*.cpp) $(wildcard tests/common/*.cpp))
GPU_CU   := $(if $(filter 1,$(CUDA)),$(sort $(wildcard tests/gpu/*.cu)))
PROG_SRC := $(sort $(wildcard tests/programs/*.cpp))

HONE      := $(BUILD)/hone
UNIT_BIN  := $(BUILD)/tests/unit_tests
MPI_BIN   := $(BUILD)/tests/mpi_tests
GPU_BIN   := $(BUILD)/tests/gpu_tests
SLURM_BIN := $(BUILD)/tests/slurm_tests
PROG_BINS := $(PROG_SRC:tests/programs/%.cpp=$(BUILD)/tests/programs/%)
# The example reward plug-in (examples/reward/exact_match.c), a C shared library against include/hone only.
EXAMPLE_PLUGIN := $(BUILD)/examples/libexact_match_reward.so
TEST_BINS := $(UNIT_BIN) $(MPI_BIN) $(GPU_BIN) $(SLURM_BIN) $(PROG_BINS) $(EXAMPLE_PLUGIN)

.PHONY: all deps run test test-gpu tests bundle clean _run _test _test-gpu doc-deck soak

all: $(HONE)

# The git commit is baked into one object only; its stamp changes only when the commit does.
GIT_COMMIT := $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)$(shell git diff --quiet HEAD 2>/dev/null || echo -dirty)
$(BUILD)/gen/commit.stamp: FORCE
	@mkdir -p $(@D); echo '$(GIT_COMMIT)' | cmp -s - $@ || echo '$(GIT_COMMIT)' > $@
$(BUILD)/obj/src/runtime/version.o: $(BUILD)/gen/commit.stamp
$(BUILD)/obj/src/runtime/version.o: OBJ_DEFS = -DHONE_GIT_COMMIT=\"$(GIT_COMMIT)\"
FORCE:

$(HONE): $(MAIN_OBJ) $(LIB_OBJS)
	@echo "  LINK    $@"
	$(Q)$(CXX) -o $@ $^ $(LDLIBS) $(STATIC_RUNTIME)

$(BUILD)/obj/%.o: %.cpp
	@mkdir -p $(@D)
	@echo "  CXX     $<"
	$(Q)$(CXX) $(CXXFLAGS) $(OBJ_DEFS) $(HOSTDEP_CFLAGS) $(CUDA_CFLAGS) -c $< -o $@

# .cu files see only CUDA headers and our plain headers: no TOML++, HDF5, MPI, Boost or JSON include paths.
$(BUILD)/obj/%.cu.o: %.cu
	@mkdir -p $(@D)
	@echo "  NVCC    $<"
	$(Q)$(CCACHE) $(NVCC) $(NVCCFLAGS) -c $< -o $@

tests: $(TEST_BINS)

$(UNIT_BIN): $(UNIT_SRC:%.cpp=$(BUILD)/obj/%.o) $(LIB_OBJS)
	@mkdir -p $(@D); echo "  LINK    $@"
	$(Q)$(CXX) -o $@ $^ $(LDLIBS) -lboost_unit_test_framework

$(MPI_BIN): $(MPI_SRC:%.cpp=$(BUILD)/obj/%.o) $(LIB_OBJS)
	@mkdir -p $(@D); echo "  LINK    $@"
	$(Q)$(CXX) -o $@ $^ $(LDLIBS) -lboost_unit_test_framework

# The Slurm suite: jobs/*.sbatch submitted to a private Slurm started by tests/slurm/cluster.sh (skips without it).
$(SLURM_BIN): $(SLURM_SRC:%.cpp=$(BUILD)/obj/%.o) $(LIB_OBJS)
	@mkdir -p $(@D); echo "  LINK    $@"
	$(Q)$(CXX) -o $@ $^ $(LDLIBS) -lboost_unit_test_framework

$(GPU_BIN): $(GPU_SRC:%.cpp=$(BUILD)/obj/%.o) $(GPU_CU:%.cu=$(BUILD)/obj/%.cu.o) $(LIB_OBJS)
	@mkdir -p $(@D); echo "  LINK    $@"
	$(Q)$(CXX) -o $@ $^ $(LDLIBS) -lboost_unit_test_framework

$(EXAMPLE_PLUGIN): examples/reward/exact_match.c include/hone/reward_plugin.h
	@mkdir -p $(@D); echo "  CC      $@"
	$(Q)cc -std=c11 -O2 -Wall -Wextra -Werror -fPIC -shared -Iinclude -o $@ $<

# Keep the test programs' objects (make would delete them as intermediates, after the test summary line).
.SECONDARY: $(PROG_SRC:%.cpp=$(BUILD)/obj/%.o)
$(BUILD)/tests/programs/%: $(BUILD)/obj/tests/programs/%.o $(LIB_OBJS)
	@mkdir -p $(@D); echo "  LINK    $@"
	$(Q)$(CXX) -o $@ $^ $(LDLIBS) $(STATIC_RUNTIME)

# ---- user-facing targets ----------------------------------------------------------------------------------
deps:
	@bash mk/deps.sh

run:
	@bash mk/deps.sh --if-missing
	@$(MAKE) --no-print-directory _run
_run: $(HONE)
	$(HONE) run input/demo.toml

test:
	@bash mk/deps.sh --if-missing
	@$(MAKE) --no-print-directory _test
ifeq ($(SANITIZE),)
_test: $(HONE) $(TEST_BINS) $(FUZZ_BINS)
	@$(MAKE) --no-print-directory fuzz-check
	@HONE_BUILD=$(BUILD) bash mk/run-tests.sh $(TEST_SUITES)
else
_test: $(HONE) $(UNIT_BIN) $(MPI_BIN) $(PROG_BINS) $(EXAMPLE_PLUGIN)
	@HONE_BUILD=$(BUILD) $(SAN_ENV) bash mk/run-tests.sh $(TEST_SUITES)
endif

test-gpu:
	@bash mk/deps.sh --if-missing
	@$(MAKE) --no-print-directory _test-gpu
_test-gpu: $(HONE) $(GPU_BIN)
	@HONE_BUILD=$(BUILD) bash mk/run-tests.sh gpu

SOAK_STEPS ?= 2000
SOAK_KILLS ?= 20
SOAK_SEED  ?= 2026
soak: $(HONE)
	/usr/bin/python3 mk/soak.py --hone $(HONE) --dir $(BUILD)/soak --steps $(SOAK_STEPS) --kills $(SOAK_KILLS) \
	  --seed $(SOAK_SEED)

# The bundle is built in its own folder for every architecture of BUNDLE_SM (a CPU-only machine builds it CPU-only).
# With CUDA the GPU suite and the GPU programs it carries are built there too; BUNDLE_SM=90a makes a quick one-GPU
# bundle for a test machine.
BUNDLE_BUILD := build-bundle
BUNDLE_TARGETS := $(BUNDLE_BUILD)/hone $(if $(filter 1,$(CUDA)),$(BUNDLE_BUILD)/tests/gpu_tests \
                  $(addprefix $(BUNDLE_BUILD)/tests/programs/,bench_decode_attention bench_sampler bench_gemm_algos \
                  bench_moe_decode nccl_check))
BUNDLE_DIST := dist/hone-$(VERSION)-linux-$(shell uname -m)
bundle:
	@$(MAKE) --no-print-directory BUILD=$(BUNDLE_BUILD) SMS="$(BUNDLE_SM)" CUDNN_FE_INC=$(CUDNN_FE_INC) $(BUNDLE_TARGETS)
	@HONE_CUDA_MAJOR=$(if $(filter 1,$(CUDA)),$(CUDA_MAJOR)) HONE_GPU_ARCHS="$(if $(filter 1,$(CUDA)),$(BUNDLE_SM))" \
	  bash mk/bundle.sh $(BUNDLE_BUILD)/hone $(VERSION)
ifeq ($(CUDA),1)
# Every architecture's machine code in the bundle's binaries, and PTX of the newest (exit 3: no cuobjdump here, said
# and not an error: the bundle itself is complete).
	@bash mk/check-bundle-archs.sh "$(BUNDLE_SM)" $(BUNDLE_DIST)/bin/hone $(BUNDLE_DIST)/bin/gpu_tests || [ $$? -eq 3 ]
endif

doc-deck: $(HONE)
	$(HONE) help deck --markdown > doc/deck.md

clean:
	rm -rf $(BUILD) dist

include mk/fuzz.mk

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
