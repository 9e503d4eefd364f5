// Package client is the HatRPC runtime's client side. A Conn speaks plain
// Thrift to any Thrift server, finding its framing and protocol by itself,
// and upgrades itself to the multiplexed HatRPC framing when the peer is a
// HatRPC server (see docs/design/wire.md). Dialled with an http:// or
// https:// URL, it speaks Thrift over HTTP instead: one POST per call.
package client

import (
	"context"

	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/proto"
)

// Method identifies the function a call invokes.
type Method struct {
	Service, Name string
	Oneway        bool
	Hints         *hints.Function
}

// Invoker performs a call; interceptors receive the next one in the chain.
type Invoker func(ctx context.Context, m *Method, args, result proto.Struct) error

// Interceptor wraps a call; interceptors run in the order they were given,
// the first one outermost.
type Interceptor func(ctx context.Context, m *Method, args, result proto.Struct, next Invoker) error
