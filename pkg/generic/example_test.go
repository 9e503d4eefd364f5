package generic_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/generic"
	"github.com/hatrpc/hatrpc/pkg/server"
)

// A generic server and a generic client of the echo example's IDL, neither
// with generated code.
func Example() {
	ctx := context.Background()
	d, err := generic.Load("../../examples/echo/echo.thrift")
	if err != nil {
		panic(err)
	}
	svc, err := d.Service("Echo")
	if err != nil {
		panic(err)
	}

	srv := server.New()
	srv.Register(svc.Server(func(ctx context.Context, method string, args []byte) ([]byte, error) {
		var a struct {
			Msg string `json:"msg"`
		}
		if err := json.Unmarshal(args, &a); err != nil {
			return nil, err
		}
		if a.Msg == "" {
			return nil, &generic.Exception{Type: "EchoError", JSON: []byte(`{"message":"empty"}`)}
		}
		return json.Marshal(a.Msg)
	}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Shutdown(ctx)

	conn, err := client.Dial(ctx, ln.Addr().String())
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	c := generic.NewClient(svc, conn)

	out, err := c.CallJSON(ctx, "echo", []byte(`{"msg":"hello"}`))
	fmt.Println(string(out), err)

	_, err = c.CallJSON(ctx, "echo", []byte(`{"msg":""}`))
	var ex *generic.Exception
	if errors.As(err, &ex) {
		fmt.Println(ex.Field, ex.Type, string(ex.JSON))
	}

	_, err = c.CallJSON(ctx, "echo", []byte(`{"msg":5}`))
	fmt.Println(err)
	// Output:
	// "hello" <nil>
	// err EchoError {"message":"empty"}
	// args.msg: want string, got number
}

// Map arguments and results: values as docs/generic.md maps them (i64 as
// int64, binary as []byte, enums by name).
func ExampleClient_Call() {
	d, err := generic.Load("testdata/kinds.thrift")
	if err != nil {
		panic(err)
	}
	svc, err := d.Service("Kinds")
	if err != nil {
		panic(err)
	}
	// A client over a caller that never sends: the arguments are checked
	// against the IDL before anything is sent.
	c := generic.NewClient(svc, nil)
	_, err = c.Call(context.Background(), "put", map[string]any{"item": map[string]any{"count": 1}})
	fmt.Println(err)
	// Output:
	// args.item.name: required field missing
}
