# HatRPC-Go: the two commands a newcomer needs are `make run` and `make test`;
# both install what they need first (`make deps`).
SHELL := /bin/bash
GO ?= go
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
DEBS := build-essential libibverbs-dev librdmacm-dev liblmdb-dev thrift-compiler python3-thrift python3-venv etcd-server
STAMP := .deps.stamp

# Real kernel verbs: Soft-RoCE (rdma_rxe) in a QEMU guest (test/rxe/README.md).
RXE_DEBS := qemu-system-x86 busybox-static ibverbs-providers iproute2 kmod cpio
# Every package whose tests reach the fast path; CI runs them all (~12 min
# under emulation on 2 cores).
RXE_PKGS := pkg/rdma pkg/flock pkg/flock/flockmetrics pkg/fastpath pkg/client pkg/server pkg/cluster pkg/tracing test/lanes test/designspace test/fault internal/hatkv internal/hatkv/emul examples/echo cmd/hatkv cmd/atb cmd/hatrpc
# The TPC-H module's distributed tests whose exchange rides ibv lanes: the 22
# queries at SF 0.01 through impyla, PyHive and gohive and through HatRPC's
# client on a coordinator with 3 worker processes, and a worker killed
# mid-query (~5 min in the guest; its whole package takes 11).
RXE_TPCH_RUN := ^(TestDistributedClients|TestDistributedQueries|TestWorkerKilled)$$/^(impyla|pyhive|gohive|function)$$/^ibv$$

.PHONY: all deps deps-rdma deps-bench run test test-go test-allocs test-leaks test-c test-tpch test-rdma bench bench-atb bench-stream test-grpcstream generate vet nocgo fmt-check clean

all: test

# Debian packages (apt-get, with sudo when not root) and Go modules.
deps: $(STAMP)
$(STAMP): go.mod go.sum
	@if ! dpkg -s $(DEBS) >/dev/null 2>&1; then \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $(DEBS); \
	fi
	$(GO) mod download
	$(MAKE) -C tpch deps
	@touch $(STAMP)

# The systems issue 47 holds HatRPC to, for `make bench-atb`: UCX's
# ucx_perftest over shared memory (ucx-sm, ucx-sm-am) and Apache Thrift's
# C++ library (apache-cpp-*, built from internal/bench/apachecpp against
# libthrift-dev into ~/.cache/hatrpc-bench), then a few calls through each;
# and issue 46's gRPC-Go (grpc-stream: the nested module
# internal/bench/grpcstream, its modules downloaded here, built from the
# module cache only when a run needs it), then a short stream through it.
# Not part of `make deps`: the tests need none of it.
BENCH_DEBS := ucx-utils libthrift-dev libboost-dev libevent-dev
BENCH_EXTERNAL := ucx-sm,ucx-sm-am,apache-cpp-threaded,apache-cpp-nonblocking,grpc-stream
deps-bench: deps
	@if ! dpkg -s $(BENCH_DEBS) >/dev/null 2>&1; then \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $(BENCH_DEBS); \
	fi
	cd internal/bench/grpcstream && $(GO) mod download
	$(GO) run ./cmd/atb-tcp -role prepare -systems $(BENCH_EXTERNAL)

deps-rdma: deps
	@if ! dpkg -s $(RXE_DEBS) >/dev/null 2>&1; then \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $(RXE_DEBS); \
	fi
	test/rxe/vm.sh build >/dev/null

# The suites on ibv over Soft-RoCE in a VM: per-package table of tests passed.
test-rdma: deps-rdma
	RXE_PKGS="$(RXE_PKGS)" test/rxe/suite.sh
	test/rxe/suite.sh -run '$(RXE_TPCH_RUN)' tpch/bench
	test/rxe/suite.sh --two-devices -run 'TestTwoDevicesIBVOnly' pkg/fastpath

run: deps
	./scripts/run.sh $(RUN_ARGS)

test: deps fmt-check vet nocgo test-go test-allocs test-leaks test-c test-tpch

fmt-check:
	@bad=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$bad" ]; then echo "gofmt needed:"; echo "$$bad"; exit 1; fi

vet:
	$(GO) vet ./...

# The framework as a user without cgo, on macOS or on Windows builds it:
# no fast path (pkg/client's and pkg/server's nofastpath.go), every call
# over TCP. pkg/rdma, pkg/flock and hatkv need cgo on Linux.
NOCGO_PKGS = ./pkg/client/... ./pkg/server/... ./pkg/cluster/... ./pkg/hints ./pkg/generic ./pkg/tracing/... ./pkg/fb303/... ./cmd/hatgen ./cmd/hatrpc ./examples/...
nocgo:
	CGO_ENABLED=0 $(GO) build $(NOCGO_PKGS)
	GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 $(GO) build $(NOCGO_PKGS)
	GOOS=windows GOARCH=amd64 CGO_ENABLED=0 $(GO) build $(NOCGO_PKGS)

test-go:
	$(GO) test -race -timeout 20m ./...

# The allocation counts once more without the race detector, whose
# build makes sync.Pool drop a quarter of what is put back: there they
# hold the pooled paths to none.
test-allocs:
	$(GO) test -count=1 -run 'Allocs' ./pkg/server ./pkg/flock ./pkg/proto ./internal/bench

# Peers coming and going leave no resident memory behind, measured
# without the race detector, whose own memory grows with every goroutine
# and lock a cycle creates (test/lanes/lifecycle_test.go).
test-leaks:
	$(GO) test -count=1 -run '^TestPeersComeAndGo$$' ./test/lanes

# The TPC-H module (tpch/README.md), a Go module of its own so that the
# framework's users never download DuckDB: its HiveServer2 on DuckDB, the
# 22 queries at SF 0.01 through impyla, PyHive, gohive and HatRPC's clients.
test-tpch:
	$(MAKE) -C tpch test

# C unit tests of the verbs core and the protocol engine under ASan/UBSan.
test-c:
	$(MAKE) -C pkg/rdma sanitize
	$(MAKE) -C pkg/rdma -f proto.mk proto-sanitize

bench: deps
	$(GO) test -run '^$$' -bench . -benchmem ./...

# ATB sweep: engine protocols, lanes through the runtime and TCP, UCX over
# shared memory and Apache Thrift C++ over TCP, as CSV, SVG plots and
# docs/performance/report.md (15 min on 2 cores on 2026-11-29, before the
# four issue-47 systems).
bench-atb: deps-bench
	HATRPC_PROVIDER=$${HATRPC_PROVIDER:-shm} $(GO) run ./cmd/atb -reps 5 -calls 3000 -warmup 300 -dur 1s

# Issue 46's stream goals side by side (internal/bench/README.md,
# "Streams"): HatRPC streams against the raw TCP floor, a 1-core memmove,
# gRPC-Go server streaming and unary calls.
bench-stream: deps-bench
	HATRPC_PROVIDER=$${HATRPC_PROVIDER:-shm} $(GO) run ./cmd/atb-tcp -stream-sizes 64,4KiB,64KiB -bytes 1GiB -reps 3

# The grpc-stream program's own tests (its module: not part of `make test`,
# whose users never download gRPC).
test-grpcstream: deps-bench
	cd internal/bench/grpcstream && $(GO) test -race -count=1 ./...

generate:
	$(GO) generate ./...

clean:
	rm -f $(STAMP)
	$(GO) clean -testcache
