# Peloton-C build. `make test` and `make run` install missing Debian packages first
# (scripts/deps.sh). Sources are discovered by wildcard: a new module needs no edit here.

CC       ?= cc
CSTD     := -std=c17 -D_GNU_SOURCE
WARN     := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wno-unused-parameter
PKGS     := jansson yaml-0.1 hiredis libuv libnghttp2 libcurl openssl libprotobuf-c libzstd
# The packages must be installed before pkg-config can be asked for their
# flags, so the flags live in build/pkg.mk, which make remakes first (running
# scripts/deps.sh) and then reads: on a fresh machine, one `make test` installs,
# then builds with the right flags. `make clean` needs none of it.
ifneq ($(filter-out clean,$(or $(MAKECMDGOALS),all)),)
include build/pkg.mk
endif
build/pkg.mk: scripts/deps.sh
	@scripts/deps.sh
	@mkdir -p $(dir $@)
	@{ echo 'PKG_CFLAGS := '"$$(pkg-config --cflags $(PKGS))" && \
	   echo 'PKG_LIBS := '"$$(pkg-config --libs $(PKGS))" && \
	   echo 'JEMALLOC_LIBS := '"$$(pkg-config --libs jemalloc)"; } > $@.tmp || { rm -f $@.tmp; exit 1; }
	@mv $@.tmp $@
# Release binaries and benchmarks use jemalloc: the daemons allocate and free
# many small JSON values per request across two threads, where glibc's arenas
# kept trimming and regrowing (docs/benchmarks.md). The ASan builds keep the
# sanitizer's allocator.
REL_LIBS = $(PKG_LIBS) $(JEMALLOC_LIBS)
# jemalloc's options (src/rel/malloc_conf.c), linked into release binaries only.
REL_ALLOC := build/rel/src/rel/malloc_conf.o
INC      := -Isrc -Isrc/core -Isrc/util -Isrc/sim -Isrc/k8s -Isrc/store -Isrc/http -Isrc/kclient -Isrc/model -Isrc/ctl -Isrc/mesos -Iapiserver-shim -Ischeduler-extender -Ikubelet-hostmgr -Isrc/native -Isrc/cli -Iui -Ibuild/gen $(PKG_CFLAGS)

REL_CFLAGS  := $(CSTD) $(WARN) -O2 -g $(INC)
ASAN_CFLAGS := $(CSTD) $(WARN) -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
               -fno-sanitize-recover=undefined $(INC)
ASAN_LDFLAGS := -fsanitize=address,undefined

CORE_SRC := $(wildcard src/core/*.c)
UTIL_SRC := $(wildcard src/util/*.c)
SIM_SRC  := $(wildcard src/sim/*.c)
K8S_SRC  := $(wildcard src/k8s/*.c)
STORE_SRC := $(wildcard src/store/*.c)
HTTP_SRC := $(wildcard src/http/*.c)
SHIM_SRC := $(wildcard apiserver-shim/*.c)
KCLIENT_SRC := $(wildcard src/kclient/*.c)
MODEL_SRC := $(wildcard src/model/*.c)
# pelotond's controllers (resmgr, placement, jobmgr, hostmgr), clients of the API.
CTL_SRC  := $(wildcard src/ctl/*.c)
# The Mesos protocol pieces (RecordIO, the v1 API's JSON) and mesos-master-sim's master.
MESOS_SRC := $(wildcard src/mesos/*.c)
# scheduler-extender/main.c is the peloton-extender binary's main; the rest is library.
EXT_SRC  := $(filter-out scheduler-extender/main.c,$(wildcard scheduler-extender/*.c))
HOSTMGR_SRC := $(wildcard kubelet-hostmgr/*.c)
# The native API (Peloton's gRPC and YARPC): src/native, and the C that
# protoc-c generates at build time from proto/ into build/gen (never committed).
NATIVE_SRC := $(wildcard src/native/*.c)
# The peloton CLI (docs/cli.md): src/cli/main.c is its main, the rest library.
CLI_SRC  := $(filter-out src/cli/main.c,$(wildcard src/cli/*.c))
# The web UI (ui/): its files embedded at build time (build/gen/ui_assets.h)
# and served under /ui/ by the API server (docs/ui.md).
UI_SRC   := $(wildcard ui/*.c)
UI_FILES := $(wildcard ui/*.html ui/*.css ui/*.js ui/*.svg)
PROTO_FILES := $(shell find proto -name '*.proto' 2>/dev/null)
PB_C     := $(PROTO_FILES:proto/%.proto=build/gen/%.pb-c.c)
PB_H     := $(PB_C:.c=.h)
LIB_SRC  := $(CORE_SRC) $(UTIL_SRC) $(SIM_SRC) $(K8S_SRC) $(STORE_SRC) $(HTTP_SRC) $(SHIM_SRC) \
            $(KCLIENT_SRC) $(MODEL_SRC) $(CTL_SRC) $(EXT_SRC) $(HOSTMGR_SRC) $(MESOS_SRC) \
            $(NATIVE_SRC) $(CLI_SRC) $(UI_SRC) $(PB_C)
UNIT_SRC := $(wildcard test/unit/*.c)
# Integration tests: C tests against real services (redis-server), started and
# stopped by the tests themselves on loopback. They share the unit harness.
INTEG_SRC := $(wildcard test/integ/*.c)
INTEG_OBJ := $(INTEG_SRC:%.c=build/asan/%.o) build/asan/test/unit/main.o
BENCH_SRC := $(wildcard bench/*.c)

REL_OBJ  := $(LIB_SRC:%.c=build/rel/%.o)
ASAN_OBJ := $(LIB_SRC:%.c=build/asan/%.o)
UNIT_OBJ := $(UNIT_SRC:%.c=build/asan/%.o)
BENCH_BIN := $(BENCH_SRC:bench/%.c=build/bench/%)

FUZZ_TARGETS := quantity doc continue selector patch schema extender jparse h1 regex recordio mesos_json mhttp extender_core pbjson grpcframe mdrv h2 cliyaml table cliranges k8spb workload cron tokenfile crdjob clistream mresp wevent unpack lease duration
FUZZ_SECONDS ?= 30
FUZZ_RUNS ?= 0
FUZZ_CC ?= clang-14

.PHONY: all deps build test unit e2e bench bench-scale run run-sim run-apiserver clean fuzz image soak
all: build

deps:
	@scripts/deps.sh

# Binaries: pelotond (the daemon), peloton-sim (offline), kubelet-sim (a
# simulated Kubelet fleet), peloton-extender (the kube-scheduler extender),
# mesos-master-sim (a simulated Mesos master and agents), peloton (the CLI).
BINS := bin/peloton-sim bin/pelotond $(if $(wildcard src/cmd/kubelet_sim.c),bin/kubelet-sim) \
        $(if $(wildcard scheduler-extender/main.c),bin/peloton-extender) bin/mesos-master-sim bin/peloton
ASAN_BINS := $(BINS:bin/%=build/asan/%)

# The CRDs for Kubernetes 1.20 to 1.24: crds/ without CEL rules, generated
# (scripts/crds-nocel.py; docs/extender.md), never kept in the repository.
CRDS_PRE125 := $(patsubst crds/%.yaml,build/crds-pre1.25/%.yaml,$(wildcard crds/*.yaml))
$(CRDS_PRE125): build/crds-pre1.25/%.yaml: crds/%.yaml scripts/crds-nocel.py
	@python3 scripts/crds-nocel.py crds build/crds-pre1.25

build: deps $(BINS) $(CRDS_PRE125)

bin/kubelet-sim: build/rel/src/cmd/kubelet_sim.o $(REL_OBJ) $(REL_ALLOC)
	@mkdir -p bin
	$(CC) -o $@ $^ $(REL_LIBS) -lm

bin/mesos-master-sim: build/rel/src/cmd/mesos_master_sim.o $(REL_OBJ) $(REL_ALLOC)
	@mkdir -p bin
	$(CC) -o $@ $^ $(REL_LIBS) -lm

build/asan/mesos-master-sim: build/asan/src/cmd/mesos_master_sim.o $(ASAN_OBJ)
	$(CC) $(ASAN_LDFLAGS) -o $@ $^ $(PKG_LIBS) -lm

bin/peloton-extender: build/rel/scheduler-extender/main.o $(REL_OBJ) $(REL_ALLOC)
	@mkdir -p bin
	$(CC) -o $@ $^ $(REL_LIBS) -lm

build/asan/kubelet-sim: build/asan/src/cmd/kubelet_sim.o $(ASAN_OBJ)
	$(CC) $(ASAN_LDFLAGS) -o $@ $^ $(PKG_LIBS) -lm

build/asan/peloton-extender: build/asan/scheduler-extender/main.o $(ASAN_OBJ)
	$(CC) $(ASAN_LDFLAGS) -o $@ $^ $(PKG_LIBS) -lm

bin/peloton-sim: build/rel/src/cmd/peloton_sim.o $(REL_OBJ) $(REL_ALLOC)
	@mkdir -p bin
	$(CC) -o $@ $^ $(REL_LIBS) -lm

bin/peloton: build/rel/src/cli/main.o $(REL_OBJ) $(REL_ALLOC)
	@mkdir -p bin
	$(CC) -o $@ $^ $(REL_LIBS) -lm

build/asan/peloton: build/asan/src/cli/main.o $(ASAN_OBJ)
	$(CC) $(ASAN_LDFLAGS) -o $@ $^ $(PKG_LIBS) -lm

bin/pelotond: build/rel/src/cmd/pelotond.o $(REL_OBJ) $(REL_ALLOC)
	@mkdir -p bin
	$(CC) -o $@ $^ $(REL_LIBS) -lm

build/asan/pelotond: build/asan/src/cmd/pelotond.o $(ASAN_OBJ)
	$(CC) $(ASAN_LDFLAGS) -o $@ $^ $(PKG_LIBS) -lm

build/asan/peloton-sim: build/asan/src/cmd/peloton_sim.o $(ASAN_OBJ)
	$(CC) $(ASAN_LDFLAGS) -o $@ $^ $(PKG_LIBS) -lm

build/asan/unit: $(UNIT_OBJ) $(ASAN_OBJ)
	$(CC) $(ASAN_LDFLAGS) -o $@ $^ $(PKG_LIBS) -lm

build/asan/test/integ/%.o: ASAN_CFLAGS += -Itest/unit

# The integration tests start the ASan pelotond and mesos-master-sim: built
# with them, so `make build/asan/integ` alone gives a runnable suite.
build/asan/integ: $(INTEG_OBJ) $(ASAN_OBJ) | build/asan/pelotond build/asan/mesos-master-sim
	$(CC) $(ASAN_LDFLAGS) -o $@ $^ $(PKG_LIBS) -lm

# The built-ins' OpenAPI schemas (a readable JSON file) embedded as a C string.
build/gen/builtin_schemas.h: apiserver-shim/builtin-schemas.json
	@mkdir -p $(dir $@)
	@{ echo '/* generated from $< by the Makefile: do not edit */'; \
	   echo 'static const char builtin_schemas_json[] ='; \
	   sed 's/\\/\\\\/g; s/"/\\"/g; s/^/"/; s/$$/\\n"/' $<; echo ';'; } > $@

build/rel/apiserver-shim/shim_openapi.o build/asan/apiserver-shim/shim_openapi.o: build/gen/builtin_schemas.h

# The UI's files as C arrays (ui/embed.py); the folder too, so that a file
# added or removed remakes it.
build/gen/ui_assets.h: $(UI_FILES) ui/embed.py ui
	@mkdir -p $(dir $@)
	@python3 ui/embed.py $@ $(UI_FILES)
build/rel/ui/serve.o build/asan/ui/serve.o: build/gen/ui_assets.h

# protoc-c output for every .proto (one run per file keeps the rule simple);
# every object waits for the headers, which any file may include.
build/gen/%.pb-c.c build/gen/%.pb-c.h: proto/%.proto build/pkg.mk
	@mkdir -p build/gen
	protoc-c --c_out=build/gen -Iproto $<
$(REL_OBJ) $(ASAN_OBJ) $(UNIT_OBJ) $(INTEG_OBJ): | $(PB_H)

# Objects depend on build/pkg.mk: new package flags rebuild them.
build/rel/%.o: %.c build/pkg.mk
	@mkdir -p $(dir $@)
	$(CC) $(REL_CFLAGS) -MMD -MP -c -o $@ $<

build/asan/%.o: %.c build/pkg.mk
	@mkdir -p $(dir $@)
	$(CC) $(ASAN_CFLAGS) -MMD -MP -c -o $@ $<

build/bench/%: bench/%.c bench/bench.h bench/bench_proc.h $(REL_OBJ) $(REL_ALLOC)
	@mkdir -p $(dir $@)
	$(CC) $(REL_CFLAGS) -Ibench -o $@ $< $(REL_OBJ) $(REL_ALLOC) $(REL_LIBS) -lm

# Fuzz targets: a replay-and-mutate smoke run under ASan in `make test`,
# coverage-guided libFuzzer runs (clang) under `make fuzz`.
build/asan/fuzz-%: fuzz/fuzz_%.c fuzz/replay.c $(ASAN_OBJ)
	$(CC) $(ASAN_CFLAGS) $(ASAN_LDFLAGS) -o $@ $^ $(PKG_LIBS) -lm

# The sources are compiled once for all targets (instrumented for coverage,
# fuzzer-no-link); each target is its own file linked with them.
FUZZ_CFLAGS := $(CSTD) -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined $(INC)
FUZZ_OBJ := $(LIB_SRC:%.c=build/fuzz/obj/%.o)
build/fuzz/obj/%.o: %.c build/pkg.mk build/fuzz/.deps
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c -o $@ $<
$(FUZZ_OBJ): | $(PB_H)
build/fuzz/obj/apiserver-shim/shim_openapi.o: build/gen/builtin_schemas.h
build/fuzz/obj/ui/serve.o: build/gen/ui_assets.h

build/fuzz/fuzz-%: fuzz/fuzz_%.c $(FUZZ_OBJ)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_OBJ) $(PKG_LIBS) -lm

# clang-14 (libFuzzer) is installed only for `make fuzz`: scripts/deps.sh fuzz.
build/fuzz/.deps: scripts/deps.sh
	@scripts/deps.sh fuzz
	@mkdir -p $(dir $@) && touch $@

$(FUZZ_TARGETS:%=build/fuzz/fuzz-%): build/fuzz/.deps

fuzz: deps $(FUZZ_TARGETS:%=build/fuzz/fuzz-%)
	@for t in $(FUZZ_TARGETS); do mkdir -p build/fuzz/corpus-$$t; \
	  build/fuzz/fuzz-$$t -max_total_time=$(FUZZ_SECONDS) -runs=$(if $(filter 0,$(FUZZ_RUNS)),-1,$(FUZZ_RUNS)) -max_len=8192 build/fuzz/corpus-$$t fuzz/corpus/$$t || exit 1; done

# Every suite prints "N passed, N failed"; test/run.sh sums them into the last line.
test: deps $(BINS) build/asan/unit $(ASAN_BINS) $(FUZZ_TARGETS:%=build/asan/fuzz-%) \
      $(if $(INTEG_SRC),build/asan/integ)
	@FUZZ_TARGETS="$(FUZZ_TARGETS)" test/run.sh

# e2e tests on a real Kubernetes 1.20 control plane (test/k8s/; docs/extender.md,
# "Testing against a real control plane"). Not part of `make test`: the first
# run builds kube-apiserver and kube-scheduler from Debian's kubernetes source
# package into ~/.cache/peloton-k8s (scripts/k8s-real.sh build).
.PHONY: test-k8s
test-k8s: deps bin/peloton-extender bin/kubelet-sim $(CRDS_PRE125)
	@scripts/k8s-real.sh build
	@test/k8s/run.sh

bench: deps $(BENCH_BIN) $(BINS)
	@for b in $(BENCH_BIN); do echo "== $$b"; $$b || exit 1; done
	@for b in bench/*.py; do [ -e "$$b" ] || continue; [ "$$b" != bench/bench_scale.py ] || continue; \
	  echo "== $$b"; i=$$(head -n 1 "$$b" | sed -n 's/^#!//p'); $${i:-python3} $$b || exit 1; done # its #! names the interpreter
	@echo "== bench/bench_scale.py (SMALL=1; the full size: make bench-scale)"; SMALL=1 /usr/bin/python3 bench/bench_scale.py

# The scale run of issue 25 (docs/benchmarks.md, "Scale"): 50,000 nodes, 1,000,000
# pods by default, tens of minutes and several GiB; SMALL=1 or NODES=, PODS=... for less.
bench-scale: deps $(BINS)
	@/usr/bin/python3 bench/bench_scale.py

# redis-server, pelotond (every role) and kubelet-sim with a small fleet; prints
# the kubectl command to use; Ctrl-C stops all of it (docs/quickstart.md).
# On a terminal the script runs as a job of its own (bash -m) that holds the
# terminal, so Ctrl-C reaches the script alone: it stops the cluster and exits
# 0, and make, which never saw the signal, exits 0 too (as does a `| tee`
# beside it). bash takes the terminal through its stderr, so that is
# /dev/tty for bash itself while the script keeps the caller's stderr (fd 3).
RUN_SCRIPT = if [ -t 0 ] && { : </dev/tty; } 2>/dev/null; then \
	  exec bash -mc '$(1) 2>&3 3>&-' 3>&2 2>/dev/tty; else exec $(1); fi
run: build
	@$(call RUN_SCRIPT,scripts/run.sh)

# pelotond and kubelet-sim under valgrind through a short load (not in make test)
soak: build
	scripts/valgrind-soak.sh

# The offline simulator on the examples.
run-sim: build
	bin/peloton-sim entitlement examples/sim/blog.yaml
	bin/peloton-sim plan examples/sim/plan.yaml
	bin/peloton-sim place examples/sim/place.yaml

# The apiserver role alone, with a private redis-server (Ctrl-C stops both).
run-apiserver: build
	@$(call RUN_SCRIPT,scripts/run-apiserver.sh)

# The image (Dockerfile: Debian bookworm, the release binaries built inside
# it) with the first working builder of docker (its daemon answering), podman
# and buildah; without one it says so and fails. The manifests name $(IMAGE).
IMAGE ?= peloton-c:latest
image:
	@b=""; \
	if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then b="docker build"; \
	elif command -v podman >/dev/null 2>&1; then b="podman build"; \
	elif command -v buildah >/dev/null 2>&1; then b="buildah bud"; fi; \
	if [ -z "$$b" ]; then \
	  echo "make image: no image builder: needs docker (with its daemon running), podman or buildah;" >&2; \
	  if command -v docker >/dev/null 2>&1; then echo "  docker is installed but its daemon does not answer (docker info)" >&2; fi; \
	  echo "  install one (apt-get install podman) or build ./Dockerfile on a machine that has one" >&2; \
	  exit 2; \
	fi; \
	echo "make image: $$b -t $(IMAGE) ."; $$b -t $(IMAGE) -f Dockerfile .

clean:
	rm -rf build bin

-include $(shell find build -name '*.d' 2>/dev/null)
