# OctoPipe build.  `make` builds build/octopipe and build/liboctopipe.a.
#   make run            the main job on a built-in default
#   make test           unit + integration tests; last line "tests: N passed, N failed"
#   make test SAN=1     the same under ASan+UBSan (objects in build-san/)
#   make bench          benchmarks, printed as tables
#   make install PREFIX=/usr/local
# Modules live in src/<module>/*.c and are picked up automatically; tests are tests/test_*.c
# (one binary each) and tests/*.sh (shell tests).  BUILD=dir keeps separate object trees.

CC      ?= gcc
SAN     ?=
PREFIX  ?= /usr/local
ifeq ($(SAN),1)
  BUILD ?= build-san
  SANFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
  OPT ?= -O1 -g
else
  BUILD ?= build
  SANFLAGS :=
  OPT ?= -O2 -g
endif

MPI_CFLAGS := $(shell mpicc --showme:compile 2>/dev/null)
MPI_LIBS   := $(shell mpicc --showme:link 2>/dev/null)
DEP_CFLAGS := $(shell pkg-config --cflags openblas jansson 2>/dev/null)
DEP_LIBS   := $(shell pkg-config --libs openblas jansson 2>/dev/null)

WARN    := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Werror=implicit-function-declaration -Wno-unused-parameter
CFLAGS  += -std=c17 -D_GNU_SOURCE $(OPT) $(WARN) $(SANFLAGS) -Iinclude -Isrc $(DEP_CFLAGS) $(MPI_CFLAGS) -MMD -MP
LDLIBS  += $(DEP_LIBS) $(MPI_LIBS) -lpthread -lm
LDFLAGS += $(SANFLAGS)

LIB_SRC  := $(sort $(filter-out src/cli/%,$(wildcard src/*/*.c)))
CLI_SRC  := $(sort $(wildcard src/cli/*.c))
TEST_SRC := $(sort $(wildcard tests/test_*.c))
BENCH_SRC:= $(sort $(wildcard bench/bench_*.c))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
BENCH_BIN:= $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)
LIB      := $(BUILD)/liboctopipe.a
BIN      := $(BUILD)/octopipe

export OMPI_ALLOW_RUN_AS_ROOT := 1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM := 1
export OPENBLAS_NUM_THREADS := 1

.SECONDARY:
.PHONY: all deps lib run test bench bench-plan bench-exec bench-model test-multihost fuzz install clean tests-build
all: deps $(BIN) $(LIB)

deps:
	@./scripts/setup.sh

lib: $(LIB)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(LIB): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BIN): $(CLI_OBJ) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $(CLI_OBJ) $(LIB) $(LDLIBS)

$(BUILD)/tests/%: $(BUILD)/obj/tests/%.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

$(BUILD)/bench/%: $(BUILD)/obj/bench/%.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

tests-build: deps $(LIB) $(TEST_BIN)

test: all tests-build
	@BUILD=$(BUILD) SAN=$(SAN) ./tests/run.sh $(T)

run: all
	@BUILD=$(BUILD) ./scripts/run.sh

bench: all $(BENCH_BIN)
	@BUILD=$(BUILD) ./bench/run.sh all

bench-plan bench-exec bench-model: all $(BENCH_BIN)
	@BUILD=$(BUILD) ./bench/run.sh $(@:bench-%=%)

test-multihost: all
	@BUILD=$(BUILD) ./tests/multihost.sh

# PyTorch interop: torch in .venv-torch (scripts/setup.sh --torch, once), CPU + gloo; `make test`
# never touches it.  tests/torch/run.sh: C model vs autograd, the CSV rules vs torch's, plans
# in torch's runtime.
.PHONY: test-torch
test-torch: all $(BUILD)/torch/nn_ref $(BUILD)/torch/csv_check
	@./scripts/setup.sh --torch
	@BUILD=$(BUILD) ./tests/torch/run.sh $(T)

$(BUILD)/torch/%: $(BUILD)/obj/tests/torch/%.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

fuzz:
	@./scripts/setup.sh --dev
	@./fuzz/run.sh $(FUZZ_SECONDS)

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include/octopipe
	install -m 755 $(BIN) $(DESTDIR)$(PREFIX)/bin/octopipe
	install -m 644 $(LIB) $(DESTDIR)$(PREFIX)/lib/liboctopipe.a
	install -m 644 include/octopipe/*.h $(DESTDIR)$(PREFIX)/include/octopipe/
	sed -e 's|@PREFIX@|$(PREFIX)|' scripts/octopipe.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/octopipe.pc

clean:
	rm -rf build build-san build-*

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
