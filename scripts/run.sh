#!/usr/bin/env bash
# `make run`: the main job. Starts the HatKV server with its embedded
# defaults (data in ./hatkv-data, listening on 127.0.0.1:9090, storage
# configured by the hints in internal/hatkv/hatkv.thrift). Extra arguments go
# to `hatkv serve` (see `go run ./cmd/hatkv serve --help`). Ctrl-C shuts it
# down gracefully. In another terminal:
#   go run ./cmd/hatkv put user1 field0=hello
#   go run ./cmd/hatkv get user1
#   go run ./cmd/hatkv bench -P workloada_hatkv --threads 8
set -euo pipefail
cd "$(dirname "$0")/.."
exec go run ./cmd/hatkv serve "$@"
