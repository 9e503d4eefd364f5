package fault_test

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"math/rand"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/testutil"
)

// outcome is what a hostile byte sequence may lead to. Either way the
// connection must not hang: the server answers or closes within the read
// timeout.
type outcome int

const (
	// mustClose: the stream cannot be resynchronised (unknown protocol,
	// broken framing), so the server closes, possibly after an exception.
	mustClose outcome = iota
	// exceptionOrClose: the frame is intact but its contents are bad; the
	// server may answer with an exception and keep the connection.
	exceptionOrClose
	// httpError: an HTTP request (Thrift over HTTP), answered with an
	// HTTP error status, then closed as the request asks.
	httpError
)

// allocBound is how much a single hostile input may make the whole test
// process allocate. The 2 GiB lengths below would blow far past it if any
// reader trusted them.
const allocBound = 64 << 20

func binaryMsg(name string, typ proto.MessageType, body func(w *proto.BinaryWriter)) []byte {
	w := proto.NewBinaryWriter(nil)
	w.WriteMessageBegin(name, typ, 1)
	body(w)
	return w.Bytes()
}

func framed(msg []byte) []byte { return proto.AppendFrame(nil, msg) }

func be32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func garbageCases() []struct {
	name string
	data []byte
	want outcome
} {
	rnd := make([]byte, 4096)
	rand.New(rand.NewSource(4)).Read(rnd)
	rnd[0] = 0xff // not a Thrift opening whatever the seed gives

	emptyStruct := func(w *proto.BinaryWriter) { w.WriteStructBegin(); w.WriteFieldStop(); w.WriteStructEnd() }
	deep := func(w *proto.BinaryWriter) {
		w.WriteStructBegin()
		for i := 0; i < 500; i++ {
			w.WriteFieldBegin(proto.STRUCT, 1)
			w.WriteStructBegin()
		}
		// left unterminated on purpose: the depth limit must trip first
	}
	hugeList := func(w *proto.BinaryWriter) {
		w.WriteStructBegin()
		w.WriteFieldBegin(proto.LIST, 2)
		w.WriteListBegin(proto.I64, 1<<31-1)
		w.WriteI64(1)
	}
	stringHeader := binaryMsg("echoString", proto.Call, func(w *proto.BinaryWriter) {
		w.WriteStructBegin()
		w.WriteFieldBegin(proto.STRING, 1)
	})
	compactBadType := []byte{0x82, 0x21, 0x01, 0x04, 'p', 'i', 'n', 'g', 0x1f, 0x00}

	return []struct {
		name string
		data []byte
		want outcome
	}{
		{"random bytes", rnd, mustClose},
		// Served as HTTP (a 405), then closed as the request asks.
		{"http request", []byte("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"), httpError},
		{"http request with garbage headers", []byte("POST / HTTP/1.1\r\n\x00\xff\r\n\r\n"), httpError},
		{"http garbage body", []byte("POST / HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 4\r\n\r\n\x80\x01\xff\xff"), httpError},
		{"zero frame length", make([]byte, 8), mustClose},
		{"frame length 2GiB", cat(be32(1<<31), []byte{0x80, 0x01, 0x00, 0x01}), mustClose},
		{"frame length 2GiB-1", cat(be32(1<<31-1), []byte{0x80, 0x01, 0x00, 0x01, 0, 0, 0, 4}), mustClose},
		{"compact frame length 2GiB-1", cat(be32(1<<31-1), []byte{0x82, 0x21, 0x01, 0x04}), mustClose},
		{"method name length 2GiB", []byte{0x80, 0x01, 0x00, 0x01, 0x7f, 0xff, 0xff, 0xff, 'a'}, mustClose},
		{"unframed string length 2GiB", cat(stringHeader, be32(1<<31-1), []byte("abc")), mustClose},
		{"framed string length 2GiB", framed(cat(stringHeader, be32(1<<31-1), []byte("abc"))), exceptionOrClose},
		{"framed list of 2^31-1 i64", framed(binaryMsg("sleep", proto.Call, hugeList)), exceptionOrClose},
		{"framed nesting depth 500", framed(binaryMsg("ping", proto.Call, deep)), exceptionOrClose},
		{"framed reply sent to server", framed(binaryMsg("ping", proto.Reply, emptyStruct)), exceptionOrClose},
		{"bad binary version", []byte{0x80, 0x02, 0x00, 0x01, 0, 0, 0, 4, 'p', 'i', 'n', 'g'}, mustClose},
		{"compact bad field type", compactBadType, mustClose},
		{"hatrpc frame length 2GiB", hatrpcFrame(1<<31-1, wire.KindCall), mustClose},
		{"hatrpc bad frame kind", hatrpcFrame(16, 9), mustClose},
	}
}

// hatrpcFrame is a HatRPC frame header after a successful handshake; the
// handshake itself is sent by sendGarbage when the data starts with it.
func hatrpcFrame(length uint32, kind wire.Kind) []byte {
	h := make([]byte, wire.HeaderSize)
	binary.BigEndian.PutUint32(h, length)
	h[4] = byte(kind)
	return cat(helloMarker, h)
}

// helloMarker prefixes data that must be sent after the HatRPC handshake.
var helloMarker = []byte("\x00HELLO\x00")

// handshake upgrades a raw connection to HatRPC framing the way a HatRPC
// client does: a framed binary __hatrpc_hello call.
func handshake(t *testing.T, c net.Conn, br *bufio.Reader) {
	t.Helper()
	msg, err := proto.EncodeFramedMessage(proto.Binary, nil, wire.HelloMethod, proto.Call, 1,
		&wire.Hello{Version: wire.Version, Caps: wire.CapFraming, MaxFrame: 1 << 20})
	require.NoError(t, err)
	_, err = c.Write(msg)
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(testenv.HangGuard(5*time.Second))))
	var n [4]byte
	_, err = io.ReadFull(br, n[:])
	require.NoError(t, err)
	body := make([]byte, binary.BigEndian.Uint32(n[:]))
	_, err = io.ReadFull(br, body)
	require.NoError(t, err)
	var rep wire.HelloReply
	h, err := proto.DecodeMessage(proto.Binary, body, nil, &rep)
	require.NoError(t, err)
	require.Equal(t, proto.Reply, h.Type)
	require.Equal(t, wire.CapFraming, rep.Caps&wire.CapFraming, "server did not upgrade")
}

// sendGarbage writes data and reports what the server did within 5s:
// closed (EOF or reset), answered with an exception, or hung.
func sendGarbage(t *testing.T, addr string, data []byte, want outcome) (closed bool, answer []byte) {
	t.Helper()
	c := testutil.DialRaw(t, addr)
	br := bufio.NewReader(c)
	if rest, ok := cutPrefix(data, helloMarker); ok {
		handshake(t, c, br)
		data = rest
	}
	// The server may close while we are still writing; that is fine.
	_ = c.SetWriteDeadline(time.Now().Add(testenv.HangGuard(5 * time.Second)))
	_, _ = c.Write(data)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(testenv.HangGuard(5*time.Second))))
	buf := make([]byte, 64<<10)
	for {
		n, err := br.Read(buf)
		answer = append(answer, buf[:n]...)
		if err == nil {
			if want == exceptionOrClose && isException(answer) {
				return false, answer // answered; the connection may stay
			}
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return false, answer
		}
		return true, answer // EOF or connection reset
	}
}

func cutPrefix(b, p []byte) ([]byte, bool) {
	if len(b) >= len(p) && string(b[:len(p)]) == string(p) {
		return b[len(p):], true
	}
	return b, false
}

// isException reports whether answer holds a whole Thrift exception
// message (an ApplicationException body) in either protocol, unframed,
// framed or HatRPC-framed.
func isException(answer []byte) bool {
	for _, skip := range []int{0, 4, wire.HeaderSize} {
		if len(answer) <= skip {
			continue
		}
		for _, p := range []proto.Protocol{proto.Binary, proto.Compact} {
			var exc proto.ApplicationException
			h, err := proto.DecodeMessage(p, answer[skip:], nil, &exc)
			if err == nil && h.Type == proto.Exception && exc.Message != "" {
				return true
			}
		}
	}
	return false
}

func TestGarbageInput(t *testing.T) {
	h := testutil.NewSleepHandler()
	srv := testutil.StartServer(t, []*server.Service{testutil.SleepService(h)})
	probe := testutil.StartProber(t, srv.Addr, 2*time.Millisecond)
	before := testutil.Snapshot()

	for _, tc := range garbageCases() {
		t.Run(tc.name, func(t *testing.T) {
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			closed, answer := sendGarbage(t, srv.Addr, tc.data, tc.want)
			runtime.ReadMemStats(&m1)

			switch tc.want {
			case mustClose:
				assert.True(t, closed, "server kept the connection open (answered %d bytes)", len(answer))
			case exceptionOrClose:
				assert.True(t, closed || isException(answer),
					"server neither closed nor answered with an exception (answered %q)", answer)
			case httpError:
				assert.True(t, closed, "server kept the connection open (answered %q)", answer)
				assert.Regexp(t, `^HTTP/1\.1 4\d\d `, string(answer))
			}
			if len(answer) > 0 && tc.want != httpError {
				assert.True(t, isException(answer), "the only acceptable answer is an exception, got %q", answer)
			}
			assert.Less(t, m1.TotalAlloc-m0.TotalAlloc, uint64(allocBound),
				"the input made the process allocate %d MiB", (m1.TotalAlloc-m0.TotalAlloc)>>20)
		})
	}

	// The server is still there for new connections, too.
	c := testutil.DialApache(t, srv.Addr, testutil.Stack{Framing: testutil.Framed, Protocol: testutil.Binary})
	require.NoError(t, c.Ping(t.Context()))
	probe.Check(t)

	after := testutil.WaitSettled(before.Goroutines+4, 10*time.Second)
	t.Logf("before %v; after %v; bystander pings %d", before, after, probe.Successes())
	assert.LessOrEqual(t, after.Goroutines, before.Goroutines+4, "goroutines leaked per bad connection")
	assert.Less(t, after.HeapInuse, before.HeapInuse+allocBound)
}
