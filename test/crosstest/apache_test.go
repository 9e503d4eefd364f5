package crosstest_test

import (
	"compress/zlib"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/test/crosstest"
	at "github.com/hatrpc/hatrpc/test/crosstest/apachegen/thrifttest"
	"github.com/hatrpc/hatrpc/test/testutil"
)

// The Apache Go peer: Apache's Go library (go.mod's version) with Debian's
// thrift 0.17 code for ThriftTest, set up as Apache's cross-test programs
// set it up (test/go/src/common), multiplexed too.

func apacheConf() *thrift.TConfiguration {
	return &thrift.TConfiguration{
		ConnectTimeout: 10 * time.Second,
		SocketTimeout:  60 * time.Second,
		TLSConfig:      &tls.Config{InsecureSkipVerify: true}, // as Apache's test client
	}
}

func apacheProtocolFactory(s crosstest.Stack, conf *thrift.TConfiguration) thrift.TProtocolFactory {
	switch s.Base() {
	case "compact":
		return thrift.NewTCompactProtocolFactoryConf(conf)
	case "header":
		return thrift.NewTHeaderProtocolFactoryConf(conf)
	case "json":
		return thrift.NewTJSONProtocolFactory()
	}
	return thrift.NewTBinaryProtocolFactoryConf(conf)
}

func apacheTransportFactory(s crosstest.Stack, conf *thrift.TConfiguration) thrift.TTransportFactory {
	switch s.Transport {
	case "framed":
		return thrift.NewTFramedTransportFactoryConf(thrift.NewTTransportFactory(), conf)
	case "zlib":
		return thrift.NewTZlibTransportFactoryConf(zlib.BestCompression, thrift.NewTTransportFactory(), conf)
	}
	return thrift.NewTBufferedTransportFactory(8192)
}

// dialApache connects Apache's Go client in stack s; second is nil unless
// s is multiplexed.
func dialApache(t *testing.T, addr string, s crosstest.Stack) (*at.ThriftTestClient, *at.SecondServiceClient) {
	t.Helper()
	conf := apacheConf()
	var trans thrift.TTransport
	if s.Transport == "http" {
		// As Apache's test client: POSTs to /, the certificate unchecked.
		tr := &http.Transport{TLSClientConfig: conf.TLSConfig}
		t.Cleanup(tr.CloseIdleConnections)
		scheme := "http"
		if s.SSL {
			scheme = "https"
		}
		var err error
		trans, err = thrift.NewTHttpClientWithOptions(scheme+"://"+addr+"/", thrift.THttpClientOptions{Client: &http.Client{Transport: tr}})
		require.NoError(t, err)
	} else {
		var sock thrift.TTransport = thrift.NewTSocketConf(addr, conf)
		if s.SSL {
			sock = thrift.NewTSSLSocketConf(addr, conf)
		}
		var err error
		trans, err = apacheTransportFactory(s, conf).GetTransport(sock)
		require.NoError(t, err)
	}
	require.NoError(t, trans.Open())
	t.Cleanup(func() { _ = trans.Close() })
	pf := apacheProtocolFactory(s, conf)
	proto := func(service string) thrift.TProtocol {
		p := pf.GetProtocol(trans)
		if s.Multiplexed() {
			return thrift.NewTMultiplexedProtocol(p, service)
		}
		return p
	}
	c := at.NewThriftTestClient(thrift.NewTStandardClient(proto("ThriftTest"), proto("ThriftTest")))
	if !s.Multiplexed() {
		return c, nil
	}
	return c, at.NewSecondServiceClient(thrift.NewTStandardClient(proto("SecondService"), proto("SecondService")))
}

// startApacheServer runs Apache's TSimpleServer in stack s (with a
// multiplexed processor, default ThriftTest, for multi*) and returns its
// address.
func startApacheServer(t *testing.T, s crosstest.Stack, cert tls.Certificate) string {
	t.Helper()
	var processor thrift.TProcessor = at.NewThriftTestProcessor(apacheHandler{})
	if s.Multiplexed() {
		mux := thrift.NewTMultiplexedProcessor()
		mux.RegisterDefault(processor)
		mux.RegisterProcessor("ThriftTest", processor)
		mux.RegisterProcessor("SecondService", at.NewSecondServiceProcessor(apacheHandler{}))
		processor = mux
	}
	if s.Transport == "http" {
		return serveApacheHTTP(t, s, cert, processor)
	}
	conf := apacheConf()
	var sock thrift.TServerTransport
	var addr func() string
	if s.SSL {
		ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
		require.NoError(t, err)
		sock, addr = &tlsServerSocket{ln: ln, conf: conf}, ln.Addr().String
	} else {
		ss, err := thrift.NewTServerSocket("127.0.0.1:0")
		require.NoError(t, err)
		sock, addr = ss, func() string { return ss.Addr().String() }
	}
	srv := thrift.NewTSimpleServer4(processor, sock, apacheTransportFactory(s, conf), apacheProtocolFactory(s, conf))
	testutil.RunApacheServer(t, srv)
	return addr()
}

// serveApacheHTTP serves processor as Apache's Go test server does over
// HTTP: NewThriftHandlerFunc on an http.Server, TLS for ip-ssl.
func serveApacheHTTP(t *testing.T, s crosstest.Stack, cert tls.Certificate, processor thrift.TProcessor) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	if s.SSL {
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	}
	pf := apacheProtocolFactory(s, apacheConf())
	srv := &http.Server{Handler: http.HandlerFunc(thrift.NewThriftHandlerFunc(processor, pf, pf)), ReadHeaderTimeout: time.Minute}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		require.ErrorIs(t, <-done, http.ErrServerClosed)
	})
	return ln.Addr().String()
}

// tlsServerSocket is Apache's server transport over a TLS listener that
// Interrupt closes: TSSLServerSocket's Interrupt leaves Accept blocked, so a
// TSimpleServer on it never stops.
type tlsServerSocket struct {
	ln   net.Listener
	conf *thrift.TConfiguration
}

func (s *tlsServerSocket) Listen() error    { return nil }
func (s *tlsServerSocket) Close() error     { return s.ln.Close() }
func (s *tlsServerSocket) Interrupt() error { return s.ln.Close() }

func (s *tlsServerSocket) Accept() (thrift.TTransport, error) {
	c, err := s.ln.Accept()
	if err != nil {
		return nil, thrift.NewTTransportExceptionFromError(err)
	}
	return thrift.NewTSocketFromConnConf(c, s.conf), nil
}

// apacheHandler is ThriftTest on Apache's types, with the semantics of
// Apache's Go test server.
type apacheHandler struct{}

func (apacheHandler) TestVoid(context.Context) error                                 { return nil }
func (apacheHandler) TestString(_ context.Context, v string) (string, error)         { return v, nil }
func (apacheHandler) TestBool(_ context.Context, v bool) (bool, error)               { return v, nil }
func (apacheHandler) TestByte(_ context.Context, v int8) (int8, error)               { return v, nil }
func (apacheHandler) TestI32(_ context.Context, v int32) (int32, error)              { return v, nil }
func (apacheHandler) TestI64(_ context.Context, v int64) (int64, error)              { return v, nil }
func (apacheHandler) TestDouble(_ context.Context, v float64) (float64, error)       { return v, nil }
func (apacheHandler) TestBinary(_ context.Context, v []byte) ([]byte, error)         { return v, nil }
func (apacheHandler) TestStruct(_ context.Context, v *at.Xtruct) (*at.Xtruct, error) { return v, nil }
func (apacheHandler) TestNest(_ context.Context, v *at.Xtruct2) (*at.Xtruct2, error) { return v, nil }
func (apacheHandler) TestMap(_ context.Context, v map[int32]int32) (map[int32]int32, error) {
	return v, nil
}
func (apacheHandler) TestStringMap(_ context.Context, v map[string]string) (map[string]string, error) {
	return v, nil
}
func (apacheHandler) TestSet(_ context.Context, v []int32) ([]int32, error)         { return v, nil }
func (apacheHandler) TestList(_ context.Context, v []int32) ([]int32, error)        { return v, nil }
func (apacheHandler) TestEnum(_ context.Context, v at.Numberz) (at.Numberz, error)  { return v, nil }
func (apacheHandler) TestTypedef(_ context.Context, v at.UserId) (at.UserId, error) { return v, nil }
func (apacheHandler) SecondtestString(_ context.Context, v string) (string, error) {
	return `testString("` + v + `")`, nil
}

func (apacheHandler) TestMapMap(context.Context, int32) (map[int32]map[int32]int32, error) {
	return crosstest.MapMap(), nil
}

func (apacheHandler) TestInsanity(_ context.Context, arg *at.Insanity) (map[at.UserId]map[at.Numberz]*at.Insanity, error) {
	return map[at.UserId]map[at.Numberz]*at.Insanity{
		1: {at.Numberz_TWO: arg, at.Numberz_THREE: arg},
		2: {at.Numberz_SIX: at.NewInsanity()},
	}, nil
}

func (apacheHandler) TestMulti(_ context.Context, a0 int8, a1 int32, a2 int64, _ map[int16]string, _ at.Numberz, _ at.UserId) (*at.Xtruct, error) {
	return &at.Xtruct{StringThing: "Hello2", ByteThing: a0, I32Thing: a1, I64Thing: a2}, nil
}

func (apacheHandler) TestException(_ context.Context, arg string) error {
	switch arg {
	case "Xception":
		return &at.Xception{ErrorCode: 1001, Message: arg}
	case "TException":
		return errors.New("just a TException")
	}
	return nil
}

func (apacheHandler) TestMultiException(_ context.Context, a0, a1 string) (*at.Xtruct, error) {
	switch a0 {
	case "Xception":
		return nil, &at.Xception{ErrorCode: 1001, Message: "This is an Xception"}
	case "Xception2":
		return nil, &at.Xception2{ErrorCode: 2002, StructThing: &at.Xtruct{StringThing: "This is an Xception2"}}
	}
	return &at.Xtruct{StringThing: a1}, nil
}

func (apacheHandler) TestOneway(_ context.Context, seconds int32) error {
	time.Sleep(time.Duration(seconds) * time.Second / 3)
	return nil
}

// apacheChecks are the checks of Apache's Go test client on Apache's
// client; it returns how many passed, or the first mismatch.
func apacheChecks(ctx context.Context, c *at.ThriftTestClient, second *at.SecondServiceClient) (int, error) {
	n := 0
	eq := func(what string, want, got any, err error) error {
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if !reflect.DeepEqual(want, got) {
			return fmt.Errorf("%s: want %#v, got %#v", what, want, got)
		}
		n++
		return nil
	}
	xs := &at.Xtruct{StringThing: "thing", ByteThing: 42, I32Thing: 4242, I64Thing: 424242}
	bin := make([]byte, 256)
	for i := range bin {
		bin[i] = byte(i)
	}
	crazy := &at.Insanity{
		UserMap: map[at.Numberz]at.UserId{at.Numberz_FIVE: 5, at.Numberz_EIGHT: 8},
		Xtructs: []*at.Xtruct{{StringThing: "Goodbye4", ByteThing: 4, I32Thing: 4, I64Thing: 4}, {StringThing: "Hello2", ByteThing: 2, I32Thing: 2, I64Thing: 2}},
	}
	checks := []func() error{
		func() error { return eq("testVoid", nil, nil, c.TestVoid(ctx)) },
		func() error { r, err := c.TestString(ctx, "thing"); return eq("testString", "thing", r, err) },
		func() error { r, err := c.TestBool(ctx, true); return eq("testBool", true, r, err) },
		func() error { r, err := c.TestByte(ctx, 42); return eq("testByte", int8(42), r, err) },
		func() error { r, err := c.TestI32(ctx, 4242); return eq("testI32", int32(4242), r, err) },
		func() error { r, err := c.TestI64(ctx, 424242); return eq("testI64", int64(424242), r, err) },
		func() error { r, err := c.TestDouble(ctx, 42.42); return eq("testDouble", 42.42, r, err) },
		func() error { r, err := c.TestBinary(ctx, bin); return eq("testBinary", bin, r, err) },
		func() error { r, err := c.TestStruct(ctx, xs); return eq("testStruct", xs, r, err) },
		func() error {
			x2 := &at.Xtruct2{StructThing: xs}
			r, err := c.TestNest(ctx, x2)
			return eq("testNest", x2, r, err)
		},
		func() error {
			m := map[int32]int32{1: 2, 3: 4, 5: 42}
			r, err := c.TestMap(ctx, m)
			return eq("testMap", m, r, err)
		},
		func() error {
			m := map[string]string{"a": "2", "b": "blah", "some": "thing"}
			r, err := c.TestStringMap(ctx, m)
			return eq("testStringMap", m, r, err)
		},
		func() error {
			r, err := c.TestSet(ctx, []int32{42, 1, 2})
			slices.Sort(r)
			return eq("testSet", []int32{1, 2, 42}, r, err)
		},
		func() error {
			r, err := c.TestList(ctx, []int32{1, 2, 42})
			return eq("testList", []int32{1, 2, 42}, r, err)
		},
		func() error { r, err := c.TestEnum(ctx, at.Numberz_TWO); return eq("testEnum", at.Numberz_TWO, r, err) },
		func() error { r, err := c.TestTypedef(ctx, 42); return eq("testTypedef", at.UserId(42), r, err) },
		func() error { r, err := c.TestMapMap(ctx, 42); return eq("testMapMap", crosstest.MapMap(), r, err) },
		func() error {
			r, err := c.TestInsanity(ctx, crazy)
			want := map[at.UserId]map[at.Numberz]*at.Insanity{1: {2: crazy, 3: crazy}, 2: {6: {}}}
			if err == nil && r[2][6] != nil && len(r[2][6].UserMap) == 0 && len(r[2][6].Xtructs) == 0 {
				r[2][6] = &at.Insanity{} // empty is empty, nil or not
			}
			return eq("testInsanity", want, r, err)
		},
		func() error {
			r, err := c.TestMulti(ctx, 42, 4242, 424242, map[int16]string{1: "blah", 2: "thing"}, at.Numberz_EIGHT, 24)
			return eq("testMulti", &at.Xtruct{StringThing: "Hello2", ByteThing: 42, I32Thing: 4242, I64Thing: 424242}, r, err)
		},
		func() error {
			return eq("testException(Xception)", &at.Xception{ErrorCode: 1001, Message: "Xception"}, c.TestException(ctx, "Xception"), nil)
		},
		func() error {
			var ae thrift.TApplicationException
			err := c.TestException(ctx, "TException")
			return eq("testException(TException) is a TApplicationException", true, errors.As(err, &ae), nil)
		},
		func() error {
			r, err := c.TestMultiException(ctx, "Xception", "ignoreme")
			return eq("testMultiException(Xception)", &at.Xception{ErrorCode: 1001, Message: "This is an Xception"}, err, errIf(r != nil, "a result too"))
		},
		func() error {
			r, err := c.TestMultiException(ctx, "Xception2", "ignoreme")
			want := &at.Xception2{ErrorCode: 2002, StructThing: &at.Xtruct{StringThing: "This is an Xception2"}}
			return eq("testMultiException(Xception2)", want, err, errIf(r != nil, "a result too"))
		},
		func() error { return eq("testOneway", nil, nil, c.TestOneway(ctx, 1)) },
		func() error { return eq("testVoid after testOneway", nil, nil, c.TestVoid(ctx)) },
	}
	if second != nil {
		checks = append(checks, func() error {
			r, err := second.SecondtestString(ctx, "foobar")
			return eq("secondtestString", `testString("foobar")`, r, err)
		})
	}
	for _, check := range checks {
		if err := check(); err != nil {
			return n, err
		}
	}
	return n, nil
}

func errIf(cond bool, msg string) error {
	if cond {
		return errors.New(msg)
	}
	return nil
}
