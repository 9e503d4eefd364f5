package wiretest

import (
	"compress/zlib"
	"context"
	"fmt"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
)

// StartApacheZlib serves proc with Apache's TSimpleServer over its
// TZlibTransport (best compression, as Apache's test server), binary or
// compact inside, unframed.
func StartApacheZlib(proc thrift.TProcessor, compact bool) (*ApacheServer, error) {
	return startApacheWith(proc, thrift.NewTZlibTransportFactory(zlib.BestCompression), apacheProtocol(compact, &thrift.TConfiguration{}))
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
	p := apacheProtocol(compact, conf).GetProtocol(tr)
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
