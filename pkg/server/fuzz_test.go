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
	"github.com/hatrpc/hatrpc/test/wiretest"
)

func fuzzSeed(f *testing.F, p proto.Protocol, framed, hello bool, kind wire.Kind, body proto.Struct, name string) {
	c := wire.GetCodec()
	defer wire.PutCodec(c)
	var out []byte
	frameIt := func(msg []byte) []byte {
		if !framed {
			return msg
		}
		n := len(msg)
		return append([]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}, msg...)
	}
	if hello {
		m, _ := c.AppendMessage(nil, p, wire.HelloMethod, proto.Call, 0, &wire.Hello{Version: 1, Caps: wire.CapFraming})
		out = append(out, frameIt(m)...)
		fr := make([]byte, wire.HeaderSize)
		fr, _ = c.AppendMessage(fr, p, name, proto.Call, 1, body)
		var flags uint8
		if p == proto.Compact {
			flags = wire.FlagCompact
		}
		wire.SealFrame(fr, kind, flags, 1, time.Second)
		out = append(out, fr...)
	} else {
		m, _ := c.AppendMessage(nil, p, name, proto.Call, 1, body)
		out = append(out, frameIt(m)...)
	}
	f.Add(out)
}

// FuzzServe feeds arbitrary bytes to a live server connection: whatever
// arrives, the server must neither crash nor hang, and must keep serving.
func FuzzServe(f *testing.F) {
	for _, p := range []proto.Protocol{proto.Binary, proto.Compact} {
		for _, framed := range []bool{false, true} {
			fuzzSeed(f, p, framed, false, 0, &wiretest.EchoArgs{Msg: "hi"}, "echo")
			fuzzSeed(f, p, framed, false, 0, &wiretest.EchoArgs{Msg: "hi"}, "Echo:fire")
			fuzzSeed(f, p, framed, true, wire.KindCall, &wiretest.EchoArgs{Msg: "hi", Mode: wiretest.ModePanic}, "echo")
			fuzzSeed(f, p, framed, true, wire.KindOneway, &wiretest.EchoArgs{Msg: "hi"}, "fire")
		}
	}
	for _, framed := range []bool{false, true} {
		fuzzSeed(f, proto.JSON, framed, false, 0, &wiretest.EchoArgs{Msg: "hi", Blob: []byte{0, 1}}, "echo")
		fuzzSeed(f, proto.JSON, framed, false, 0, &wiretest.EchoArgs{Msg: "hi"}, "Echo:fire")
	}
	f.Add([]byte(`[1,"echo",1,1,{"1":{"str":"` + "\\" + `ud800"}}]`))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	headerSeeds(f)
	for _, b := range httpRequestSeeds() {
		f.Add(b)
	}
	zlibSeeds(f)

	var (
		once sync.Once
		addr string
	)
	srv := fuzzServer(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		once.Do(func() {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr = ln.Addr().String()
			go srv().Serve(ln)
		})
		nc, err := net.DialTimeout("tcp", addr, testenv.HangGuard(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		_ = nc.SetDeadline(time.Now().Add(testenv.HangGuard(5 * time.Second)))
		if _, err := nc.Write(in); err != nil {
			return // the server may close on garbage before reading it all
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

// fuzzServer returns a function making, on its first call, the one server
// of a fuzz run (like a production server facing a stream of hostile
// peers) with the echo service and small limits; closed when the run ends.
func fuzzServer(f *testing.F) func() *server.Server {
	var (
		once sync.Once
		srv  *server.Server
		echo *wiretest.Echo
	)
	f.Cleanup(func() {
		if srv != nil {
			srv.Close()
			close(echo.Fired)
		}
	})
	return func() *server.Server {
		once.Do(func() {
			echo = wiretest.NewEcho()
			go func() {
				for range echo.Fired {
				}
			}()
			srv = server.New(server.WithLogger(quiet), server.WithLimits(proto.Limits{
				MaxMessageSize: 1 << 16, MaxDepth: 16, MaxStringLength: 1 << 12, MaxContainerSize: 1 << 12}))
			srv.Register(echo.Service())
		})
		return srv
	}
}
