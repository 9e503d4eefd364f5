package wiretest

import (
	"compress/zlib"
	"context"
	"fmt"
	"net"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
)

// StartApacheZlib serves proc with Apache's TSimpleServer over its
// TZlibTransport (best compression, as Apache's test server), binary or
// compact inside, unframed.
func StartApacheZlib(proc thrift.TProcessor, compact bool) (*ApacheServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().(*net.TCPAddr)
	ln.Close()
	sock := thrift.NewTServerSocketFromAddrTimeout(addr, 0)
	conf := &thrift.TConfiguration{}
	var pf thrift.TProtocolFactory = thrift.NewTBinaryProtocolFactoryConf(conf)
	if compact {
		pf = thrift.NewTCompactProtocolFactoryConf(conf)
	}
	srv := thrift.NewTSimpleServer4(proc, sock, thrift.NewTZlibTransportFactory(zlib.BestCompression), pf)
	srv.SetLogger(func(string) {})
	srv.SetLogContext(context.Background())
	if err := srv.Listen(); err != nil {
		return nil, fmt.Errorf("apache listen: %w", err)
	}
	a := &ApacheServer{Addr: addr.String(), srv: srv, done: make(chan error, 1)}
	go func() { a.done <- srv.AcceptLoop() }()
	return a, nil
}

// ApacheZlibClient is Apache's Go client over its TZlibTransport.
type ApacheZlibClient struct {
	Client *thrift.TStandardClient
	trans  thrift.TTransport
}

// DialApacheZlib opens an Apache client over TZlibTransport on the
// socket (framed: over TFramedTransport, each flush one frame, as
// Python's framed+zlib), binary or compact inside.
func DialApacheZlib(addr string, framed, compact bool) (*ApacheZlibClient, error) {
	conf := &thrift.TConfiguration{ConnectTimeout: 5 * time.Second, SocketTimeout: 10 * time.Second}
	sock := thrift.NewTSocketConf(addr, conf)
	if err := sock.Open(); err != nil {
		return nil, err
	}
	var under thrift.TTransport = sock
	if framed {
		under = thrift.NewTFramedTransportConf(sock, conf)
	}
	tr, err := thrift.NewTZlibTransport(under, zlib.BestCompression)
	if err != nil {
		sock.Close()
		return nil, err
	}
	var p thrift.TProtocol = thrift.NewTBinaryProtocolConf(tr, conf)
	if compact {
		p = thrift.NewTCompactProtocolConf(tr, conf)
	}
	return &ApacheZlibClient{Client: thrift.NewTStandardClient(p, p), trans: sock}, nil
}

// Echo calls echo(msg).
func (c *ApacheZlibClient) Echo(ctx context.Context, msg string) (string, error) {
	var res ApacheEchoResult
	if _, err := c.Client.Call(ctx, "echo", &ApacheEchoArgs{Msg: msg}, &res); err != nil {
		return "", err
	}
	if res.Success == nil {
		return "", fmt.Errorf("echo: no success field")
	}
	return *res.Success, nil
}

// Close closes the connection.
func (c *ApacheZlibClient) Close() error { return c.trans.Close() }
