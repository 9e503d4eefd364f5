package server_test

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/testenv"
)

// FuzzServeStreams feeds arbitrary frames to a connection that negotiated
// streams (the hello is sent first): whatever they hold, the server must
// neither crash nor hang, and must end every stream when the client goes.
func FuzzServeStreams(f *testing.F) {
	seed := func(parts ...[]byte) { f.Add(cat(parts...)) }
	seed(openFrame(f, 1, "echo"), dataFrame(f, 1, "a"), endFrame(1))
	seed(openFrame(f, 1, "sum"), dataFrame(f, 1, "a"), dataFrame(f, 1, "b"), endFrame(1))
	seed(openFrame(f, 1, "count"), dataFrame(f, 1, "a"), wire.AppendWindowFrame(nil, 1, 1, 9))
	seed(openFrame(f, 1, "hold"), wire.AppendResetFrame(nil, 1, 0, "bye"), dataFrame(f, 1, "late"))
	seed(openFrame(f, 3, "echo"), openFrame(f, 3, "echo"), dataFrame(f, 5, "x"), wire.AppendWindowFrame(nil, 0, 0, 1))

	codec := wire.GetCodec()
	hello, err := codec.AppendMessage(nil, proto.Binary, wire.HelloMethod, proto.Call, 0,
		&wire.Hello{Version: wire.Version, Caps: wire.CapFraming | wire.CapStreams})
	wire.PutCodec(codec)
	if err != nil {
		f.Fatal(err)
	}
	var (
		once sync.Once
		addr string
		srv  *server.Server
		sv   = newStreamSvc()
	)
	f.Cleanup(func() {
		if srv != nil {
			srv.Close() // waits for the handlers
			close(sv.ended)
		}
	})
	f.Fuzz(func(t *testing.T, in []byte) {
		once.Do(func() {
			srv = server.New(server.WithLogger(quiet), server.WithStreamWindow(4, 1<<12, 1<<14),
				server.WithLimits(proto.Limits{MaxMessageSize: 1 << 16, MaxDepth: 16, MaxStringLength: 1 << 12, MaxContainerSize: 1 << 12}))
			srv.Register(sv.service())
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr = ln.Addr().String()
			go srv.Serve(ln)
			go func() {
				for range sv.ended { // the "hold" handlers' reports
				}
			}()
		})
		nc, err := net.DialTimeout("tcp", addr, testenv.HangGuard(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		_ = nc.SetDeadline(time.Now().Add(testenv.HangGuard(5 * time.Second)))
		if _, err := nc.Write(append(append([]byte(nil), hello...), in...)); err != nil {
			return
		}
		_ = nc.(*net.TCPConn).CloseWrite()
		if _, err := io.Copy(io.Discard, nc); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("server neither answered nor closed within 5s")
			}
		}
	})
}
