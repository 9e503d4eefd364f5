package server_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// httpBodySeeds are request bodies: one message or several, framed or
// not, binary or compact, a oneway call, an unknown method.
func httpBodySeeds() [][]byte {
	c := wire.GetCodec()
	defer wire.PutCodec(c)
	var seeds [][]byte
	for _, p := range []proto.Protocol{proto.Binary, proto.Compact} {
		echo, _ := c.AppendMessage(nil, p, "echo", proto.Call, 1, &wiretest.EchoArgs{Msg: "hi"})
		fire, _ := c.AppendMessage(nil, p, "Echo:fire", proto.Oneway, 2, &wiretest.EchoArgs{Msg: "hi"})
		missing, _ := c.AppendMessage(nil, p, "missing", proto.Call, 3, &wiretest.EchoArgs{})
		n := len(echo)
		framed := append([]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}, echo...)
		seeds = append(seeds, echo, framed, append(append(append([]byte{}, echo...), fire...), missing...),
			append(append([]byte{}, framed...), framed...))
	}
	return seeds
}

// httpRequestSeeds are whole HTTP requests on the server's port.
func httpRequestSeeds() [][]byte {
	var seeds [][]byte
	for _, b := range httpBodySeeds() {
		seeds = append(seeds,
			fmt.Appendf(nil, "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-thrift\r\nContent-Length: %d\r\n\r\n%s", len(b), b),
			fmt.Appendf(nil, "POST /t HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n", len(b), b))
	}
	return append(seeds, []byte("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999\r\n\r\n\x80\x01"))
}

// FuzzHTTPBody posts arbitrary bytes to the HTTP handler: whatever the
// body, the handler answers with a status it documents, never crashes or
// hangs, and a 200 carries a Thrift body.
func FuzzHTTPBody(f *testing.F) {
	for _, b := range httpBodySeeds() {
		f.Add(b)
	}
	f.Add([]byte("hello"))
	srv := fuzzServer(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := httptest.NewRecorder()
		srv().HTTPHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body)))
		switch rec.Code {
		case http.StatusOK:
			if ct := rec.Header().Get("Content-Type"); ct != server.ContentTypeThrift {
				t.Fatalf("200 with content type %q", ct)
			}
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		default:
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	})
}
