package crosstest_test

import (
	"slices"

	"github.com/hatrpc/hatrpc/test/crosstest"
)

// peer is the Apache side of a cell and the direction of the calls.
type peer string

const (
	goClient peer = "apache-go-client" // Apache's Go library calls a HatRPC server
	goServer peer = "apache-go-server" // a HatRPC client calls Apache's Go library
	pyClient peer = "python-client"    // Apache's Python library (Debian's python3-thrift) calls HatRPC
	pyServer peer = "python-server"    // a HatRPC client calls Apache's Python TSimpleServer
)

var (
	allPeers    = []peer{goClient, goServer, pyClient, pyServer}
	pythonPeers = []peer{pyClient, pyServer}
)

// row is a block of cells, every protocol × transport × socket of it run
// against every peer of it. A cell is listed only when it passes.
type row struct {
	protocols  []string // Apache's names; the Python-only accelerated codecs too
	transports []string
	sockets    []string // "ip", "ip-ssl"
	peers      []peer
}

var matrix = []row{
	{[]string{"binary", "compact", "json", "multi", "multic", "multij"}, []string{"buffered", "framed"}, []string{"ip", "ip-ssl"}, allPeers},
	// THeader on a bare socket, and inside Apache's framed transport.
	{[]string{"header", "multih"}, []string{"buffered", "framed"}, []string{"ip", "ip-ssl"}, allPeers},
	{[]string{"binary", "compact", "json", "header", "multi", "multic", "multij", "multih"}, []string{"zlib"}, []string{"ip", "ip-ssl"}, allPeers},
	{[]string{"binary", "compact", "json", "header", "multi", "multic", "multij", "multih"}, []string{"http"}, []string{"ip"}, allPeers},
	// Python's THttpClient has no TLS options of its own (Apache's matrix
	// runs http over TLS for Go only).
	{[]string{"binary", "compact", "json", "header"}, []string{"http"}, []string{"ip-ssl"}, []peer{goClient, goServer}},
	// Unix sockets: Apache's Python matrix runs them (its Go programs do
	// too, with --domain-socket; the Go peer here is the library itself).
	{[]string{"binary", "compact", "multic", "json"}, []string{"buffered", "framed"}, []string{"domain"}, pythonPeers},
	// Python's C codecs (Apache's binary:accel cells): binary and compact to HatRPC.
	{[]string{"accel", "accelc", "multia", "multiac"}, []string{"buffered", "framed", "zlib", "http"}, []string{"ip"}, pythonPeers},
}

// cell is one protocol × transport × socket.
type cell struct {
	protocol, transport, socket string
}

func (c cell) name() string { return c.protocol + "-" + c.transport + "-" + c.socket }

func (c cell) ssl() bool { return c.socket == "ip-ssl" }

// accelerated maps Python's C codecs to what they are on the wire.
var accelerated = map[string]string{"accel": "binary", "accelc": "compact", "multia": "multi", "multiac": "multic"}

// hatStack is the stack the HatRPC side speaks in c.
func (c cell) hatStack() crosstest.Stack {
	p := c.protocol
	if wire, ok := accelerated[p]; ok {
		p = wire
	}
	return crosstest.Stack{Protocol: p, Transport: c.transport, SSL: c.ssl()}
}

// cellsFor lists the cells the matrix runs against p, in table order.
func cellsFor(p peer) []cell {
	var out []cell
	for _, r := range matrix {
		if !slices.Contains(r.peers, p) {
			continue
		}
		for _, proto := range r.protocols {
			for _, tr := range r.transports {
				for _, sock := range r.sockets {
					out = append(out, cell{protocol: proto, transport: tr, socket: sock})
				}
			}
		}
	}
	return out
}
