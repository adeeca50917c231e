# OctoPipe build.  `make` builds build/octopipe, build/liboctopipe.a and build/liboctopipe.so.*.
#   make run            the main job on a built-in default
#   make test           unit + integration tests; last line "tests: N passed, N failed"
#   make test SAN=1     the same under ASan+UBSan (objects in build-san/)
#   make test SAN=thread  the same under ThreadSanitizer (objects in build-tsan/; tests/tsan.supp)
#   make bench          benchmarks, printed as tables
#   make install PREFIX=/usr/local [DESTDIR=...]   binary, headers, static + shared library, octopipe.pc
# Modules live in src/<module>/*.c and are picked up automatically; tests are tests/test_*.c
# (one binary each) and tests/*.sh (shell tests).  BUILD=dir keeps separate object trees.
#
# Two stages.  Every public target first runs scripts/setup.sh (installs missing Debian
# packages), then re-runs make on itself with OP_STAGE=build: only that inner make asks mpicc
# and pkg-config for flags, so on a fresh machine they are read after the packages exist, and
# with -j2 nothing compiles while apt is still installing.

CC      ?= gcc
SAN     ?=
PREFIX  ?= /usr/local
LIBDIR  ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
ifeq ($(SAN),1)
  BUILD ?= build-san
else ifeq ($(SAN),thread)
  BUILD ?= build-tsan
else
  BUILD ?= build
endif

PUBLIC := all lib run test bench bench-plan bench-exec bench-model bench-baselines bench-memory bench-mixed test-multihost test-torch install tests-build
.PHONY: $(PUBLIC) deps fuzz clean

# Stage 2 only when told on the command line: a test that starts make inherits OP_STAGE in its
# environment, and must get stage 1 (setup first) all the same.
ifneq ($(origin OP_STAGE)$(OP_STAGE),command linebuild)
# ---- stage 1: packages, then the real work in a fresh make that reads the flags now ----
# One public target at a time: two setup.sh runs at once would fight over the apt lock.
.NOTPARALLEL:
# make test and make run need what the tests need too (chromium, python3); plain builds do not.
SETUP_ARGS_test := --test
SETUP_ARGS_tests-build := --test
$(PUBLIC):
	@./scripts/setup.sh $(SETUP_ARGS_$@)
	@$(MAKE) --no-print-directory OP_STAGE=build $@

deps:
	@./scripts/setup.sh

fuzz:
	@./scripts/setup.sh --dev
	@./fuzz/run.sh $(FUZZ_SECONDS)

clean:
	rm -rf build build-san build-*

else
# ---- stage 2: the build proper (packages are in place) ----
ifeq ($(SAN),1)
  # float-cast-overflow is not part of gcc's "undefined": casting 1e308 to int64 must fail too.
  SANFLAGS := -fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=all -fno-omit-frame-pointer
  OPT ?= -O1 -g
else ifeq ($(SAN),thread)
  SANFLAGS := -fsanitize=thread -fno-omit-frame-pointer
  OPT ?= -O1 -g
else
  SANFLAGS :=
  OPT ?= -O2 -g
endif

MPI_CFLAGS := $(shell mpicc --showme:compile)
MPI_LIBS   := $(shell mpicc --showme:link)
DEP_CFLAGS := $(shell pkg-config --cflags openblas jansson)
DEP_LIBS   := $(shell pkg-config --libs openblas jansson)
ifeq ($(strip $(MPI_LIBS)),)
  $(error mpicc gave no link flags: is libopenmpi-dev installed? (scripts/setup.sh installs it))
endif
ifeq ($(strip $(DEP_LIBS)),)
  $(error pkg-config knows no openblas/jansson: scripts/setup.sh installs libopenblas-dev libjansson-dev)
endif

# The version lives in include/octopipe/version.h only.
vpart = $(shell sed -n 's/^\#define OCTOPIPE_VERSION_$(1) \([0-9]*\)$$/\1/p' include/octopipe/version.h)
V_MAJOR := $(call vpart,MAJOR)
VERSION := $(V_MAJOR).$(call vpart,MINOR).$(call vpart,PATCH)

WARN    := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Werror=implicit-function-declaration -Wno-unused-parameter
# -fPIC: one set of objects serves the static and the shared library.
CFLAGS  += -std=c17 -D_GNU_SOURCE -fPIC $(OPT) $(WARN) $(SANFLAGS) -Iinclude -Isrc $(DEP_CFLAGS) $(MPI_CFLAGS) -MMD -MP
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
SONAME   := liboctopipe.so.$(V_MAJOR)
SHLIB    := $(BUILD)/liboctopipe.so.$(VERSION)
BIN      := $(BUILD)/octopipe

export OMPI_ALLOW_RUN_AS_ROOT := 1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM := 1
export OPENBLAS_NUM_THREADS := 1

.SECONDARY:
all: $(BIN) $(LIB) $(SHLIB)

lib: $(LIB) $(SHLIB)

# Objects depend on the flags they were built with: a changed CFLAGS (or CC) rebuilds them.
FLAGS_STAMP := $(BUILD)/.cflags
$(FLAGS_STAMP): FORCE
	@mkdir -p $(BUILD)
	@echo '$(CC) $(CFLAGS)' | cmp -s - $@ || echo '$(CC) $(CFLAGS)' > $@
.PHONY: FORCE

$(BUILD)/obj/%.o: %.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(LIB): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

# Debian's layout: the real file .so.MAJOR.MINOR.PATCH, the SONAME link .so.MAJOR (what
# programs load), the development link .so (what -loctopipe finds).  Its dependencies are
# linked in (DT_NEEDED), so `-loctopipe` alone links a program.
$(SHLIB): $(LIB_OBJ)
	$(CC) -shared -Wl,-soname,$(SONAME) -Wl,--no-undefined $(LDFLAGS) -o $@ $^ $(LDLIBS)
	ln -sf $(notdir $@) $(BUILD)/$(SONAME)
	ln -sf $(SONAME) $(BUILD)/liboctopipe.so

$(BIN): $(CLI_OBJ) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $(CLI_OBJ) $(LIB) $(LDLIBS)

$(BUILD)/tests/%: $(BUILD)/obj/tests/%.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

$(BUILD)/bench/%: $(BUILD)/obj/bench/%.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

tests-build: $(LIB) $(TEST_BIN) $(BENCH_BIN)

test: all tests-build
	@BUILD=$(BUILD) SAN=$(SAN) CC=$(CC) ./tests/run.sh $(T)

run: all
	@BUILD=$(BUILD) ./scripts/run.sh

bench: all $(BENCH_BIN)
	@BUILD=$(BUILD) ./bench/run.sh all

bench-plan bench-exec bench-model bench-baselines bench-memory bench-mixed: all $(BENCH_BIN)
	@BUILD=$(BUILD) ./bench/run.sh $(@:bench-%=%)

test-multihost: all
	@BUILD=$(BUILD) ./tests/multihost.sh

PC_REQ := jansson openblas ompi-c

# PyTorch interop: torch in .venv-torch (scripts/setup.sh --torch, once), CPU + gloo; `make test`
# never touches it.  tests/torch/run.sh: C model vs autograd, the CSV rules vs torch's, plans
# in torch's runtime.
test-torch: all $(BUILD)/torch/nn_ref $(BUILD)/torch/csv_check
	@./scripts/setup.sh --torch
	@BUILD=$(BUILD) ./tests/torch/run.sh $(T)

$(BUILD)/torch/%: $(BUILD)/obj/tests/torch/%.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCLUDEDIR)/octopipe
	install -m 755 $(BIN) $(DESTDIR)$(PREFIX)/bin/octopipe
	install -m 644 $(LIB) $(DESTDIR)$(LIBDIR)/liboctopipe.a
	install -m 644 $(SHLIB) $(DESTDIR)$(LIBDIR)/
	ln -sf $(notdir $(SHLIB)) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/liboctopipe.so
	install -m 644 include/octopipe/*.h $(DESTDIR)$(INCLUDEDIR)/octopipe/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' \
	    -e 's|@VERSION@|$(VERSION)|' -e 's|@REQUIRES@|$(PC_REQ)|' \
	    scripts/octopipe.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/octopipe.pc

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
endif
