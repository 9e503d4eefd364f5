// Package apachegen holds Apache Thrift 0.17's Go code for the benchmark
// echo service, the baseline the benchmarks compare HatRPC against.
// Regenerate with `go generate ./internal/bench/apachegen`.
package apachegen

//go:generate thrift --gen go:package_prefix=github.com/hatrpc/hatrpc/internal/bench/apachegen/,skip_remote -out . ../idl/atb_plain.thrift
//go:generate gofmt -w atb
