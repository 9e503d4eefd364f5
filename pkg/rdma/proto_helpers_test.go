package rdma

import (
	"context"
	"crypto/sha256"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Header and tail bytes of the engine's messages (HR_MSG_HDR, HR_MSG_TAIL).
const (
	msgHdr  = 64
	msgTail = 8
)

// testEPConfig makes eager (8 KiB slots) and hybrid (4 KiB threshold)
// differ, so both fallbacks are visible. A shm READ takes ~100 ns, far less
// than a server turn-around, so R is large enough that fetch mode stays on.
func testEPConfig(poll Polling) EndpointConfig {
	return EndpointConfig{
		SlotSize: 8 << 10, Slots: 16, DirectSize: 64 << 10, RespSize: 64 << 10, EagerThreshold: 4 << 10,
		InlineThreshold: 128, SignalInterval: 8, MaxSendWR: 64, Polling: poll,
		RFPRetries: 1 << 20, RFPFetchSize: 256, MaxMessage: 17 << 20, PoolSize: 256 << 10,
	}
}

func newEndpoint(t testing.TB, pd *PD, cfg EndpointConfig) *RPCEndpoint {
	t.Helper()
	e, err := NewRPCEndpoint(pd, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, e.Close()) })
	return e
}

// newRPCPair connects a client and a server endpoint, on one device or on
// two (shm: two segments, the peer's mapped through /proc).
func newRPCPair(t testing.TB, cc, sc EndpointConfig, twoDevices bool) (*RPCEndpoint, *RPCEndpoint) {
	t.Helper()
	d1 := openTest(t)
	d2 := d1
	if twoDevices {
		d2 = openTest(t)
	}
	pd1 := newPD(t, d1)
	pd2 := pd1
	if twoDevices {
		pd2 = newPD(t, d2)
	}
	cli := newEndpoint(t, pd1, cc)
	srv := newEndpoint(t, pd2, sc)
	connectEndpoints(t, cli, srv)
	return cli, srv
}

// connectEndpoints bootstraps a client and a server endpoint over a pipe.
func connectEndpoints(t testing.TB, cli, srv *RPCEndpoint) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	ca, cb := net.Pipe()
	defer ca.Close()
	defer cb.Close()
	errc := make(chan error, 1)
	go func() { errc <- srv.Bootstrap(ctx, cb) }()
	require.NoError(t, cli.Bootstrap(ctx, ca))
	require.NoError(t, <-errc)
}

// serve runs srv.Serve on a goroutine locked to an OS thread (a busy
// poller must not share its thread); the cleanup stops it and checks it
// ended cleanly.
func serve(t testing.TB, srv *RPCEndpoint, proto Protocol, h func([]byte) []byte) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		errc <- srv.Serve(ctx, proto, h)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-errc:
			require.NoError(t, err)
		case <-time.After(testTimeout):
			t.Fatal("server did not stop")
		}
	})
}

// recorder is a handler that keeps the checksum of every request and
// answers with respSize(len(req)) bytes derived from the request.
type recorder struct {
	mu       sync.Mutex
	sums     [][32]byte
	respSize func(n int) int
	wait     func(i int) // runs before the handler answers request i
}

func respSeed(req []byte) byte {
	if len(req) == 0 {
		return 0x3c
	}
	return req[0] ^ req[len(req)-1] ^ byte(len(req))
}

func expectedResp(req []byte, n int) []byte {
	b := make([]byte, n)
	fill(b, respSeed(req))
	return b
}

func (r *recorder) handle(req []byte) []byte {
	r.mu.Lock()
	i := len(r.sums)
	r.sums = append(r.sums, sha256.Sum256(req))
	r.mu.Unlock()
	if r.wait != nil {
		r.wait(i)
	}
	n := len(req)
	if r.respSize != nil {
		n = r.respSize(n)
	}
	return expectedResp(req, n)
}

func (r *recorder) sum(i int) [32]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sums[i]
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.sums)
}

func counters(t testing.TB, e *RPCEndpoint) Counters {
	t.Helper()
	c, err := e.Counters()
	require.NoError(t, err)
	return c
}

func postedDelta(a, b Counters) [NumOpcodes]uint64 {
	var d [NumOpcodes]uint64
	for i := range d {
		d[i] = b.Posted[i] - a.Posted[i]
	}
	return d
}

// effective mirrors ep_send_msg's choice for an n-byte message to a peer
// with cfg's buffers.
func effective(p Protocol, n int, cfg EndpointConfig) Protocol {
	switch p {
	case ProtoHybrid:
		if n <= cfg.EagerThreshold && n <= cfg.SlotSize {
			return ProtoEager
		}
		return ProtoWriteRNDV
	case ProtoEager:
		if n > cfg.SlotSize {
			return ProtoWriteRNDV
		}
	case ProtoDirectWriteSend, ProtoChainedWriteSend, ProtoDirectWriteIMM, ProtoRFP:
		if n > cfg.DirectSize {
			return ProtoWriteRNDV
		}
	}
	return p
}

// oneWay is what the sender and the receiver post to move one n-byte
// message by p (RFP's fetched response excluded).
func oneWay(p Protocol, n int, cfg EndpointConfig, receiverEvent bool) (snd, rcv [NumOpcodes]uint64) {
	switch effective(p, n, cfg) {
	case ProtoEager:
		snd[OpSend] = 1
	case ProtoWriteRNDV: // RTS, WRITE, FIN / CTS
		snd[OpSend], snd[OpRDMAWrite], rcv[OpSend] = 2, 1, 1
	case ProtoReadRNDV: // RTS / READ, FIN
		snd[OpSend], rcv[OpRDMARead], rcv[OpSend] = 1, 1, 1
	case ProtoDirectWriteSend, ProtoChainedWriteSend:
		snd[OpRDMAWrite], snd[OpSend] = 1, 1
	case ProtoDirectWriteIMM:
		snd[OpRDMAWriteWithImm] = 1
	case ProtoRFP:
		if receiverEvent {
			snd[OpRDMAWriteWithImm] = 1
		} else {
			snd[OpRDMAWrite] = 1
		}
	}
	return snd, rcv
}

func addOps(a *[NumOpcodes]uint64, b [NumOpcodes]uint64, times uint64) {
	for i := range a {
		a[i] += b[i] * times
	}
}
