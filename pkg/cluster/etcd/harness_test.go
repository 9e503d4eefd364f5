package etcd

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"

	"github.com/hatrpc/hatrpc/pkg/cluster"
	"github.com/hatrpc/hatrpc/pkg/cluster/internal/testsvc/gen/store/storeserver"
	"github.com/hatrpc/hatrpc/pkg/server"
)

// childEnv makes the test binary a registered server process (childMain)
// that a test can SIGKILL.
const childEnv = "HATRPC_ETCD_TEST_SERVER"

func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(childMain(spec))
	}
	goleak.VerifyTestMain(m)
}

// waitLong bounds every wait for a condition: generous, since the tests
// share a loaded machine; no test depends on how fast anything is.
const waitLong = 90 * time.Second

func tctx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// etcdServer is a real etcd (Debian's etcd-server) on loopback ports, its
// data in a temporary directory; a test may kill and restart it.
type etcdServer struct {
	t                  testing.TB
	bin, dir           string
	clientURL, peerURL string
	mu                 sync.Mutex
	cmd                *exec.Cmd
	exited             chan struct{}
}

func startEtcd(t testing.TB) *etcdServer {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		t.Fatalf("no etcd server binary (%v): run `make deps`, which installs Debian's etcd-server", err)
	}
	e := &etcdServer{t: t, bin: bin, dir: t.TempDir()}
	t.Cleanup(e.kill)
	// Ports picked free may be taken before etcd binds them: try others.
	for try := 0; ; try++ {
		e.clientURL = "http://" + freeAddr(t)
		e.peerURL = "http://" + freeAddr(t)
		if e.launch() {
			return e
		}
		if try == 4 {
			t.Fatalf("etcd did not start; its log:\n%s", e.logTail())
		}
	}
}

func freeAddr(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

func (e *etcdServer) endpoint() string { return strings.TrimPrefix(e.clientURL, "http://") }

// launch starts etcd on its data directory and waits until it answers;
// false if it exited first.
func (e *etcdServer) launch() bool {
	e.t.Helper()
	logf, err := os.OpenFile(filepath.Join(e.dir, "etcd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	require.NoError(e.t, err)
	defer logf.Close()
	cmd := exec.Command(e.bin,
		"--name", "test",
		"--data-dir", filepath.Join(e.dir, "data"),
		"--listen-client-urls", e.clientURL, "--advertise-client-urls", e.clientURL,
		"--listen-peer-urls", e.peerURL, "--initial-advertise-peer-urls", e.peerURL,
		"--initial-cluster", "test="+e.peerURL,
		"--logger", "zap", "--log-outputs", "stderr")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = dieWithTest()
	require.NoError(e.t, cmd.Start())
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	e.mu.Lock()
	e.cmd, e.exited = cmd, exited
	e.mu.Unlock()

	cli := newClient(e.t, e.endpoint())
	defer cli.Close()
	deadline := time.Now().Add(waitLong)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return false
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := cli.Get(ctx, "health")
		cancel()
		if err == nil {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.t.Fatalf("etcd did not answer within %s; its log:\n%s", waitLong, e.logTail())
	return false
}

// kill ends etcd at once (SIGKILL), as a crash would.
func (e *etcdServer) kill() {
	e.mu.Lock()
	cmd, exited := e.cmd, e.exited
	e.cmd = nil
	e.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill()
	select {
	case <-exited:
	case <-time.After(waitLong):
		panic("etcd did not exit after SIGKILL")
	}
}

// restart kills etcd and starts it again on the same ports and data.
func (e *etcdServer) restart() {
	e.t.Helper()
	e.kill()
	for range 50 { // its ports may be busy for a moment
		if e.launch() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.t.Fatalf("etcd did not restart; its log:\n%s", e.logTail())
}

func (e *etcdServer) logTail() string {
	b, _ := os.ReadFile(filepath.Join(e.dir, "etcd.log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// newClient is an etcd client of endpoint that reconnects quickly (the
// tests cut and restore its connection) and logs nothing.
func newClient(t testing.TB, endpoint string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{endpoint},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           grpcbackoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 500 * time.Millisecond},
			MinConnectTimeout: 5 * time.Second,
		})},
	})
	require.NoError(t, err)
	return cli
}

// proxy forwards TCP connections to target until cut: then it closes
// them and every new one, as a network partition would, until healed.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

func startProxy(t testing.TB, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			c.Close()
			continue
		}
		p.wg.Go(func() { p.forward(c) })
	}
}

func (p *proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut || p.conns == nil {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *proxy) forward(c net.Conn) {
	up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil || !p.track(up) {
		if up != nil {
			up.Close()
		}
		c.Close()
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		io.Copy(dst, src)
		dst.Close()
		src.Close()
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	<-done
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// setCut cuts (true) or heals (false) the link.
func (p *proxy) setCut(cut bool) {
	p.mu.Lock()
	p.cut = cut
	if cut {
		for c := range p.conns {
			c.Close()
		}
	}
	p.mu.Unlock()
}

func (p *proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}

// named answers get with its server's address, so a test sees which
// server took each call.
type named struct{ addr string }

func (h *named) Get(context.Context, string) (string, error)     { return h.addr, nil }
func (h *named) Incr(context.Context, string) (int64, error)     { return 0, nil }
func (h *named) Slow(context.Context, string) (string, error)    { return h.addr, nil }
func (h *named) Blob(_ context.Context, n int32) ([]byte, error) { return make([]byte, n), nil }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// regServer is a Store server in this process, registered through its
// own etcd client as a separate server would be.
type regServer struct {
	addr   string
	srv    *server.Server
	reg    *Registrar
	served chan error
}

func startRegistered(t testing.TB, endpoint, service string, opts ...Option) *regServer {
	t.Helper()
	cli := newClient(t, endpoint)
	t.Cleanup(func() { cli.Close() })
	reg, err := NewRegistrar(cli, service, append([]Option{WithLogger(quiet)}, opts...)...)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	rs := &regServer{addr: ln.Addr().String(), reg: reg, served: make(chan error, 1)}
	rs.srv = server.New(server.WithLogger(quiet), server.WithRegistrar(reg))
	storeserver.RegisterStore(rs.srv, &named{addr: rs.addr})
	go func() { rs.served <- rs.srv.Serve(ln) }()
	t.Cleanup(func() { rs.srv.Close(); rs.wait(t) })
	return rs
}

func (rs *regServer) shutdown(t testing.TB) {
	t.Helper()
	require.NoError(t, rs.srv.Shutdown(tctx(t, waitLong)))
	rs.wait(t)
}

func (rs *regServer) wait(t testing.TB) {
	select {
	case err := <-rs.served:
		rs.served <- err // for a second wait
		require.ErrorIs(t, err, server.ErrServerClosed)
	case <-time.After(waitLong):
		t.Fatal("Serve did not return")
	}
}

// childMain serves Store registered in etcd until the process is killed.
// spec is "endpoint service ttl".
func childMain(spec string) int {
	f := strings.Fields(spec)
	if len(f) != 3 {
		fmt.Fprintln(os.Stderr, "bad", childEnv, spec)
		return 2
	}
	ttl, err := time.ParseDuration(f[2])
	if err == nil {
		err = runChild(f[0], f[1], ttl)
	}
	fmt.Fprintln(os.Stderr, err)
	return 1
}

func runChild(endpoint, service string, ttl time.Duration) error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	reg, err := NewRegistrar(cli, service, WithTTL(ttl), WithLogger(quiet))
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	s := server.New(server.WithLogger(quiet), server.WithRegistrar(reg))
	storeserver.RegisterStore(s, &named{addr: ln.Addr().String()})
	fmt.Println(ln.Addr().String())
	return s.Serve(ln)
}

// startChild runs a registered server in a process of its own and
// returns its address and the process.
func startChild(t testing.TB, endpoint, service string, ttl time.Duration) (string, *os.Process) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+endpoint+" "+service+" "+ttl.String())
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = dieWithTest()
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- strings.TrimSpace(s)
		io.Copy(io.Discard, out)
		cmd.Wait()
		close(exited)
	}()
	select {
	case addr := <-line:
		require.NotEmpty(t, addr, "the server process said nothing")
		return addr, cmd.Process
	case <-time.After(waitLong):
		t.Fatal("the server process did not start")
		return "", nil
	}
}

// recorder keeps the messages logged through it, with their "key" and
// "service" attributes.
type recorder struct {
	mu   sync.Mutex
	recs []string
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *recorder) WithGroup(string) slog.Handler            { return r }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	s := rec.Message
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == "key" {
			s += " key=" + a.Value.String()
		}
		return true
	})
	r.mu.Lock()
	r.recs = append(r.recs, s)
	r.mu.Unlock()
	return nil
}

// count reports how many records start with prefix.
func (r *recorder) count(prefix string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, s := range r.recs {
		if strings.HasPrefix(s, prefix) {
			n++
		}
	}
	return n
}

// dialCluster dials a cluster.Client over r with quick probes.
func dialCluster(t testing.TB, r cluster.Resolver) *cluster.Client {
	t.Helper()
	cl, err := cluster.Dial(tctx(t, waitLong), r,
		cluster.WithProbeBackoff(cluster.Backoff{Initial: 10 * time.Millisecond, Max: 100 * time.Millisecond, Multiplier: 2, Jitter: 0.2}),
		cluster.WithBreaker(cluster.BreakerSettings{Failures: 3, OpenFor: 100 * time.Millisecond}))
	require.NoError(t, err)
	t.Cleanup(func() { cl.Close() })
	return cl
}

// serversAre reports whether cl lists exactly addrs, all up.
func serversAre(cl *cluster.Client, addrs ...string) func() bool {
	return func() bool {
		ss := cl.Servers()
		if len(ss) != len(addrs) {
			return false
		}
		for _, s := range ss {
			found := false
			for _, a := range addrs {
				found = found || a == s.Addr
			}
			if !found || !s.Up {
				return false
			}
		}
		return true
	}
}
