package main

import (
	"context"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/generic"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/testutil"
)

var logsIDL = filepath.Join("..", "..", "examples", "stream", "logs.thrift")

// hatrpcIn runs the command with stdin.
func hatrpcIn(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut strings.Builder
	code := run(args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestCallServerStream: hatkv's ScanStream printed one batch per line.
func TestCallServerStream(t *testing.T) {
	addr := startHatKV(t)
	for _, k := range []string{"a", "b", "c"} {
		code, _, errOut := hatrpc(t, "call", "--idl", hatkvIDL, addr, "HatKV.Put", `{"key":"`+k+`","fields":{"f":"AA=="}}`)
		require.Equal(t, 0, code, errOut)
	}
	code, out, errOut := hatrpc(t, "call", "--idl", hatkvIDL, addr, "HatKV.ScanStream", `{"start_key":"a","batch_records":2}`)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, `{"records":[{"key":"a","record":{"f":"AA=="}},{"key":"b","record":{"f":"AA=="}}]}`+"\n"+
		`{"records":[{"key":"c","record":{"f":"AA=="}}]}`+"\n", out)

	// The message from stdin, and the stream's declared exception.
	code, out, errOut = hatrpcIn(t, `{"start_key":"a","limit":1}`, "call", "--idl", hatkvIDL, addr, "HatKV.ScanStream", "-")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, `{"records":[{"key":"a","record":{"f":"AA=="}}]}`+"\n", out)
	code, out, errOut = hatrpc(t, "call", "--json", "--idl", hatkvIDL, addr, "HatKV.ScanStream", `{"start_key":"b","end_key":"a"}`)
	assert.Equal(t, 1, code, errOut)
	assert.Contains(t, out, `{"exception":"InvalidArgument","field":"bad"`)
}

// logsStreams serves the log service's client and bidirectional streams:
// upload counts chunks and bytes, chat answers every message.
func logsStreams(_ context.Context, method string, st *generic.ServerStream) ([]byte, error) {
	var chunks, n int
	for {
		m, err := st.Recv()
		if err == io.EOF {
			if method == "upload" {
				return []byte(`{"chunks":` + strconv.Itoa(chunks) + `,"bytes":` + strconv.Itoa(n) + `}`), nil
			}
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		switch method {
		case "upload":
			chunks++
			n += len(m["data"].([]byte))
		case "chat":
			if err := st.Send(map[string]any{"author": "server", "text": "heard " + m["text"].(string)}); err != nil {
				return nil, err
			}
		}
	}
}

// TestCallClientAndBidiStreams: messages from stdin, one per line.
func TestCallClientAndBidiStreams(t *testing.T) {
	d, err := generic.Load(logsIDL)
	require.NoError(t, err)
	svc, err := d.Service("Logs")
	require.NoError(t, err)
	unary := func(context.Context, string, []byte) ([]byte, error) { return []byte("0"), nil }
	srv := testutil.StartServer(t, []*server.Service{svc.Server(unary, generic.WithStreamHandler(logsStreams))})

	lines := `{"source":"app","data":"YWJj"}` + "\n\n" + `{"source":"app","data":"ZA=="}` + "\n"
	code, out, errOut := hatrpcIn(t, lines, "call", "--json", "--idl", logsIDL, srv.Addr, "Logs.upload", "-")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, `{"chunks":2,"bytes":4}`+"\n", out)

	code, out, errOut = hatrpcIn(t, `{"author":"me","text":"hi"}`+"\n"+`{"author":"me","text":"yo"}`, "call", "--idl", logsIDL, srv.Addr, "Logs.chat")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, `{"author":"server","text":"heard hi"}`+"\n"+`{"author":"server","text":"heard yo"}`+"\n", out)

	// One message as the argument.
	code, out, errOut = hatrpc(t, "call", "--json", "--idl", logsIDL, srv.Addr, "Logs.upload", `{"source":"app","data":"YWJj"}`)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, `{"chunks":1,"bytes":3}`+"\n", out)

	// A bad line ends the stream with its line number; nothing after it is sent.
	code, out, errOut = hatrpcIn(t, `{"source":"app","data":"YWJj"}`+"\n"+`{"source":"app","data":7}`+"\n",
		"call", "--idl", logsIDL, srv.Addr, "Logs.upload", "-")
	assert.Equal(t, 1, code)
	assert.Empty(t, out)
	assert.Equal(t, "hatrpc: bad message on stdin line 2: msg.data: want base64 string, got number\n", errOut)
}
