// Package gen holds hatgen's code for Apache Thrift's cross-language test
// IDL (ThriftTest.thrift from the shared corpus, uuid included), the
// HatRPC side of the cross tests. It is checked in so the tests show
// exactly what hatgen produced; regenerate with `go generate ./test/crosstest/gen`
// (the shared corpus sits beside the repository).
package gen

//go:generate go run github.com/hatrpc/hatrpc/cmd/hatgen generate -o . --go-package github.com/hatrpc/hatrpc/test/crosstest/gen ../../../../shared/idl/apache/thrift/test/ThriftTest.thrift
