// Package testsvc holds the service the cluster tests call through its
// generated client.
package testsvc

//go:generate go run github.com/hatrpc/hatrpc/cmd/hatgen generate -o gen --go-package github.com/hatrpc/hatrpc/pkg/cluster/internal/testsvc/gen store.thrift
