// Package gen holds hatgen's output for the benchmark echo service
// (idl/atb.thrift, package atb) and the stream benchmark's service
// (idl/atbstream.thrift, package atbstream). Regenerate with
// `go generate ./internal/bench/gen`.
package gen

//go:generate go run github.com/hatrpc/hatrpc/cmd/hatgen generate -o . --go-package github.com/hatrpc/hatrpc/internal/bench/gen ../idl/atb.thrift
//go:generate go run github.com/hatrpc/hatrpc/cmd/hatgen generate -o . --go-package github.com/hatrpc/hatrpc/internal/bench/gen ../idl/atbstream.thrift
