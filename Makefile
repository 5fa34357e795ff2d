# make            build the library and every example (optimized, -Wall -Wextra, OpenMP when the
#                 compiler has it)
# make test       build and run the doctest suite (fetches doctest's header if it is missing)
# make bench      build and run the benchmarks in bench/
# make sanitize   run the test suite under AddressSanitizer + UndefinedBehaviorSanitizer
# make OPENMP=0 test   the same suite built without OpenMP (serial; in build-noomp/)
# make fuzz / make fuzz-run   libFuzzer targets (needs clang), see tests/fuzz/README.md
# make figures   redraw every figure of docs/ from the current code (about 12 minutes; docs/figures/)
# make figures-reproduce   make figures, then fail if a figure differs from the committed one
# make figures-check   render every SVG of docs/ (needs rsvg-convert, Debian's librsvg2-bin)
# make docs-check     every link in README.md and docs/ resolves, every code name and quoted line exists
# make lesson-lines   the lines a learner's debugger walk through one plain step and one greedy
#                 decode executes, per file (bench/lesson_lines.sh: a -O0 --coverage build, 2 minutes)
# make mutate    plant each mistake of tests/mutations.txt in turn and report those the suite
#                 misses (a developer's check of the tests; 7 minutes on 2 cores; tests/mutate.sh)
# make clean
#
# Variables (make VAR=value ...; README says more):
#   CXX=clang++        the compiler (default g++); give each compiler its own BUILD
#   BUILD=dir          where objects go (default build/, build-noomp/ with OPENMP=0). The examples
#                      of build/ are linked into examples/, those of any other BUILD into dir/bin/
#   ARCH=-march=...    the instruction set; default: this CPU's, none for a cross compiler
#   OPENMP=0 or 1      without or with OpenMP; default: 1 when $(CXX) compiles and links with it
#   OMP_CXXFLAGS, OMP_LDFLAGS   how to turn OpenMP on (default -fopenmp), e.g. for Apple clang
#   EXTRA_CXXFLAGS     added to every compile: -Werror (CI), -I/path/to/include, ...
#   OPT                optimization flags (default -O3)
#   TEST_SRCS="tests/main.cpp tests/test_gemm.cpp ..."   build the suite from these files only
#   TEST_ARGS="-tc=..."   options for the suite's doctest run (make test), e.g. -tc="docs/06*" for one case
CXX      ?= g++
OPT      ?= -O3
EXTRA_CXXFLAGS ?=

# ARCH unset: this CPU's instruction set, -march=native, or -mcpu=native where the compiler spells
# it so (some ARM compilers), whichever compiles cleanly first; nothing when neither does, or when
# $(CXX) builds for another CPU than this one (a cross compiler: its -dumpmachine target is not
# `uname -m`), whose binaries must run elsewhere. ARCH= (empty) builds for the compiler's baseline.
cpu_name = $(subst amd64,x86_64,$(subst arm64,aarch64,$(1)))
ifeq ($(origin ARCH),undefined)
ifeq ($(call cpu_name,$(firstword $(subst -, ,$(shell $(CXX) -dumpmachine)))),$(call cpu_name,$(shell uname -m)))
ARCH := $(shell for f in -march=native -mcpu=native; do \
          echo 'int main() {}' | $(CXX) -Werror $$f -x c++ -c - -o /dev/null 2>/dev/null && { echo $$f; break; }; done)
else
ARCH :=
endif
endif

# OpenMP: OMP_CXXFLAGS and OMP_LDFLAGS say how to turn it on. OPENMP unset: 1 when $(CXX) compiles
# and links a call into OpenMP's runtime with them, else 0, and make says so in one line. With
# OPENMP=0 the pragmas are ignored (and not warned about), every loop runs on one thread, with the
# same results; <omp.h> is never included (autograd/kernels/threads.h).
OMP_CXXFLAGS ?= -fopenmp
OMP_LDFLAGS  ?= -fopenmp
ifeq ($(origin OPENMP),undefined)
OPENMP := $(shell echo 'int main() { return omp_get_max_threads(); }' | \
            $(CXX) $(OMP_CXXFLAGS) -include omp.h -x c++ - $(OMP_LDFLAGS) -o /dev/null 2>/dev/null && echo 1 || echo 0)
ifeq ($(OPENMP),0)
$(info make: $(CXX) has no OpenMP: building serially (OPENMP=0); see README)
endif
else ifeq ($(OPENMP),0)
# asked for on a compiler that has OpenMP: kept apart from its build
BUILD    ?= build-noomp
endif
BUILD    ?= build
ifeq ($(OPENMP),0)
omp_cxxflags := -Wno-unknown-pragmas
omp_ldflags  :=
else
omp_cxxflags := $(OMP_CXXFLAGS)
omp_ldflags  := $(OMP_LDFLAGS)
endif

# clang warns when a `simd` loop does not vectorize (gelu's backward calls erf, which has no
# vector version): a missed speed-up, not a mistake, so not a warning here.
warnings := -Wall -Wextra $(if $(findstring clang,$(shell $(CXX) --version 2>/dev/null)),-Wno-pass-failed)
# -fno-math-errno: sqrt never sets errno, so loops calling it (Adam, LayerNorm) can vectorize
CXXFLAGS ?= $(strip -std=c++20 $(OPT) $(ARCH) -fno-math-errno $(omp_cxxflags) $(warnings) $(EXTRA_CXXFLAGS) -I. -MMD -MP)
LDFLAGS  ?= $(omp_ldflags)

# Build on every core by default; a -j on the command line (make -j1) takes precedence.
NPROC    := $(shell nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
MAKEFLAGS += -j$(NPROC)

# The framework: every .cpp under these folders goes into one static library.
LIB_SRCS := $(wildcard autograd/*.cpp autograd/*/*.cpp nn/*.cpp optim/*.cpp models/*.cpp)
# What the examples use besides the library: argument parsing, progress, SVG (common/), their
# data (data/), what they do with a trained model (eval/), and each one's flags (options/).
EXLIB_SRCS := $(wildcard examples/common/*.cpp examples/data/*.cpp examples/eval/*.cpp examples/options/*.cpp)
# The examples of build/ are linked into examples/; any other build's into $(BUILD)/bin/, so a
# second build (another compiler, a cross compiler, a sanitizer) never overwrites them.
BIN := $(if $(filter build,$(BUILD)),examples,$(BUILD)/bin)
EXAMPLES := $(patsubst examples/%.cpp,$(BIN)/%,$(wildcard examples/*.cpp))
TEST_SRCS := $(wildcard tests/*.cpp)
BENCHES := $(patsubst bench/%.cpp,$(BUILD)/bench/%,$(wildcard bench/*.cpp))

LIB   := $(BUILD)/libtransformer.a
EXLIB := $(BUILD)/libexamples.a
TESTS := $(BUILD)/tests/run_tests

all: $(LIB) $(EXLIB) $(EXAMPLES)

$(BUILD)/%.o: %.cpp Makefile
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) $(TEST_INCLUDES) -c $< -o $@

$(LIB): $(LIB_SRCS:%.cpp=$(BUILD)/%.o)
	@rm -f $@
	ar rcs $@ $^

$(EXLIB): $(EXLIB_SRCS:%.cpp=$(BUILD)/%.o)
	@rm -f $@
	ar rcs $@ $^

$(BIN)/%: $(BUILD)/examples/%.o $(EXLIB) $(LIB)
	@mkdir -p $(dir $@)
	$(CXX) $< $(EXLIB) $(LIB) $(LDFLAGS) -o $@

# make_figures: its main, plus one file per group of figures in examples/figures/.
FIGURE_SRCS := $(wildcard examples/figures/*.cpp)
$(BIN)/make_figures: $(BUILD)/examples/make_figures.o $(FIGURE_SRCS:%.cpp=$(BUILD)/%.o) $(EXLIB) $(LIB)
	@mkdir -p $(dir $@)
	$(CXX) $(filter %.o,$^) $(EXLIB) $(LIB) $(LDFLAGS) -o $@

# The tests of the examples' flags (tests/test_example_flags_*.cpp) run this build's example
# programs: the suite is linked after them when it has those tests.
EXAMPLE_FLAG_TESTS := $(filter tests/test_example_flags_%,$(TEST_SRCS))
$(TESTS): $(TEST_SRCS:%.cpp=$(BUILD)/%.o) $(EXLIB) $(LIB) $(if $(EXAMPLE_FLAG_TESTS),$(EXAMPLES))
	$(CXX) $(filter %.o,$^) $(EXLIB) $(LIB) $(LDFLAGS) -o $@

# The tests need doctest's single header: the system's if the compiler finds it, else Debian's
# package fetched without root into DOCTEST_DIR (tests/find_doctest.sh says what it did, or what
# to do when it cannot). One folder for every build (sanitize, OPENMP=0, ...).
DOCTEST_DIR ?= build/doctest
check-doctest:
	@sh tests/find_doctest.sh "$(CXX) $(EXTRA_CXXFLAGS)" "$(DOCTEST_DIR)"
$(TEST_SRCS:%.cpp=$(BUILD)/%.o): TEST_INCLUDES = -I$(DOCTEST_DIR)/usr/include -DEXAMPLES_BIN='"$(BIN)"'
$(TEST_SRCS:%.cpp=$(BUILD)/%.o): | check-doctest

test: $(TESTS)
	./$(TESTS) $(TEST_ARGS)

$(BUILD)/bench/%: $(BUILD)/bench/%.o $(EXLIB) $(LIB)
	$(CXX) $< $(EXLIB) $(LIB) $(LDFLAGS) -o $@

# GEMM throughput, then the training step of three copy-task configurations (one process each,
# so each peak RSS is its own), then decoding speed with and without the key/value cache. Run on an otherwise idle machine.
bench: $(BENCHES)
	OMP_NUM_THREADS=2 ./$(BUILD)/bench/bench_gemm
	@for c in default d128 paper paper-bf16; do OMP_NUM_THREADS=2 ./$(BUILD)/bench/bench_training $$c || exit 1; done
	OMP_NUM_THREADS=2 ./$(BUILD)/bench/bench_decoding

# The whole suite built with ASan + UBSan (+ LeakSanitizer, part of ASan on Linux) in
# build-sanitize/, the examples too: the suite's flag tests (tests/test_example_flags_*.cpp) run
# them, sanitized, through training, checkpoint save and load, beam search, --decode, --stdin and
# --attention, and a report from a sanitizer fails the test that ran the program. -g1: line
# tables only, which is all a sanitizer's report reads (file:line of each frame); full -g made
# the compile, most of CI's sanitize step, ~20% slower.
SAN_FLAGS := OPT="-O1 -g1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined -DAUTOGRAD_POISON_MEMORY" \
             LDFLAGS="$(omp_ldflags) -fsanitize=address,undefined" BUILD=build-sanitize OPENMP=$(OPENMP)
# Four tests are left out here: they train a model for hundreds of steps to check what it learns,
# which the native builds check; under the sanitizers they would take over a minute and run no
# code path the other tests (training steps, label smoothing, greedy and beam search, the cache)
# do not run sanitized.
SAN_SKIP := a tiny Transformer learns a tiny copy task*,cached and recomputing decoding give the same outputs: a model trained*
SAN_SKIP := $(SAN_SKIP),translation --label-smoothing eps: a trained model*,RNNSeq2Seq: with attention it learns*
# The answer keys of docs/ (test_docs.cpp, test_exercises.cpp) are left out too: tiny inputs, and
# the library code they call runs sanitized in the unit tests.
SAN_TEST_SRCS := $(filter-out tests/test_docs.cpp tests/test_exercises.cpp,$(TEST_SRCS))
sanitize:
	$(MAKE) $(SAN_FLAGS) TEST_SRCS="$(SAN_TEST_SRCS)" TEST_ARGS='--test-case-exclude="$(SAN_SKIP)"' test
	@echo "sanitize: the suite and its example runs are clean"

# Every figure of docs/, from today's code: the copy task trained with its defaults (600 steps,
# seed 1), the translation example for 2 epochs (seed 1) and the GPT (its defaults: 2,000 steps
# on Tiny Shakespeare, seed 1337, with samples every 250 steps) draw their loss curves, the
# translation model its attention heatmap and a beam-search tree, the copy-task model its
# attention; compare_models (its default run: every system of docs/06a's table, copy task, seed 1) its exact match
# against length and its attention maps (and, for a number of docs/06a, two of them on the reverse task); make_figures draws the rest from the code they show,
# bench_decoding the key/value-cache picture and bench_gemm the GEMM's blocking.
# attention_layer_graph.svg needs Graphviz. The logs of the runs stay in build/figures/, and
# docs/quoted_numbers.txt checks the numbers docs/ quotes from them (tests/check_quoted_numbers.sh).
#
# One build draws them, whose arithmetic is the same on every x86-64 CPU: -march=x86-64-v2
# (SSE4.2; GEMM's 128-bit micro-kernel, no fused multiply-adds), in build-x86-64-v2/ (CI's build
# of that name). Fixed seeds give the same numbers for any thread count, but not for any
# instruction set: a native build's fused multiply-adds and wider sums round differently, and a
# trained model's curve drifts apart within a hundred steps. The x86-64-v2 build trains the same
# weights, bit for bit, on an AVX-512 CPU and under qemu as an AVX2 (Haswell) or SSE4.2 (Nehalem)
# one (bench/RESULTS.md, "The figures' build"). So on any x86-64 machine `make figures` redraws
# the committed figures bit for bit (make figures-reproduce says whether it did: CI runs it); on
# ARM it draws them from its own baseline build, in build-figures/, which rounds differently.
# About 12 minutes on 2 idle cores.
FIGURES := docs/figures
FIGURE_RUNS := build/figures
FIGURE_ARCH := $(if $(filter x86_64,$(call cpu_name,$(shell uname -m))),-march=x86-64-v2,)
FIGURE_BUILD := $(if $(FIGURE_ARCH),build-x86-64-v2,build-figures)
FIGURE_TRANSLATION_EPOCHS := 2
FB := $(FIGURE_BUILD)/bin
figures:
	$(MAKE) ARCH=$(FIGURE_ARCH) BUILD=$(FIGURE_BUILD) $(FB)/make_figures $(FB)/copy_task $(FB)/translation $(FB)/gpt \
	    $(FB)/attention_by_hand $(FB)/compare_models $(FIGURE_BUILD)/bench/bench_decoding $(FIGURE_BUILD)/bench/bench_gemm
	@mkdir -p $(FIGURES) $(FIGURE_RUNS)
	$(FB)/copy_task --overwrite --plot $(FIGURES)/copy_task_loss.svg --save $(FIGURE_RUNS)/copy.safetensors > $(FIGURE_RUNS)/copy_task.log
	$(FB)/translation --overwrite --epochs $(FIGURE_TRANSLATION_EPOCHS) --plot $(FIGURES)/translation_loss.svg \
	    --save $(FIGURE_RUNS)/translation.safetensors > $(FIGURE_RUNS)/translation.log
	$(FB)/translation --overwrite --load $(FIGURE_RUNS)/translation.safetensors --attention $(FIGURES)/attention_heatmap.svg \
	    --translate "the brave dog does not see the old cat ." > $(FIGURE_RUNS)/attention.log 2>&1
	$(FB)/gpt --overwrite --sample-every 250 --tokens 300 --plot $(FIGURES)/gpt_loss.svg > $(FIGURE_RUNS)/gpt.log 2> /dev/null
	$(FB)/compare_models --overwrite --plot $(FIGURE_RUNS)/compare \
	    > $(FIGURE_RUNS)/compare_models.log 2> /dev/null
	$(FB)/compare_models --task reverse --models rnn-sutskever,rnn-sutskever-reversed --lengths 10 > $(FIGURE_RUNS)/compare_reverse.log 2> /dev/null
	cp $(FIGURE_RUNS)/compare/exact_match.svg $(FIGURES)/compare_exact_match.svg
	cp $(FIGURE_RUNS)/compare/attention.svg $(FIGURES)/compare_attention.svg
	$(FB)/make_figures --overwrite --out $(FIGURES) --copy-model $(FIGURE_RUNS)/copy.safetensors \
	    --translation-model $(FIGURE_RUNS)/translation.safetensors > $(FIGURE_RUNS)/make_figures.log
	./$(FIGURE_BUILD)/bench/bench_decoding --cache-picture $(FIGURES)/kv_cache.svg
	./$(FIGURE_BUILD)/bench/bench_gemm --tile-picture $(FIGURES)/gemm_tile.svg
	$(FB)/attention_by_hand --overwrite --graph $(FIGURE_RUNS)/attention_layer_graph.dot > /dev/null
	@if command -v dot > /dev/null; then dot -Tsvg $(FIGURE_RUNS)/attention_layer_graph.dot -o $(FIGURES)/attention_layer_graph.svg; \
	 else echo "figures: no Graphviz 'dot': attention_layer_graph.svg left as it is"; fi
	bash tests/check_quoted_numbers.sh $(FIGURE_RUNS)

# make figures, then: are the figures the committed ones? (git says which differ.) CI runs it on
# x86-64, where the figures build rounds the same on every CPU. Graphviz's drawing is left out:
# another version of dot lays the same graph out differently.
figures-reproduce: figures
	@git diff --quiet -- $(FIGURES) ':!$(FIGURES)/attention_layer_graph.svg' || \
	  { git --no-pager diff --stat -- $(FIGURES); echo "figures-reproduce: make figures drew other figures than the committed ones"; exit 1; }
	@echo "figures-reproduce: make figures redrew the committed figures bit for bit"

# Each SVG of docs/ renders (rsvg-convert, a developer tool: the project itself never needs it).
figures-check:
	@command -v rsvg-convert > /dev/null || { echo "figures-check needs rsvg-convert (apt-get install librsvg2-bin)"; exit 1; }
	@mkdir -p build/figures-png
	@for f in $(wildcard docs/*.svg docs/figures/*.svg); do \
	    rsvg-convert "$$f" -o build/figures-png/$$(basename "$$f" .svg).png || { echo "figures-check: $$f does not render"; exit 1; }; \
	done; echo "figures-check: every SVG of docs/ renders (PNGs in build/figures-png/)"

# The docs point at things that exist (tests/check_docs.sh says the rules), and the planted
# mistakes their exercises name still apply to today's code (tests/mutate.sh --check).
docs-check:
	bash tests/check_docs.sh
	bash tests/mutate.sh --check

clean:
	rm -rf $(BUILD) build-sanitize build-noomp build-fuzz build-figures build-lesson $(EXAMPLES)

# Mistakes planted one at a time (tests/mutations.txt): does the suite fail on each? A check of the
# tests themselves, not part of make test. tests/mutate.sh NAME runs only the mutations named so.
mutate:
	tests/mutate.sh

lesson-lines:
	bash bench/lesson_lines.sh

.PHONY: all test bench sanitize clean check-doctest docs-check figures figures-reproduce figures-check mutate lesson-lines
.SECONDARY:

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
-include tests/fuzz/Makefile.fuzz
