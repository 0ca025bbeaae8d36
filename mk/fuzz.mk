# Fuzzing (included by the Makefile): one libFuzzer driver per input parser, tests/fuzz/fuzz_<name>.cpp, built with
# clang and AddressSanitizer + UndefinedBehaviorSanitizer into $(BUILD)/fuzz/. Only the sources the parsers need
# are compiled (CPU only), so the sanitizer build stays small.
#
#   make fuzz SECONDS=N     runs each driver N seconds (default 60) on its corpus tests/fuzz/corpus/<name>/, one job
#                           at a time; new interesting inputs go to $(BUILD)/fuzz/corpus/<name>/ (not committed),
#                           a finding is written to $(BUILD)/fuzz/findings/<name>/ and stops the run
#   make fuzz-check         each driver for FUZZ_CHECK_SECONDS (3) on the committed corpus: what make test runs
#
# Rule checked by every driver (tests/fuzz/fuzz_common.h): success or a one-line hone::UserError; anything else
# (an internal check, a library exception, a crash, a sanitizer report, a hang past -timeout, an allocation past
# -malloc_limit_mb) is a finding. Every finding is fixed and its input kept in tests/fuzz/corpus/<name>/.

FUZZ_CXX      ?= clang++
FUZZ_DIR      := $(BUILD)/fuzz
FUZZ_NAMES    := $(sort $(patsubst tests/fuzz/fuzz_%.cpp,%,$(wildcard tests/fuzz/fuzz_*.cpp)))
FUZZ_BINS     := $(FUZZ_NAMES:%=$(FUZZ_DIR)/fuzz_%)
FUZZ_SAN      := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_CXXFLAGS := -std=c++20 -O1 -g $(FUZZ_SAN) -fsanitize=fuzzer-no-link -MMD -MP -Wno-unknown-pragmas \
                 -DHONE_VERSION=\"$(VERSION)\" -DHONE_CUDA=0 -Isrc -I. -Itests $(PKG_CFLAGS) $(MPI_CFLAGS)
FUZZ_LIB_SRC  := $(wildcard src/config/*.cpp) src/model/model_config.cpp src/model/safetensors.cpp src/model/gguf_file.cpp src/model/gguf_quants.cpp \
                 src/model/param_table.cpp src/tensor/tensor.cpp src/tensor/arena.cpp $(wildcard src/tokenizer/*.cpp) \
                 $(wildcard src/io/*.cpp) src/data/dataset_jsonl.cpp src/data/prompt_source.cpp \
                 src/rl/checkpoint_state.cpp src/rl/resume_deck.cpp src/runtime/activity.cpp src/runtime/error.cpp src/runtime/one_line.cpp src/runtime/log.cpp src/runtime/version.cpp \
                 src/runtime/runtime.cpp src/runtime/mpi_check.cpp
FUZZ_LIB_OBJS := $(FUZZ_LIB_SRC:%.cpp=$(FUZZ_DIR)/obj/%.o)
SECONDS       ?= 60
FUZZ_CHECK_SECONDS ?= 3
# Where the real Qwen3 tokenizer lives (the chat_text driver falls back to tests/fuzz/data/tokenizer without it).
FUZZ_TOKENIZER ?= $(firstword $(wildcard $(HONE_SHARED_DIR)/data/tokenizers/qwen3 ../shared/data/tokenizers/qwen3))
FUZZ_FLAGS    := -rss_limit_mb=2048 -malloc_limit_mb=1024 -timeout=20 -max_len=262144 -print_final_stats=1

.PHONY: fuzz fuzz-build fuzz-check
# Keep the objects (make would delete them as intermediates of the pattern rules).
.SECONDARY: $(FUZZ_LIB_OBJS) $(FUZZ_NAMES:%=$(FUZZ_DIR)/obj/tests/fuzz/fuzz_%.o)

fuzz-build: $(FUZZ_BINS)

$(FUZZ_DIR)/obj/%.o: %.cpp
	@mkdir -p $(@D)
	@echo "  FUZZCXX $<"
	$(Q)$(CCACHE) $(FUZZ_CXX) $(FUZZ_CXXFLAGS) -c $< -o $@

$(FUZZ_DIR)/fuzz_%: $(FUZZ_DIR)/obj/tests/fuzz/fuzz_%.o $(FUZZ_LIB_OBJS)
	@echo "  FUZZLD  $@"
	$(Q)$(FUZZ_CXX) $(FUZZ_SAN) -fsanitize=fuzzer -o $@ $^ $(STATIC_LDIRS) $(STATIC_LIBS) $(MPI_LIBS) -lpthread -ldl

# One driver at a time (-j1 inside): the fuzzing itself should leave the machine's other cores alone.
fuzz: $(FUZZ_BINS)
	@for n in $(FUZZ_NAMES); do \
	  mkdir -p $(FUZZ_DIR)/corpus/$$n $(FUZZ_DIR)/findings/$$n; \
	  echo "fuzz $$n: $(SECONDS) s"; \
	  HONE_FUZZ_TOKENIZER=$(FUZZ_TOKENIZER) $(FUZZ_DIR)/fuzz_$$n $(FUZZ_FLAGS) -max_total_time=$(SECONDS) \
	    -artifact_prefix=$(FUZZ_DIR)/findings/$$n/ $(FUZZ_DIR)/corpus/$$n tests/fuzz/corpus/$$n \
	    > $(FUZZ_DIR)/$$n.log 2>&1 || { tail -40 $(FUZZ_DIR)/$$n.log; echo "fuzz $$n: FINDING (see $(FUZZ_DIR)/findings/$$n)"; exit 1; }; \
	  grep -h "stat::number_of_executed_units\|stat::peak_rss_mb" $(FUZZ_DIR)/$$n.log | tr '\n' ' '; echo; \
	done

# Every committed input (seeds and past findings) once, then fuzzing for a few seconds from them (chat_text with the
# small tokenizer of tests/fuzz/data: the Qwen3 one takes longer to load than the check lasts). A finding is kept in
# $(FUZZ_DIR)/findings/<name>/ and, when small, printed in base64, so that a CI log alone can reproduce it.
fuzz-check: $(FUZZ_BINS)
	@for n in $(FUZZ_NAMES); do \
	  d=$$(mktemp -d); \
	  $(FUZZ_DIR)/fuzz_$$n $(FUZZ_FLAGS) -max_total_time=$(FUZZ_CHECK_SECONDS) \
	    -artifact_prefix=$$d/ $$d tests/fuzz/corpus/$$n > $$d.log 2>&1 \
	    && echo "fuzz $$n: ok ($$(grep -ho 'number_of_executed_units: [0-9]*' $$d.log | grep -o '[0-9]*') runs)" \
	    || { tail -30 $$d.log; mkdir -p $(FUZZ_DIR)/findings/$$n; \
	         for a in $$d/crash-* $$d/leak-* $$d/timeout-* $$d/oom-* $$d/slow-unit-*; do [ -f "$$a" ] || continue; \
	           cp "$$a" $(FUZZ_DIR)/findings/$$n/; echo "fuzz $$n: finding kept in $(FUZZ_DIR)/findings/$$n/$$(basename $$a)"; \
	           [ $$(stat -c %s "$$a") -le 8192 ] && { echo "its bytes (base64):"; base64 -w 0 "$$a"; echo; }; \
	         done; echo "fuzz $$n: FAILED"; rm -rf $$d $$d.log; exit 1; }; \
	  rm -rf $$d $$d.log; \
	done

-include $(shell find $(FUZZ_DIR)/obj -name '*.d' 2>/dev/null)
