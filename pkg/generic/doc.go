// Package generic calls and serves Thrift functions without generated
// code: it loads the IDL at run time with pkg/idl and encodes and decodes
// arguments, results and exceptions from the IDL's types, through the
// same client.Conn (and server.Server) generated code uses, so every
// framing, protocol, THeader, TLS, headers and the fast path work alike.
//
//	d, _ := generic.Load("kv.thrift")         // includes resolved
//	svc, _ := d.Service("KV")
//	c := generic.NewClient(svc, conn)          // conn: *client.Conn, cluster.Client
//	out, err := c.CallJSON(ctx, "get", []byte(`{"key":"k"}`))
//	v, err := c.Call(ctx, "get", map[string]any{"key": "k"})
//
//	srv.Register(svc.Server(func(ctx context.Context, method string, args []byte) ([]byte, error) { ... }))
//	srv.Register(svc.Proxy(backend))           // forwards bytes, decodes nothing
//	reply, err := generic.Forward(ctx, conn, requestMessage)
//
// Values follow Kitex's JSON and map generic calls where JSON allows, with
// these choices (docs/generic.md has the whole table): structs are
// objects keyed by IDL field name; i64 are JSON numbers, exact in both
// directions (numbers are read with json.Number, never through float64),
// and a decimal string is accepted for any integer for readers that lose
// digits beyond 2^53; binary is base64; enums are written by name and read
// by name or number (a number the IDL does not declare passes, as Thrift
// enums are open); maps with string, integer, bool, enum, binary or uuid
// keys are objects with the key as a string, others (struct, double,
// container keys) arrays of {"key": k, "value": v}, and either form is read
// for any map; doubles JSON cannot hold are "NaN", "Infinity",
// "-Infinity"; uuid is its 8-4-4-4-12 string.
//
// A value that does not match the IDL is refused before anything is sent
// with a *ValueError naming its path ("args.req.items[3].name: want string,
// got number"); decoding is bounded by proto.Limits and fails as generated
// code fails.
package generic
