package wiretest

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
)

// HeaderProcessor wraps an Apache processor for a THeader server: it
// reports the headers each call arrived with on Seen and answers with
// reply header "echo-<key>" for each of them, through Apache's own
// response helper.
type HeaderProcessor struct {
	thrift.TProcessor
	Seen chan map[string]string
}

func (p *HeaderProcessor) Process(ctx context.Context, in, out thrift.TProtocol) (bool, thrift.TException) {
	got := map[string]string{}
	for _, k := range thrift.GetReadHeaderList(ctx) {
		if v, ok := thrift.GetHeader(ctx, k); ok {
			got[k] = v
		}
	}
	if h, ok := thrift.GetResponseHelper(ctx); ok {
		for k, v := range got {
			h.SetHeader("echo-"+k, v)
		}
	}
	select {
	case p.Seen <- got:
	default:
	}
	return p.TProcessor.Process(ctx, in, out)
}

// StartApacheTHeader serves proc with Apache's TSimpleServer speaking
// THeader (which also reads framed and unframed binary and compact).
func StartApacheTHeader(proc thrift.TProcessor) (*ApacheServer, error) {
	return startApacheTHeader(proc, nil)
}

// StartApacheFramedTHeader is StartApacheTHeader over Apache's
// TFramedTransport: each THeader frame inside one more frame (Apache's
// `--protocol=header --transport=framed`).
func StartApacheFramedTHeader(proc thrift.TProcessor) (*ApacheServer, error) {
	return startApacheTHeader(proc, thrift.NewTFramedTransportFactoryConf(thrift.NewTTransportFactory(), &thrift.TConfiguration{}))
}

func startApacheTHeader(proc thrift.TProcessor, under thrift.TTransportFactory) (*ApacheServer, error) {
	conf := &thrift.TConfiguration{}
	return startApacheWith(proc, thrift.NewTHeaderTransportFactoryConf(under, conf), thrift.NewTHeaderProtocolFactoryConf(conf))
}

// ApacheTHeaderClient is Apache's Go THeader client on a fresh connection.
type ApacheTHeaderClient struct {
	Proto  *thrift.THeaderProtocol
	Client *thrift.TStandardClient
	sock   *thrift.TSocket
}

// DialApacheTHeader opens an Apache THeader client in protocol pid
// (thrift.THeaderProtocolBinary or Compact), compressing its requests
// with zlib when zlib is set.
func DialApacheTHeader(addr string, pid thrift.THeaderProtocolID, zlib bool) (*ApacheTHeaderClient, error) {
	return dialApacheTHeader(addr, pid, zlib, false)
}

// DialApacheFramedTHeader is DialApacheTHeader over Apache's
// TFramedTransport.
func DialApacheFramedTHeader(addr string, pid thrift.THeaderProtocolID, zlib bool) (*ApacheTHeaderClient, error) {
	return dialApacheTHeader(addr, pid, zlib, true)
}

func dialApacheTHeader(addr string, pid thrift.THeaderProtocolID, zlib, framed bool) (*ApacheTHeaderClient, error) {
	// Timeouts bound every read and write: a test never hangs on a server
	// that does not answer.
	conf := &thrift.TConfiguration{THeaderProtocolID: &pid, ConnectTimeout: 5 * time.Second, SocketTimeout: 10 * time.Second}
	sock := thrift.NewTSocketConf(addr, conf)
	if err := sock.Open(); err != nil {
		return nil, err
	}
	var tr thrift.TTransport = sock
	if framed {
		tr = thrift.NewTFramedTransportConf(sock, conf)
	}
	p := thrift.NewTHeaderProtocolConf(tr, conf)
	if zlib {
		if err := p.AddTransform(thrift.TransformZlib); err != nil {
			sock.Close()
			return nil, err
		}
	}
	return &ApacheTHeaderClient{Proto: p, Client: thrift.NewTStandardClient(p, p), sock: sock}, nil
}

// Echo calls echo(msg) with headers hdrs and returns the reply and its
// headers.
func (c *ApacheTHeaderClient) Echo(ctx context.Context, msg string, hdrs map[string]string) (string, thrift.THeaderMap, error) {
	keys := make([]string, 0, len(hdrs))
	for k, v := range hdrs {
		ctx = thrift.SetHeader(ctx, k, v)
		keys = append(keys, k)
	}
	ctx = thrift.SetWriteHeaderList(ctx, keys)
	var res ApacheEchoResult
	meta, err := c.Client.Call(ctx, "echo", &ApacheEchoArgs{Msg: msg}, &res)
	if err != nil {
		return "", nil, err
	}
	if res.Success == nil {
		return "", meta.Headers, fmt.Errorf("echo: no success field")
	}
	return *res.Success, meta.Headers, nil
}

// Close closes the connection.
func (c *ApacheTHeaderClient) Close() error { return c.sock.Close() }
