package wiretest

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
)

// ApacheEchoArgs is EchoArgs written against Apache's Go library, the way
// Apache's generator would, for interop tests.
type ApacheEchoArgs struct {
	Msg     string
	DelayNs int64
	Mode    int32
}

func (a *ApacheEchoArgs) Read(ctx context.Context, p thrift.TProtocol) error {
	if _, err := p.ReadStructBegin(ctx); err != nil {
		return err
	}
	for {
		_, t, id, err := p.ReadFieldBegin(ctx)
		if err != nil {
			return err
		}
		if t == thrift.STOP {
			break
		}
		switch {
		case id == 1 && t == thrift.STRING:
			a.Msg, err = p.ReadString(ctx)
		case id == 2 && t == thrift.I64:
			a.DelayNs, err = p.ReadI64(ctx)
		case id == 3 && t == thrift.I32:
			a.Mode, err = p.ReadI32(ctx)
		default:
			err = p.Skip(ctx, t)
		}
		if err != nil {
			return err
		}
		if err := p.ReadFieldEnd(ctx); err != nil {
			return err
		}
	}
	return p.ReadStructEnd(ctx)
}

func (a *ApacheEchoArgs) Write(ctx context.Context, p thrift.TProtocol) error {
	if err := p.WriteStructBegin(ctx, "echo_args"); err != nil {
		return err
	}
	_ = p.WriteFieldBegin(ctx, "msg", thrift.STRING, 1)
	_ = p.WriteString(ctx, a.Msg)
	_ = p.WriteFieldEnd(ctx)
	if a.DelayNs != 0 {
		_ = p.WriteFieldBegin(ctx, "delay_ns", thrift.I64, 2)
		_ = p.WriteI64(ctx, a.DelayNs)
		_ = p.WriteFieldEnd(ctx)
	}
	if a.Mode != 0 {
		_ = p.WriteFieldBegin(ctx, "mode", thrift.I32, 3)
		_ = p.WriteI32(ctx, a.Mode)
		_ = p.WriteFieldEnd(ctx)
	}
	_ = p.WriteFieldStop(ctx)
	return p.WriteStructEnd(ctx)
}

// ApacheEchoResult is EchoResult's success field for Apache's library.
type ApacheEchoResult struct {
	Success *string
}

func (r *ApacheEchoResult) Read(ctx context.Context, p thrift.TProtocol) error {
	if _, err := p.ReadStructBegin(ctx); err != nil {
		return err
	}
	for {
		_, t, id, err := p.ReadFieldBegin(ctx)
		if err != nil {
			return err
		}
		if t == thrift.STOP {
			break
		}
		if id == 0 && t == thrift.STRING {
			var s string
			s, err = p.ReadString(ctx)
			r.Success = &s
		} else {
			err = p.Skip(ctx, t)
		}
		if err != nil {
			return err
		}
		_ = p.ReadFieldEnd(ctx)
	}
	return p.ReadStructEnd(ctx)
}

func (r *ApacheEchoResult) Write(ctx context.Context, p thrift.TProtocol) error {
	_ = p.WriteStructBegin(ctx, "echo_result")
	if r.Success != nil {
		_ = p.WriteFieldBegin(ctx, "success", thrift.STRING, 0)
		_ = p.WriteString(ctx, *r.Success)
		_ = p.WriteFieldEnd(ctx)
	}
	_ = p.WriteFieldStop(ctx)
	return p.WriteStructEnd(ctx)
}

// ApacheProcessor is a hand-written Apache TProcessor serving "echo" and
// oneway "fire" exactly as Apache-generated processors do, including the
// UNKNOWN_METHOD reply (args skipped) for anything else.
type ApacheProcessor struct {
	Fired chan string
	Names chan string // every method name received
}

func (p *ApacheProcessor) ProcessorMap() map[string]thrift.TProcessorFunction { return nil }

func (p *ApacheProcessor) AddToProcessorMap(string, thrift.TProcessorFunction) {}

func (p *ApacheProcessor) Process(ctx context.Context, in, out thrift.TProtocol) (bool, thrift.TException) {
	name, typ, seq, err := in.ReadMessageBegin(ctx)
	if err != nil {
		return false, thrift.WrapTException(err)
	}
	if p.Names != nil {
		select {
		case p.Names <- name:
		default:
		}
	}
	switch name {
	case "echo", "fire":
		var args ApacheEchoArgs
		if err := args.Read(ctx, in); err != nil {
			return false, thrift.WrapTException(err)
		}
		_ = in.ReadMessageEnd(ctx)
		if name == "fire" || typ == thrift.ONEWAY {
			if p.Fired != nil {
				p.Fired <- args.Msg
			}
			return true, nil
		}
		if args.DelayNs > 0 {
			time.Sleep(time.Duration(args.DelayNs))
		}
		res := ApacheEchoResult{Success: &args.Msg}
		_ = out.WriteMessageBegin(ctx, name, thrift.REPLY, seq)
		_ = res.Write(ctx, out)
		_ = out.WriteMessageEnd(ctx)
		return true, thrift.WrapTException(out.Flush(ctx))
	}
	_ = in.Skip(ctx, thrift.STRUCT)
	_ = in.ReadMessageEnd(ctx)
	x := thrift.NewTApplicationException(thrift.UNKNOWN_METHOD, "Unknown function "+name)
	_ = out.WriteMessageBegin(ctx, name, thrift.EXCEPTION, seq)
	_ = x.Write(ctx, out)
	_ = out.WriteMessageEnd(ctx)
	_ = out.Flush(ctx)
	return true, x
}

// ApacheServer is a running Apache TSimpleServer.
type ApacheServer struct {
	Addr string
	srv  *thrift.TSimpleServer
	done chan error
}

// StartApache serves proc with Apache's TSimpleServer on a loopback port,
// framed or not, binary or compact.
func StartApache(proc thrift.TProcessor, framed, compact bool) (*ApacheServer, error) {
	conf := &thrift.TConfiguration{}
	var tf thrift.TTransportFactory = thrift.NewTTransportFactory()
	if framed {
		tf = thrift.NewTFramedTransportFactoryConf(tf, conf)
	} else {
		tf = thrift.NewTBufferedTransportFactory(8192)
	}
	return startApacheWith(proc, tf, apacheProtocol(compact, conf))
}

func apacheProtocol(compact bool, conf *thrift.TConfiguration) thrift.TProtocolFactory {
	if compact {
		return thrift.NewTCompactProtocolFactoryConf(conf)
	}
	return thrift.NewTBinaryProtocolFactoryConf(conf)
}

// startApacheWith serves proc with Apache's TSimpleServer on a loopback
// port through the transport and protocol factories given.
func startApacheWith(proc thrift.TProcessor, tf thrift.TTransportFactory, pf thrift.TProtocolFactory) (*ApacheServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().(*net.TCPAddr)
	ln.Close()
	sock := thrift.NewTServerSocketFromAddrTimeout(addr, 0)
	srv := thrift.NewTSimpleServer4(proc, sock, tf, pf)
	srv.SetLogger(func(string) {})
	// AcceptLoop (unlike Serve) leaves the log context unset, and Apache
	// dereferences it when a connection ends with an error (a client
	// probing with another framing or protocol).
	srv.SetLogContext(context.Background())
	if err := srv.Listen(); err != nil {
		return nil, fmt.Errorf("apache listen: %w", err)
	}
	a := &ApacheServer{Addr: addr.String(), srv: srv, done: make(chan error, 1)}
	go func() { a.done <- srv.AcceptLoop() }()
	return a, nil
}

// Stop stops the server and waits for its goroutines.
func (a *ApacheServer) Stop() error {
	err := a.srv.Stop()
	<-a.done
	return err
}
