package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/fastpath"
	"github.com/hatrpc/hatrpc/pkg/generic"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/stream"
)

type callFlags struct {
	idl           string
	includes      []string
	headers       []string
	timeout       time.Duration
	tls           bool
	tlsCA         string
	tlsInsecure   bool
	tlsServerName string
	framed        bool
	unframed      bool
	protocol      string
	theader       bool
	rdma          string
	multiplexed   bool
	json          bool
	verbose       bool
}

func newCallCmd() *cobra.Command {
	var f callFlags
	cmd := &cobra.Command{
		Use:   "call --idl FILE.thrift ADDR Service.function ['{json args}'|-]",
		Short: "Call a function with JSON arguments (an object keyed by argument name; - reads stdin), or open a stream",
		Long: `Call a function with JSON arguments: an object keyed by argument name, or - to read it from stdin.

A streaming function (streaming.mode) sends and prints messages, each a JSON
object of its struct's fields: a server stream sends the one message given
(or {}) and prints every message the server sends, one line each; a client
or bidirectional stream sends the message given, or with - (or none) each
line of stdin as one message, and prints the reply (client) or every
message the server sends (bidirectional).`,
		Example: `  hatrpc call --idl internal/hatkv/hatkv.thrift 127.0.0.1:9090 HatKV.Get '{"key":"user1"}'
  hatrpc call --idl internal/hatkv/hatkv.thrift 127.0.0.1:9090 HatKV.ScanStream '{"start_key":"user"}'
  hatrpc call --idl pkg/fb303/fb303.thrift 127.0.0.1:9090 FacebookService.getStatus`,
		Args: cobra.RangeArgs(2, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			in := input{stdin: cmd.InOrStdin()}
			if len(args) == 3 {
				in.given, in.args = true, []byte(args[2])
				in.fromStdin = args[2] == "-"
			}
			return call(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), &f, args[0], args[1], in)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.idl, "idl", "", "the Thrift IDL file that declares the service (required)")
	fl.StringSliceVarP(&f.includes, "include", "I", nil, "directory to search for included files (repeatable)")
	fl.StringArrayVarP(&f.headers, "header", "H", nil, "header key=value sent with the call (repeatable; HatRPC framing or --theader)")
	fl.DurationVar(&f.timeout, "timeout", 30*time.Second, "deadline of the whole call, connecting included")
	fl.BoolVar(&f.tls, "tls", false, "speak TLS, verifying the server against the system roots")
	fl.StringVar(&f.tlsCA, "tls-ca", "", "speak TLS, verifying the server's certificate against this CA (PEM)")
	fl.BoolVar(&f.tlsInsecure, "tls-insecure", false, "speak TLS without verifying the server's certificate (testing only)")
	fl.StringVar(&f.tlsServerName, "tls-server-name", "", "name to verify the server's certificate for (default: the host of ADDR)")
	fl.BoolVar(&f.framed, "framed", false, "plain Thrift: framed transport only (default: detected)")
	fl.BoolVar(&f.unframed, "unframed", false, "plain Thrift: unframed (buffered) transport only (default: detected)")
	fl.StringVar(&f.protocol, "protocol", "", "binary or compact only (default: detected)")
	fl.BoolVar(&f.theader, "theader", false, "speak Apache's THeader transport (carries --header to Apache servers)")
	fl.StringVar(&f.rdma, "rdma", "auto", "fast path when the server offers it: auto, shm, ibv (rdma) or off")
	fl.BoolVar(&f.multiplexed, "multiplexed", false, "prefix the function with its service (Apache's TMultiplexedProtocol)")
	fl.BoolVar(&f.json, "json", false, "print the result (or the declared exception) as one line of JSON")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "say on stderr how the call went: stack, transport")
	_ = cmd.MarkFlagRequired("idl")
	return cmd
}

func (f *callFlags) options(addr string) ([]client.Option, error) {
	var opts []client.Option
	if f.framed && f.unframed {
		return nil, errors.New("--framed and --unframed exclude each other")
	}
	if f.framed {
		opts = append(opts, client.WithFramed())
	}
	if f.unframed {
		opts = append(opts, client.WithUnframed())
	}
	switch f.protocol {
	case "":
	case "binary":
		opts = append(opts, client.WithProtocol(proto.Binary))
	case "compact":
		opts = append(opts, client.WithProtocol(proto.Compact))
	default:
		return nil, fmt.Errorf("--protocol %q: want binary or compact", f.protocol)
	}
	if f.theader {
		opts = append(opts, client.WithTHeader())
	}
	if f.multiplexed {
		opts = append(opts, client.WithMultiplexed())
	}
	provider := f.rdma
	if h, err := hints.ParseTransport(provider); err == nil && fastpath.Lanes(h) {
		provider = fastpath.Provider(h) // a transport's name, as hatkv --transport spells it
	}
	_, err := fastpath.ParseProvider(provider)
	if err == nil && provider == "" { // off is spelled out here
		err = fmt.Errorf("%w %q", fastpath.ErrBadProvider, provider)
	}
	if err != nil {
		return nil, fmt.Errorf("--rdma (a provider, or a lane transport's name): %w", err)
	}
	opts = append(opts, client.WithRDMA(provider))
	if f.tls || f.tlsCA != "" || f.tlsInsecure {
		cfg, err := f.tlsConfig(addr)
		if err != nil {
			return nil, err
		}
		opts = append(opts, client.WithTLS(cfg))
	}
	return opts, nil
}

func (f *callFlags) tlsConfig(addr string) (*tls.Config, error) {
	cfg := &tls.Config{ServerName: f.tlsServerName, MinVersion: tls.VersionTLS12, InsecureSkipVerify: f.tlsInsecure} //nolint:gosec // the flag says so
	if cfg.ServerName == "" {
		if host, _, err := net.SplitHostPort(addr); err == nil {
			cfg.ServerName = host
		}
	}
	if f.tlsCA != "" {
		pem, err := os.ReadFile(f.tlsCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca %s: no PEM certificate in it", f.tlsCA)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

func (f *callFlags) context(ctx context.Context) (context.Context, error) {
	for _, h := range f.headers {
		k, v, ok := strings.Cut(h, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--header %q: want key=value", h)
		}
		ctx = metadata.AppendToOutgoingContext(ctx, k, v)
	}
	return ctx, nil
}

// input is what the command line gives a call: the argument (or "-"),
// and stdin.
type input struct {
	given, fromStdin bool
	args             []byte
	stdin            io.Reader
}

// all is the whole input as one JSON value (nil: none given).
func (in input) all() ([]byte, error) {
	if in.fromStdin {
		return io.ReadAll(in.stdin)
	}
	return in.args, nil
}

// call runs one call; target is "Service.function" (the service may be
// an included file's, "shared.Base.version").
func call(ctx context.Context, w, errw io.Writer, f *callFlags, addr, target string, in input) error {
	i := strings.LastIndex(target, ".")
	if i <= 0 || i == len(target)-1 {
		return fmt.Errorf("%q: want Service.function", target)
	}
	d, err := loadIDL(f.idl, f.includes)
	if err != nil {
		return err
	}
	svc, err := d.Service(target[:i])
	if err != nil {
		return err
	}
	fn, err := svc.Function(target[i+1:])
	if err != nil {
		return err
	}
	var args []byte
	if fn.Stream == stream.None {
		if args, err = in.all(); err != nil {
			return err
		}
	}
	opts, err := f.options(addr)
	if err != nil {
		return err
	}
	if ctx, err = f.context(ctx); err != nil {
		return err
	}
	if f.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.timeout)
		defer cancel()
	}
	conn, err := client.Dial(ctx, addr, append(opts, client.WithHints(svc.Hints))...)
	if err != nil {
		return &callError{addr: addr, target: target, err: err}
	}
	defer conn.Close()
	gc := generic.NewClient(svc, conn)
	if fn.Stream != stream.None {
		err := callStream(ctx, w, f, gc, fn, in)
		if f.verbose {
			lane, _ := conn.StreamRoutes()
			fmt.Fprintf(errw, "hatrpc: %s stream (%s), on a lane: %v\n", target, fn.Stream, lane > 0)
		}
		return reported(w, f, addr, target, err)
	}
	out, err := gc.CallJSON(ctx, target[i+1:], args)
	if f.verbose {
		stack := "plain Thrift"
		if conn.Upgraded() {
			stack = "HatRPC framing"
		}
		fmt.Fprintf(errw, "hatrpc: %s over %s, transport %s\n", target, stack, conn.Plan(svc.Name()+":"+target[i+1:]).Transport)
	}
	if err != nil {
		return reported(w, f, addr, target, err)
	}
	printResult(w, f, out)
	return nil
}

// reported is err as the command returns it: a declared exception printed
// as JSON with --json, anything else described by describeErr.
func reported(w io.Writer, f *callFlags, addr, target string, err error) error {
	var ex *generic.Exception
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ex) && f.json:
		line, _ := json.Marshal(map[string]any{"exception": ex.Type, "field": ex.Field, "value": json.RawMessage(ex.JSON)})
		fmt.Fprintln(w, string(line))
		return errReported
	}
	return &callError{addr: addr, target: target, err: err}
}

// printResult prints a result: one line with --json, else indented.
func printResult(w io.Writer, f *callFlags, out []byte) {
	if f.json {
		fmt.Fprintln(w, string(out))
		return
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, out, "", "  "); err != nil {
		pretty.Reset()
		pretty.Write(out)
	}
	fmt.Fprintln(w, pretty.String())
}

// callError is a failed call, described for a person by describeErr.
type callError struct {
	addr, target string
	err          error
}

func (e *callError) Error() string { return e.target + " at " + e.addr + ": " + e.err.Error() }

func (e *callError) Unwrap() error { return e.err }

// describeErr says what went wrong in the words of the command line.
func describeErr(err error) string {
	var ce *callError
	if !errors.As(err, &ce) {
		return err.Error()
	}
	var ex *generic.Exception
	var ae *proto.ApplicationException
	var ve *generic.ValueError
	var me *messageError
	var conn *client.ConnError
	switch {
	case errors.As(err, &ex):
		var pretty bytes.Buffer
		if json.Indent(&pretty, ex.JSON, "", "  ") != nil {
			pretty.Write(ex.JSON)
		}
		return fmt.Sprintf("%s threw %s (%s):\n%s", ce.target, ex.Type, ex.Field, pretty.String())
	case errors.As(err, &me):
		return fmt.Sprintf("bad message on stdin line %d: %v", me.line, me.err)
	case errors.As(err, &ve):
		return "bad arguments: " + ve.Error()
	case errors.As(err, &ae) && ae.Type == proto.ExcUnknownMethod:
		return fmt.Sprintf("the server at %s has no function %s (%s); is it serving this IDL (a multiplexed Apache server needs --multiplexed)?",
			ce.addr, ce.target, ae.Message)
	case errors.As(err, &ae):
		kind := proto.Outcome(nil, ae)
		return fmt.Sprintf("%s failed on the server (%s): %s", ce.target, kind, ae.Message)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Sprintf("cannot connect to %s: connection refused (is the server running?)", ce.addr)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("%s at %s: no answer within --timeout", ce.target, ce.addr)
	case errors.As(err, &conn) && conn.Op == "read":
		return fmt.Sprintf("the server at %s closed the connection during %s (%v); a multiplexed Apache server does so for a call without --multiplexed",
			ce.addr, ce.target, conn.Err)
	case errors.Is(err, client.ErrNotThrift), errors.Is(err, client.ErrHTTPServer):
		return fmt.Sprintf("%s does not speak Thrift: %v", ce.addr, ce.err)
	}
	return ce.Error()
}
