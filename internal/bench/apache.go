package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/hatrpc/hatrpc/internal/bench/apachegen/atb"
)

// maxMessage bounds Apache's frame and message sizes; its defaults are fine
// for 128 KiB but are set explicitly so every system runs with the same cap.
const maxMessage = 64 << 20

// ioBuffer is the buffered-transport size on both Apache ends: large enough
// that a 128 KiB echo is not split into dozens of small syscalls, which
// would handicap Apache against a runtime that writes whole frames.
const ioBuffer = 256 << 10

// Apache is Apache Thrift Go's TSimpleServer (a goroutine per connection)
// with the binary protocol, over a buffered transport or, with Framed set,
// a framed transport on top of a buffered one. Clients get one connection
// each because Apache clients are not safe for concurrent use.
type Apache struct {
	Framed bool
}

// Name is "apache-buffered" or "apache-framed".
func (a Apache) Name() string {
	if a.Framed {
		return "apache-framed"
	}
	return "apache-buffered"
}

func apacheConf() *thrift.TConfiguration {
	return &thrift.TConfiguration{
		MaxMessageSize: maxMessage,
		MaxFrameSize:   maxMessage,
		ConnectTimeout: 5 * time.Second,
	}
}

func (a Apache) transportFactory(conf *thrift.TConfiguration) thrift.TTransportFactory {
	buffered := thrift.NewTBufferedTransportFactory(ioBuffer)
	if a.Framed {
		return thrift.NewTFramedTransportFactoryConf(buffered, conf)
	}
	return buffered
}

type apacheEcho struct{}

func (apacheEcho) Echo(_ context.Context, payload []byte) ([]byte, error) { return payload, nil }

type apacheServer struct {
	srv  *thrift.TSimpleServer
	addr string
	done chan struct{}
}

func (s *apacheServer) Addr() string { return s.addr }

func (s *apacheServer) Stop(ctx context.Context) error {
	stopped := make(chan error, 1)
	go func() { stopped <- s.srv.Stop() }()
	select {
	case err := <-stopped:
		<-s.done
		return err
	case <-ctx.Done():
		return fmt.Errorf("apache server stop: %w", ctx.Err())
	}
}

// Serve starts a TSimpleServer on addr.
func (a Apache) Serve(_ context.Context, addr string) (Server, error) {
	conf := apacheConf()
	sock, err := thrift.NewTServerSocket(addr)
	if err != nil {
		return nil, err
	}
	srv := thrift.NewTSimpleServer4(atb.NewEchoProcessor(apacheEcho{}), sock,
		a.transportFactory(conf), thrift.NewTBinaryProtocolFactoryConf(conf))
	// AcceptLoop (unlike Serve) leaves the log context unset, and Apache
	// dereferences it when a connection ends with an error.
	srv.SetLogContext(context.Background())
	if err := srv.Listen(); err != nil {
		return nil, err
	}
	s := &apacheServer{srv: srv, addr: sock.Addr().String(), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		_ = srv.AcceptLoop()
	}()
	return s, nil
}

type apacheCaller struct {
	c     *atb.EchoClient
	trans thrift.TTransport
}

func (c *apacheCaller) Echo(ctx context.Context, payload []byte) ([]byte, error) {
	return c.c.Echo(ctx, payload)
}

func (c *apacheCaller) Close() error { return c.trans.Close() }

// Callers opens one Apache connection per caller.
func (a Apache) Callers(_ context.Context, addr string, n int) ([]Caller, error) {
	conf := apacheConf()
	out := make([]Caller, 0, n)
	for i := 0; i < n; i++ {
		trans, err := a.transportFactory(conf).GetTransport(thrift.NewTSocketConf(addr, conf))
		if err == nil {
			err = trans.Open()
		}
		if err != nil {
			_ = CloseAll(out)
			return nil, fmt.Errorf("apache dial %s: %w", addr, err)
		}
		out = append(out, &apacheCaller{
			c:     atb.NewEchoClientFactory(trans, thrift.NewTBinaryProtocolFactoryConf(conf)),
			trans: trans,
		})
	}
	return out, nil
}

func init() {
	Register(Apache{})
	Register(Apache{Framed: true})
}
