package crosstest

import (
	"context"
	"crypto/tls"
	"fmt"
	"path/filepath"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/server"
	tt "github.com/hatrpc/hatrpc/test/crosstest/gen/thrifttest"
	"github.com/hatrpc/hatrpc/test/crosstest/gen/thrifttest/thrifttestserver"
)

// Handlers is what NewServer serves: *Handler, or a test's variant of it.
type Handlers interface {
	tt.ThriftTestHandler
	tt.SecondServiceHandler
}

// NewServer is a HatRPC server with ThriftTest and SecondService. It
// answers "ThriftTest:method", "SecondService:method" and plain names, as
// Apache's servers with a multiplexed processor and a default service do,
// and finds each client's stack by itself, so one server serves every
// cell the flags allow.
func NewServer(h Handlers, opts ...server.Option) *server.Server {
	srv := server.New(opts...)
	thrifttestserver.RegisterThriftTest(srv, h)
	thrifttestserver.RegisterSecondService(srv, h)
	return srv
}

// ServerOptions are the server options the flags ask for: TLS with
// CertPath/server.crt and server.key when --ssl (Apache's test/keys hold
// both). A stack HatRPC does not speak is refused here.
func ServerOptions(f *Flags) ([]server.Option, error) {
	if err := f.Stack.Validate(); err != nil {
		return nil, err
	}
	if !f.Stack.SSL {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(f.CertPath, "server.crt"), filepath.Join(f.CertPath, "server.key"))
	if err != nil {
		return nil, fmt.Errorf("--ssl: %w", err)
	}
	return []server.Option{server.WithTLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})}, nil
}

// RunClient dials the server the flags name and runs every check
// TestLoops times; it returns the number of checks passed.
func RunClient(ctx context.Context, f *Flags) (int, error) {
	opts, err := f.Stack.ClientOptions()
	if err != nil {
		return 0, err
	}
	conn, err := client.Dial(ctx, f.Addr(), opts...)
	if err != nil {
		return 0, fmt.Errorf("dial %s: %w", f.Addr(), err)
	}
	defer conn.Close()
	c := &Checker{T: tt.NewThriftTestClient(conn), NoUUID: f.NoUUID}
	if f.Stack.Multiplexed() {
		c.Second = tt.NewSecondServiceClient(conn)
	}
	for i := range f.TestLoops {
		if err := c.Run(ctx); err != nil {
			return c.Checks(), fmt.Errorf("%s, loop %d: %w", f.Stack, i+1, err)
		}
	}
	return c.Checks(), nil
}
