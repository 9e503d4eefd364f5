package idl

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/stream"
)

// streamTypes declares the message types the streaming cases use (lines 1-3).
const streamTypes = "struct Req { 1: string q }\nstruct Resp { 1: string a }\nexception Oops { 1: string m }\n"

func TestStreamingModes(t *testing.T) {
	src := streamTypes + `service S {
  Resp tail(1: Req req) (streaming.mode="server"),
  Resp upload(1: Req req) throws (1: Oops o) (streaming.mode="client")
  Resp chat(1: Req req) (streaming.mode = "bidirectional") [ hint: payload_size = 64KiB; ]
  Resp call(1: Req req) (streaming.mode="unary"),
  Resp plain(1: Req req, 2: i32 n) (other.key="x"),
}
`
	p, _, err := loadMap(t, map[string]string{"main.thrift": src})
	require.NoError(t, err)
	want := map[string]stream.Mode{"tail": stream.Server, "upload": stream.Client, "chat": stream.Bidi, "call": stream.None, "plain": stream.None}
	fns := p.Services[0].Functions
	require.Len(t, fns, len(want))
	for _, f := range fns {
		assert.Equal(t, want[f.Name], f.Stream, f.Name)
	}
	assert.Len(t, fns[2].Hints, 1, "hints after the annotation still parse")
}

func TestStreamingErrorsExactText(t *testing.T) {
	tests := []struct {
		name string
		svc  string // the service, from line 4 on
		want []string
	}{
		{"unknown mode", `service S {
  Resp f(1: Req req) (streaming.mode="both")
}`, []string{`main.thrift:5:23: unknown streaming.mode "both" on function S.f: want "server", "client" or "bidirectional"`}},
		{"mode twice", `service S {
  Resp f(1: Req req) (streaming.mode="server", streaming.mode="client")
}`, []string{`main.thrift:5:48: function S.f has more than one streaming.mode annotation (first at main.thrift:5:23)`}},
		{"oneway stream", `service S {
  oneway void f(1: Req req) (streaming.mode="client")
}`, []string{`main.thrift:5:30: oneway function S.f cannot stream: a stream has replies (streaming.mode="client")`}},
		{"void stream", `service S {
  void f(1: Req req) (streaming.mode="server")
}`, []string{`main.thrift:5:3: streaming function S.f must return a struct, not void: the server's messages are that struct`}},
		{"no argument", `service S {
  Resp f() (streaming.mode="bidirectional")
}`, []string{`main.thrift:5:8: streaming function S.f must take exactly one argument, a struct: the client's messages are that struct (it takes 0)`}},
		{"two arguments", `service S {
  Resp f(1: Req a, 2: Req b) (streaming.mode="client")
}`, []string{`main.thrift:5:8: streaming function S.f must take exactly one argument, a struct: the client's messages are that struct (it takes 2)`}},
		{"scalar argument", `service S {
  Resp f(1: string q) (streaming.mode="server")
}`, []string{`main.thrift:5:13: streaming function S.f: argument "q" has type string, not a struct: the client's messages must be a struct`}},
		{"exception argument", `service S {
  Resp f(1: Oops q) (streaming.mode="server")
}`, []string{`main.thrift:5:13: streaming function S.f: argument "q" has type Oops, an exception, not a struct: the client's messages must be a struct`}},
		{"list return", `service S {
  list<Resp> f(1: Req req) (streaming.mode="server")
}`, []string{`main.thrift:5:3: streaming function S.f: return type list<Resp> is not a struct: the server's messages must be a struct`}},
		{"retry hints", `service S {
  Resp f(1: Req req) (streaming.mode="server") [ c_hint: idempotent = on, retries = 3; ]
}`, []string{
			`main.thrift:5:58: hint "idempotent" does not apply to streaming function S.f: a stream is never retried or hedged`,
			`main.thrift:5:75: hint "retries" does not apply to streaming function S.f: a stream is never retried or hedged`,
		}},
		{"borrowed context on a stream", `service S {
  Resp f(1: Req req) (streaming.mode="bidirectional") [ s_hint: borrow_ctx = on; ]
}`, []string{
			`main.thrift:5:65: hint "borrow_ctx" does not apply to streaming function S.f: its handler's context lasts as long as the stream; a lane reuses only a unary call's`,
		}},
		{"window on a unary function", `service S {
  Resp f(1: Req req) [ s_hint: stream_window = 64KiB; ]
}`, []string{
			`main.thrift:5:32: hint "stream_window" applies to streaming functions only: S.f is not one (declare it with streaming.mode)`,
		}},
		{"borrowed messages on a unary function", `service S {
  Resp f(1: Req req) [ c_hint: borrow_msgs = on; ]
}`, []string{
			`main.thrift:5:32: hint "borrow_msgs" applies to streaming functions only: S.f is not one (declare it with streaming.mode)`,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, diags, err := loadMap(t, map[string]string{"main.thrift": streamTypes + tc.svc + "\n"})
			require.Error(t, err)
			got := make([]string, len(diags.Errors))
			for i, d := range diags.Errors {
				got[i] = d.Error()
			}
			assert.Equal(t, tc.want, got)
			assert.True(t, errors.Is(err, ErrStream), "%v", err)
		})
	}
}
