// Package testutil holds the pieces the interop and fault tests share: the
// Apache Thrift side (server, client suite), the Python driver and the
// reference behaviour of the Interop service that every implementation of
// it must follow.
package testutil

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/require"

	ai "github.com/hatrpc/hatrpc/test/apachegen/interop"
)

// Framing and Protocol name the Apache transport stack a test drives; the
// Python script takes the same words on its command line.
type Framing string

// Protocol is the Thrift wire protocol, by its Apache name.
type Protocol string

const (
	Framed   Framing  = "framed"
	Buffered Framing  = "buffered"
	Binary   Protocol = "binary"
	Compact  Protocol = "compact"
	JSON     Protocol = "json" // Apache's TJSONProtocol
	// Header is Apache's THeaderProtocol (binary inside); only the
	// Python client takes it (PyHeaderStacks).
	Header Protocol = "header"
)

// Stack is one Apache transport + protocol combination.
type Stack struct {
	Framing  Framing
	Protocol Protocol
}

func (s Stack) String() string { return string(s.Framing) + "+" + string(s.Protocol) }

// Stacks are the combinations issue 4 names: framed+binary (the Thrift
// default for non-blocking servers) and buffered+compact.
var Stacks = []Stack{{Framed, Binary}, {Buffered, Compact}}

// JSONStacks are TJSONProtocol over both of Apache's transports.
var JSONStacks = []Stack{{Buffered, JSON}, {Framed, JSON}}

// PyHeaderStacks are Python's THeader stacks a HatRPC server answers:
// on a bare socket and inside TFramedTransport.
var PyHeaderStacks = []Stack{{Buffered, Header}, {Framed, Header}}

// PyZlibStacks are Python's stacks over its TZlibTransport (Apache's
// TestClient.py --zlib): compressed on the socket, or inside frames.
var PyZlibStacks = []Stack{{Buffered + "-zlib", Binary}, {Framed + "-zlib", Compact}}

// MaxPayload is the largest message any interop test sends (a 16 MiB binary
// plus headers); Apache's defaults (16,384,000-byte frames) are below it.
const MaxPayload = 64 << 20

// ApacheConf is the Apache configuration used on both of its sides; the
// socket timeout makes a stuck peer fail a call instead of hanging the test.
func ApacheConf() *thrift.TConfiguration {
	return &thrift.TConfiguration{
		MaxMessageSize: MaxPayload,
		MaxFrameSize:   MaxPayload,
		ConnectTimeout: 5 * time.Second,
		SocketTimeout:  20 * time.Second,
	}
}

func (s Stack) transportFactory(conf *thrift.TConfiguration) thrift.TTransportFactory {
	if s.Framing == Framed {
		return thrift.NewTFramedTransportFactoryConf(thrift.NewTTransportFactory(), conf)
	}
	return thrift.NewTBufferedTransportFactory(64 << 10)
}

func (s Stack) protocolFactory(conf *thrift.TConfiguration) thrift.TProtocolFactory {
	switch s.Protocol {
	case Compact:
		return thrift.NewTCompactProtocolFactoryConf(conf)
	case JSON:
		return thrift.NewTJSONProtocolFactory()
	}
	return thrift.NewTBinaryProtocolFactoryConf(conf)
}

// ErrUndeclared is what the reference handler returns for mayFail(3): an
// error the IDL does not declare, which must reach the caller as an
// INTERNAL_ERROR application exception.
var ErrUndeclared = errors.New("undeclared failure")

// ApacheHandler is the reference Interop implementation on Apache's side.
type ApacheHandler struct {
	mu    sync.Mutex
	notes []string
}

var _ ai.Interop = (*ApacheHandler)(nil)

func (h *ApacheHandler) Ping(context.Context) error { return nil }

func (h *ApacheHandler) EchoAll(_ context.Context, v *ai.AllTypes) (*ai.AllTypes, error) {
	return v, nil
}

func (h *ApacheHandler) EchoBinary(_ context.Context, data []byte) ([]byte, error) {
	return data, nil
}

func (h *ApacheHandler) EchoString(_ context.Context, s string) (string, error) { return s, nil }

func (h *ApacheHandler) Add(_ context.Context, a int32, b int64) (int64, error) {
	return int64(a) + b, nil
}

func (h *ApacheHandler) MayFail(_ context.Context, code int32) (int32, error) {
	switch code {
	case 0:
		return 42, nil
	case 1:
		return 0, &ai.InteropError{Code: 1, Message: "boom"}
	case 2:
		return 0, &ai.OtherError{Reason: "other"}
	default:
		return 0, ErrUndeclared
	}
}

func (h *ApacheHandler) Notify(_ context.Context, msg string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.notes = append(h.notes, msg)
	return nil
}

func (h *ApacheHandler) DrainNotes(context.Context) ([]string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.notes
	h.notes = nil
	if out == nil {
		out = []string{}
	}
	return out, nil
}

func (h *ApacheHandler) Sleep(ctx context.Context, ms int32) (int32, error) {
	t := time.NewTimer(time.Duration(ms) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return ms, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// StartApacheServer runs an Apache TSimpleServer with the reference handler
// on 127.0.0.1 and stops it when the test ends.
func StartApacheServer(t testing.TB, s Stack) (addr string, h *ApacheHandler) {
	t.Helper()
	h = &ApacheHandler{}
	conf := ApacheConf()
	sock, err := thrift.NewTServerSocketTimeout("127.0.0.1:0", conf.SocketTimeout)
	require.NoError(t, err)
	srv := thrift.NewTSimpleServer4(ai.NewInteropProcessor(h), sock,
		s.transportFactory(conf), s.protocolFactory(conf))
	RunApacheServer(t, srv)
	return sock.Addr().String(), h
}

// RunApacheServer listens and accepts on srv until the test ends, then
// stops it and waits for its accept loop.
func RunApacheServer(t testing.TB, srv *thrift.TSimpleServer) {
	t.Helper()
	// AcceptLoop (unlike Serve) leaves the log context unset, and Apache
	// dereferences it when a connection ends with an error.
	srv.SetLogContext(context.Background())
	require.NoError(t, srv.Listen())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.AcceptLoop()
	}()
	t.Cleanup(func() {
		require.NoError(t, srv.Stop())
		<-done
	})
}

// DialApache opens an Apache Go client with the given stack; Apache clients
// are not safe for concurrent use, so callers use one per goroutine.
func DialApache(t testing.TB, addr string, s Stack) *ai.InteropClient {
	t.Helper()
	c, closer, err := DialApacheErr(addr, s)
	require.NoError(t, err)
	t.Cleanup(func() { _ = closer() })
	return c
}

// DialApacheErr is DialApache for code that must not fail the test from a
// goroutine; the returned func closes the connection.
func DialApacheErr(addr string, s Stack) (*ai.InteropClient, func() error, error) {
	conf := ApacheConf()
	sock := thrift.NewTSocketConf(addr, conf)
	trans, err := s.transportFactory(conf).GetTransport(sock)
	if err != nil {
		return nil, nil, err
	}
	if err := trans.Open(); err != nil {
		return nil, nil, fmt.Errorf("open %s: %w", addr, err)
	}
	pf := s.protocolFactory(conf)
	return ai.NewInteropClientFactory(trans, pf), trans.Close, nil
}

// DialApacheMux is DialApache through Apache's TMultiplexedProtocol,
// calling service "Interop" (Apache's multiplexed stacks, e.g. multij).
func DialApacheMux(t testing.TB, addr string, s Stack) *ai.InteropClient {
	t.Helper()
	conf := ApacheConf()
	trans, err := s.transportFactory(conf).GetTransport(thrift.NewTSocketConf(addr, conf))
	require.NoError(t, err)
	require.NoError(t, trans.Open())
	t.Cleanup(func() { _ = trans.Close() })
	p := thrift.NewTMultiplexedProtocol(s.protocolFactory(conf).GetProtocol(trans), "Interop")
	return ai.NewInteropClient(thrift.NewTStandardClient(p, p))
}

// ListenLocal is a 127.0.0.1 listener on a free port.
func ListenLocal(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	return ln
}

func splitHostPort(addr string) (string, string, error) { return net.SplitHostPort(addr) }
