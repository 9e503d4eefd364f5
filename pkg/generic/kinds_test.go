package generic_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/generic"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/testutil"
)

func loadKinds(t testing.TB, opts ...generic.Option) *generic.Service {
	t.Helper()
	d, err := generic.Load("testdata/kinds.thrift", opts...)
	require.NoError(t, err)
	svc, err := d.Service("Kinds")
	require.NoError(t, err)
	return svc
}

// refuse is a Caller that fails every call: bad input must be refused
// before anything is sent.
type refuse struct{ t *testing.T }

func (r refuse) Call(context.Context, *client.Method, proto.Struct, proto.Struct) error {
	r.t.Error("a call was sent")
	return errors.New("sent")
}

func (r refuse) CallBorrowed(ctx context.Context, m *client.Method, a, res proto.Struct, _ func() error) error {
	return r.Call(ctx, m, a, res)
}

// TestBadInput: every mismatch between JSON and the IDL is refused with
// the path of the field, nothing is sent.
func TestBadInput(t *testing.T) {
	deep := `{"label":"x"}`
	for i := 0; i < 70; i++ {
		deep = `{"label":"x","kids":[` + deep + `]}`
	}
	tests := []struct {
		name, method, args, want string
	}{
		{"wrong type", "put", `{"item":{"name":5}}`, "args.item.name: want string, got number"},
		{"missing required", "put", `{"item":{"count":1}}`, "args.item.name: required field missing"},
		{"unknown field", "put", `{"item":{"name":"a","cnt":1}}`, `args.item: unknown field "cnt" (Item has name, count)`},
		{"unknown argument", "put", `{"itm":{}}`, `args: unknown field "itm" (put_args has item, small)`},
		{"i8 out of range", "put", `{"item":{"name":"a"},"small":200}`, "args.small: 200 out of range for i8"},
		{"i16 out of range", "put", `{"item":{"name":"a","count":-40000}}`, "args.item.count: -40000 out of range for i16"},
		{"fraction", "put", `{"item":{"name":"a"},"small":1.5}`, "args.small: want i8, got 1.5"},
		{"i64 beyond range", "echo", `{"v":{"at":9223372036854775808}}`, "args.v.at: 9223372036854775808 out of range for i64"},
		{"i64 bad string", "echo", `{"v":{"at":"12x"}}`, `args.v.at: want i64, got string "12x"`},
		{"enum name", "echo", `{"v":{"level":"MEDIUM"}}`, `args.v.level: "MEDIUM" is not a value of enum Level (LOW=1, HIGH=10)`},
		{"enum beyond i32", "echo", `{"v":{"level":4294967296}}`, "args.v.level: 4294967296 out of range for enum Level"},
		{"enum key", "echo", `{"v":{"byLevel":{"MID":1}}}`, `args.v.byLevel["MID"]: "MID" is not a value of enum Level (LOW=1, HIGH=10)`},
		{"list element", "echo", `{"v":{"items":[{"name":"a"},{"name":"b"},{"name":"c"},{"name":7}]}}`, "args.v.items[3].name: want string, got number"},
		{"list not array", "echo", `{"v":{"items":{}}}`, "args.v.items: want array, got object"},
		{"uuid", "echo", `{"v":{"id":"not-a-uuid"}}`, `args.v.id: want a uuid like 00112233-4455-6677-8899-aabbccddeeff, got "not-a-uuid"`},
		{"base64", "echo", `{"v":{"blobs":["!!"]}}`, `args.v.blobs[0]: want base64, got "!!": illegal base64 data at input byte 0`},
		{"union two", "echo", `{"v":{"choice":{"name":"a","number":1}}}`, "args.v.choice: union Choice needs exactly one field set, has 2"},
		{"union none", "echo", `{"v":{"choice":{}}}`, "args.v.choice: union Choice needs exactly one field set, has 0"},
		{"struct key as object", "echo", `{"v":{"byPoint":{"1,2":"a"}}}`, `args.v.byPoint["1,2"]: key: a Point key needs the array of {"key","value"} form`},
		{"pair shape", "echo", `{"v":{"byPoint":[{"key":{"x":1}}]}}`, `args.v.byPoint[0]: want exactly "key" and "value"`},
		{"pair key type", "echo", `{"v":{"byPoint":[{"key":{"x":true},"value":"a"}]}}`, "args.v.byPoint[0].key.x: want i32, got bool"},
		{"bool key", "echo", `{"v":{"byNumber":{"x":true}}}`, `args.v.byNumber["x"]: want i64, got x`},
		{"bool", "echo", `{"v":{"byNumber":{"1":"yes"}}}`, `args.v.byNumber["1"]: want bool, got string`},
		{"double", "echo", `{"v":{"ratio":"lots"}}`, `args.v.ratio: want double, got string "lots"`},
		{"included type", "echo", `{"v":{"tag":{"key":1}}}`, "args.v.tag.key: want string, got number"},
		{"too deep", "echo", `{"v":{"tree":` + deep + `}}`, "nesting deeper than 64"},
		{"not an object", "echo", `[1]`, "args: want object, got array"},
		{"bad JSON", "echo", `{"v":`, "args: invalid JSON: unexpected EOF"},
		{"two values", "echo", `{} {}`, "args: invalid JSON: more than one value"},
	}
	c := generic.NewClient(loadKinds(t), refuse{t})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.CallJSON(context.Background(), tt.method, []byte(tt.args))
			require.Error(t, err)
			if tt.name == "too deep" {
				assert.Contains(t, err.Error(), tt.want)
			} else {
				assert.Equal(t, tt.want, err.Error())
			}
			if tt.name != "bad JSON" && tt.name != "two values" {
				assert.ErrorIs(t, err, generic.ErrBadValue)
			}
		})
	}
}

// TestBadMapInput: the map form is checked the same way.
func TestBadMapInput(t *testing.T) {
	c := generic.NewClient(loadKinds(t), refuse{t})
	_, err := c.Call(context.Background(), "put", map[string]any{"item": map[string]any{"name": []int{1}}})
	assert.EqualError(t, err, "args.item.name: want string, got array")
	_, err = c.Call(context.Background(), "put", map[string]any{"item": map[string]any{"name": "a"}, "small": struct{}{}})
	assert.EqualError(t, err, "args.small: want i8, got struct {}")
}

// TestKindsRoundTrip: every kind goes through a generic server and back in
// both protocols, with the output mapping docs/generic.md describes.
func TestKindsRoundTrip(t *testing.T) {
	svc := loadKinds(t)
	echo := func(_ context.Context, method string, args []byte) ([]byte, error) {
		switch method {
		case "echo":
			var a map[string]json.RawMessage
			if err := json.Unmarshal(args, &a); err != nil {
				return nil, err
			}
			return a["v"], nil
		case "version":
			return []byte(`"1.0"`), nil
		case "put":
			return nil, &generic.Exception{Type: "Oops", JSON: []byte(`{"why":"full","code":7}`)}
		}
		return nil, errors.New("unexpected " + method)
	}
	r := testutil.StartServerWith(t, func(s *server.Server) { s.Register(svc.Server(echo)) })
	in := `{"id":"00112233-4455-6677-8899-aabbccddeeff","at":"9007199254740993","level":10,` +
		`"byPoint":[{"key":{"x":1,"y":2},"value":"a"}],"byLevel":{"LOW":-1,"HIGH":1},` +
		`"byNumber":{"-5":true},"choice":{"number":3},"tree":{"label":"r","kids":[{"label":"k"}]},` +
		`"items":[{"name":"i","count":2}],"tag":{"key":"k","value":"v"},"blobs":["AQI="],"ratio":"NaN",` +
		`"byBlob":{"AAE=":"x"}}`
	want := `{"id":"00112233-4455-6677-8899-aabbccddeeff","at":9007199254740993,"level":"HIGH",` +
		`"byPoint":[{"key":{"x":1,"y":2},"value":"a"}],"byLevel":{"HIGH":1,"LOW":-1},` +
		`"byNumber":{"-5":true},"choice":{"number":3},"tree":{"label":"r","kids":[{"label":"k"}]},` +
		`"items":[{"name":"i","count":2}],"tag":{"key":"k","value":"v"},"blobs":["AQI="],"ratio":"NaN",` +
		`"byBlob":{"AAE=":"x"}}`
	for _, p := range []proto.Protocol{proto.Binary, proto.Compact} {
		t.Run(p.String(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			conn, err := client.Dial(ctx, r.Addr, client.WithProtocol(p))
			require.NoError(t, err)
			defer conn.Close()
			c := generic.NewClient(svc, conn)
			out, err := c.CallJSON(ctx, "echo", []byte(`{"v":`+in+`}`))
			require.NoError(t, err)
			assert.Equal(t, want, string(out))

			out, err = c.CallJSON(ctx, "version", nil)
			require.NoError(t, err)
			assert.Equal(t, `"1.0"`, string(out))

			_, err = c.CallJSON(ctx, "put", []byte(`{"item":{"name":"n"}}`))
			var ex *generic.Exception
			require.True(t, errors.As(err, &ex), "%v", err)
			assert.Equal(t, "oops", ex.Field)
			assert.Equal(t, "shared.Oops", ex.Type)
			assert.Equal(t, `{"why":"full","code":7}`, string(ex.JSON))

			v, err := c.Call(ctx, "echo", map[string]any{"v": map[string]any{
				"byBlob": map[string]string{"AAE=": "y"}, "items": []map[string]any{{"name": "typed"}},
			}})
			require.NoError(t, err)
			assert.Equal(t, map[string]any{"byBlob": map[string]any{"AAE=": "y"}, "items": []any{map[string]any{"name": "typed"}}}, v,
				"typed Go maps and slices are taken")

			v, err = c.Call(ctx, "echo", map[string]any{"v": map[string]any{"at": int64(-3), "level": int32(99)}})
			require.NoError(t, err)
			assert.Equal(t, map[string]any{"at": int64(-3), "level": int32(99)}, v, "an undeclared enum value passes as a number")
		})
	}
}

// TestServerBadResult: a handler's result that does not match the IDL
// reaches the caller as an application exception naming the path.
func TestServerBadResult(t *testing.T) {
	svc := loadKinds(t)
	h := func(_ context.Context, method string, _ []byte) ([]byte, error) {
		switch method {
		case "echo":
			return []byte(`{"items":[{"count":1}]}`), nil
		case "put":
			return nil, &generic.Exception{Type: "Nope"}
		}
		return []byte(`5`), nil
	}
	r := testutil.StartServerWith(t, func(s *server.Server) { s.Register(svc.Server(h)) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := client.Dial(ctx, r.Addr)
	require.NoError(t, err)
	defer conn.Close()
	c := generic.NewClient(svc, conn)
	for method, want := range map[string]string{
		"echo":    "generic: result.success.items[0].name: required field missing",
		"version": "generic: result.success: want string, got number",
		"put":     `generic: put does not declare exception "Nope"`,
	} {
		args := `{}`
		switch method {
		case "echo":
			args = `{"v":{}}`
		case "put":
			args = `{"item":{"name":"x"}}`
		}
		_, err = c.CallJSON(ctx, method, []byte(args))
		var ae *proto.ApplicationException
		require.True(t, errors.As(err, &ae), "%s: %v", method, err)
		assert.Equal(t, proto.ExcInternalError, ae.Type)
		assert.Equal(t, want, ae.Message)
	}
}

// TestLookups: services, functions and types by bare and prefixed names.
func TestLookups(t *testing.T) {
	d, err := generic.Load("testdata/kinds.thrift")
	require.NoError(t, err)
	var names []string
	for _, s := range d.Services() {
		names = append(names, s.QualifiedName)
		_, err := s.Function("version")
		require.NoError(t, err, s.QualifiedName)
	}
	assert.Equal(t, []string{"Kinds", "shared.Base"}, names)
	for _, n := range []string{"shared.Base", "Base"} {
		svc, err := d.Service(n)
		require.NoError(t, err, n)
		assert.Equal(t, "Base", svc.Name())
	}
	_, err = d.Service("Nope")
	assert.EqualError(t, err, `no service "Nope" (have Kinds, shared.Base)`)
	assert.ErrorIs(t, err, generic.ErrNotFound)
	for _, n := range []string{"Point", "Level", "Millis", "shared.Oops"} {
		_, err := d.Type(n)
		assert.NoError(t, err, n)
	}
	_, err = d.Type("Oops")
	assert.ErrorIs(t, err, generic.ErrNotFound, "an included type needs its prefix")
	_, err = generic.Load("testdata/nope.thrift")
	assert.EqualError(t, err, "testdata/nope.thrift:1:1: cannot read file: no such file")
}
