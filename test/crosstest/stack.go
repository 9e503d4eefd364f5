// Package crosstest runs Apache Thrift's cross-language test service,
// ThriftTest, on HatRPC: a handler with the semantics of Apache's test
// servers, the checks of Apache's test clients, and the command-line
// stacks of Apache's cross-test programs (--protocol, --transport, --ssl,
// --domain-socket), so that HatRPC's testserver and testclient (cmd/) can
// stand in for Apache's in Apache's own suite. cross_test.go runs the
// matrix against Apache's Go and Python libraries.
package crosstest

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/proto"
)

// ErrNotSupported is returned for a stack Apache's suite names that HatRPC
// does not speak (yet): the programs refuse it instead of falling back to
// another stack that would make the cell pass for the wrong reason.
var ErrNotSupported = errors.New("not supported by HatRPC")

// Protocols and Transports are the values Apache's cross-test programs take
// (test/go/src/bin, test/py); a value outside them is a usage error, a value
// in them that HatRPC cannot speak is ErrNotSupported.
var (
	Protocols  = []string{"binary", "compact", "json", "header", "multi", "multic", "multij", "multih"}
	Transports = []string{"buffered", "framed", "http", "zlib"}
)

// Stack is one cell's wire stack, as Apache's programs name it.
type Stack struct {
	Protocol     string // one of Protocols
	Transport    string // one of Transports
	SSL          bool
	DomainSocket string // a unix socket path instead of host:port
}

func (s Stack) String() string {
	sock := "ip"
	switch {
	case s.DomainSocket != "":
		sock = "domain"
	case s.SSL:
		sock = "ip-ssl"
	}
	return s.Protocol + "-" + s.Transport + "-" + sock
}

// Multiplexed tells whether the client names methods "Service:method"
// (Apache's TMultiplexedProtocol) and calls SecondService too.
func (s Stack) Multiplexed() bool { return strings.HasPrefix(s.Protocol, "multi") }

// Base is the protocol under the multiplexing: multi → binary,
// multic → compact, multij → json, multih → header.
func (s Stack) Base() string {
	switch s.Protocol {
	case "multi":
		return "binary"
	case "multic":
		return "compact"
	case "multij":
		return "json"
	case "multih":
		return "header"
	}
	return s.Protocol
}

// Validate reports a value Apache's programs do not know, then a stack
// HatRPC does not speak, as ErrNotSupported naming the missing piece:
// HTTP over a unix socket.
func (s Stack) Validate() error {
	if !slices.Contains(Protocols, s.Protocol) {
		return fmt.Errorf("unknown --protocol %q (one of %s)", s.Protocol, strings.Join(Protocols, ", "))
	}
	if !slices.Contains(Transports, s.Transport) {
		return fmt.Errorf("unknown --transport %q (one of %s)", s.Transport, strings.Join(Transports, ", "))
	}
	if s.Transport == "http" && s.DomainSocket != "" {
		return fmt.Errorf("--transport=http over --domain-socket: %w", ErrNotSupported)
	}
	return nil
}

// ClientOptions are the client options that speak s and only s. Apache's
// test clients do not verify the server's certificate, and neither does
// this one.
func (s Stack) ClientOptions() ([]client.Option, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	var opts []client.Option
	switch s.Base() {
	case "binary":
		opts = append(opts, client.WithProtocol(proto.Binary))
	case "compact":
		opts = append(opts, client.WithProtocol(proto.Compact))
	case "json":
		opts = append(opts, client.WithProtocol(proto.JSON))
	case "header":
		// Apache's THeaderProtocol speaks binary inside by default; over
		// Apache's framed transport each THeader frame is framed again.
		opts = append(opts, client.WithProtocol(proto.Binary))
		switch s.Transport {
		case "framed":
			opts = append(opts, client.WithFramedTHeader())
		case "zlib":
			opts = append(opts, client.WithTHeader(), client.WithZlib())
		case "http":
			opts = append(opts, client.WithTHeader()) // one THeader frame a body
		default:
			opts = append(opts, client.WithTHeader())
		}
	}
	if s.Base() != "header" {
		switch s.Transport {
		case "buffered":
			opts = append(opts, client.WithUnframed())
		case "framed":
			opts = append(opts, client.WithFramed())
		case "zlib":
			// Apache's TZlibTransport around the socket, messages unframed.
			opts = append(opts, client.WithZlib(), client.WithUnframed())
		}
		// http: the address is the URL (Flags.Addr), one POST a call.
	}
	if s.Multiplexed() {
		opts = append(opts, client.WithMultiplexed())
	}
	if s.SSL {
		opts = append(opts, client.WithTLS(&tls.Config{InsecureSkipVerify: true})) // as Apache's test clients
	}
	return opts, nil
}

// Flags are the command line both programs share with Apache's.
type Flags struct {
	Host      string
	Port      int
	Stack     Stack
	TestLoops int    // client: runs of the whole check list
	CertPath  string // server: directory holding server.crt and server.key
	NoUUID    bool   // client: the server's IDL predates uuid (Apache 0.17 and older)
}

// Addr is the address the flags name: host:port, unix:PATH for
// --domain-socket, or the URL of Apache's HTTP servers
// (http[s]://host:port/) for --transport=http.
func (f *Flags) Addr() string {
	if f.Stack.DomainSocket != "" {
		return "unix:" + f.Stack.DomainSocket
	}
	hp := net.JoinHostPort(f.Host, strconv.Itoa(f.Port))
	if f.Stack.Transport == "http" {
		if f.Stack.SSL {
			return "https://" + hp + "/"
		}
		return "http://" + hp + "/"
	}
	return hp
}

// ListenAddr is where a server for the flags listens: host:port, or
// unix:PATH for --domain-socket (HTTP is detected on the port itself).
func (f *Flags) ListenAddr() string {
	if f.Stack.DomainSocket != "" {
		return "unix:" + f.Stack.DomainSocket
	}
	return net.JoinHostPort(f.Host, strconv.Itoa(f.Port))
}

// ParseFlags parses Apache's cross-test flags (Go's and Python's spellings)
// from args, without the program name.
func ParseFlags(name string, args []string) (*Flags, error) {
	f := &Flags{}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.StringVar(&f.Host, "host", "localhost", "host to connect to or listen on")
	fs.IntVar(&f.Port, "port", 9090, "port number")
	fs.StringVar(&f.Stack.DomainSocket, "domain-socket", "", "unix domain socket path instead of host and port")
	fs.StringVar(&f.Stack.Transport, "transport", "buffered", "transport: "+strings.Join(Transports, ", "))
	fs.StringVar(&f.Stack.Protocol, "protocol", "binary", "protocol: "+strings.Join(Protocols, ", "))
	fs.BoolVar(&f.Stack.SSL, "ssl", false, "TLS")
	fs.IntVar(&f.TestLoops, "testloops", 1, "client: number of runs of every check")
	fs.StringVar(&f.CertPath, "certPath", "keys", "server: directory with server.crt and server.key (Apache's test/keys)")
	fs.BoolVar(&f.NoUUID, "no-uuid", false, "client: do not call testUuid (servers built from ThriftTest.thrift of Apache 0.17 or older)")
	// Accepted for compatibility with Apache's programs, as they do.
	fs.Bool("zlib", false, "ignored, as by Apache's Go programs (use --transport=zlib)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if f.Stack.Transport == "http" {
		// Apache's Go and Python programs serve and dial HTTP on host:port
		// and ignore --domain-socket, and Apache's matrix runs its "domain"
		// HTTP cells so: these programs do the same.
		f.Stack.DomainSocket = ""
	}
	if f.TestLoops < 1 {
		return nil, fmt.Errorf("--testloops %d: must be at least 1", f.TestLoops)
	}
	return f, f.Stack.Validate()
}
