#!/usr/bin/env bash
# `make run`: the main job. Starts the HatKV server with its embedded
# defaults (data in ./hatkv-data, listening on 127.0.0.1:9090, storage
# configured by the hints in internal/hatkv/hatkv.thrift). Extra arguments go
# to `hatkv serve` (see `go run ./cmd/hatkv serve --help`; `make run
# RUN_ARGS=...` passes them). Ctrl-C shuts it
# down gracefully and `make run` ends with status 0. In another terminal:
#   go run ./cmd/hatkv put user1 field0=hello
#   go run ./cmd/hatkv get user1
#   go run ./cmd/hatkv bench -P workloada_hatkv --threads 8
set -euo pipefail
cd "$(dirname "$0")/.."
# Built, then exec'd, rather than `go run`: go run exits 1 whenever it was
# interrupted, even after the server shut down cleanly (status 0), which
# made `make run` end in "make: *** Error 1" on every Ctrl-C.
go build -o bin/hatkv ./cmd/hatkv
if [ -t 0 ]; then
	# Ctrl-C in a terminal signals its whole foreground process group:
	# make too, which then ends itself by the same signal (status 130)
	# whatever the server did. With job control (set -m) the server runs
	# as a job of its own, holding the terminal, so only it gets the
	# Ctrl-C; it shuts down, and its status is this script's and make's.
	set -m
	bin/hatkv serve "$@"
	exit
fi
exec bin/hatkv serve "$@"
