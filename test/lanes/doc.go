// Package lanes holds the end-to-end tests of the rdma/shm transport: a
// generated service whose functions carry different hints runs each
// function on its own lanes with the protocols its plan picks, next to a
// function pinned to TCP, with every runtime feature intact.
package lanes

//go:generate go run github.com/hatrpc/hatrpc/cmd/hatgen generate -o gen --go-package github.com/hatrpc/hatrpc/test/lanes/gen mix.thrift
