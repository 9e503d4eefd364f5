package dist

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Cluster is N worker processes of the tpch command (`tpch worker`),
// each serving the exchange in every configuration asked for, on a port
// per configuration.
type Cluster struct {
	bin     string
	sf      float64
	cfgs    []Config
	rdma    string
	stderr  io.Writer
	procs   []*proc
	addrs   [][]string // [worker][config]
	started time.Duration
}

type proc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{}
}

// StartCluster starts n workers of the tpch binary bin at scale factor
// sf serving cfgs (rdma: HatRPC's lane provider) and waits until every
// one listens. Their stderr goes to stderr (nil: discarded).
func StartCluster(ctx context.Context, bin string, n int, sf float64, cfgs []Config, rdma string, stderr io.Writer) (*Cluster, error) {
	c := &Cluster{bin: bin, sf: sf, cfgs: cfgs, rdma: rdma, stderr: stderr,
		procs: make([]*proc, n), addrs: make([][]string, n)}
	start := time.Now()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			addrs := make([]string, len(cfgs))
			for j := range addrs {
				addrs[j] = "127.0.0.1:0"
			}
			errs[i] = c.start(ctx, i, addrs)
		}()
	}
	wg.Wait()
	c.started = time.Since(start)
	if err := errors.Join(errs...); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// StartTime is how long the workers took to generate their data and listen.
func (c *Cluster) StartTime() time.Duration { return c.started }

func (c *Cluster) start(ctx context.Context, i int, addrs []string) error {
	names := make([]string, len(c.cfgs))
	for j, cf := range c.cfgs {
		names[j] = cf.String()
	}
	cmd := exec.Command(c.bin, "worker", "--index", strconv.Itoa(i), "--of", strconv.Itoa(len(c.procs)),
		"--sf", strconv.FormatFloat(c.sf, 'g', -1, 64), "--config", strings.Join(names, ","),
		"--addr", strings.Join(addrs, ","), "--rdma", c.rdma, "--watch-stdin")
	cmd.Stderr = c.stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	p := &proc{cmd: cmd, stdin: stdin, done: make(chan struct{})}
	c.procs[i] = p
	lines := make(chan []string, 1)
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stdout)
		var got []string
		for sc.Scan() {
			// "exchange <config> <addr>" per configuration, then "ready".
			f := strings.Fields(sc.Text())
			if len(f) == 3 && f[0] == "exchange" {
				got = append(got, f[2])
			}
			if len(f) == 1 && f[0] == "ready" {
				lines <- got
			}
		}
		_ = cmd.Wait()
	}()
	select {
	case got := <-lines:
		if len(got) != len(c.cfgs) {
			return fmt.Errorf("dist: worker %d announced %d addresses for %d configurations", i, len(got), len(c.cfgs))
		}
		c.addrs[i] = got
		return nil
	case <-p.done:
		return fmt.Errorf("dist: worker %d exited before it listened: %v", i, cmd.ProcessState)
	case <-ctx.Done():
		return fmt.Errorf("dist: worker %d: %w", i, ctx.Err())
	}
}

// Addrs are the workers' addresses for configuration cfg.
func (c *Cluster) Addrs(cfg Config) []string {
	j := -1
	for k, cf := range c.cfgs {
		if cf == cfg {
			j = k
		}
	}
	if j < 0 {
		return nil
	}
	out := make([]string, len(c.addrs))
	for i, a := range c.addrs {
		out[i] = a[j]
	}
	return out
}

// Kill kills worker i (SIGKILL) and waits until it is gone.
func (c *Cluster) Kill(i int) {
	p := c.procs[i]
	if p == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.done
	c.procs[i] = nil
}

// Restart starts worker i again on the addresses it had.
func (c *Cluster) Restart(ctx context.Context, i int) error {
	c.Kill(i)
	return c.start(ctx, i, c.addrs[i])
}

// Close stops every worker: closing its stdin makes it exit (it watches
// it), a kill after 10 s if it has not.
func (c *Cluster) Close() {
	for _, p := range c.procs {
		if p != nil {
			_ = p.stdin.Close()
		}
	}
	for i, p := range c.procs {
		if p == nil {
			continue
		}
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		c.procs[i] = nil
	}
}

// Main is `tpch worker`: generate the data, keep the partition, serve
// every configuration, print "exchange <config> <addr>" per
// configuration and "ready", and serve until ctx ends (or stdin closes,
// with watchStdin: the parent went away).
func Main(ctx context.Context, stdout io.Writer, index, count int, sf float64, cfgs []Config, addrs []string, rdma string, watchStdin bool) error {
	if len(addrs) != len(cfgs) {
		return fmt.Errorf("dist: %d addresses for %d configurations", len(addrs), len(cfgs))
	}
	w, err := OpenWorker(ctx, sf, index, count)
	if err != nil {
		return err
	}
	defer w.Close()
	var stops []func(context.Context) error
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, s := range stops {
			_ = s(sctx)
		}
	}()
	for j, cf := range cfgs {
		ln, err := listen(addrs[j])
		if err != nil {
			return err
		}
		stops = append(stops, Serve(w, ln, cf, rdma))
		fmt.Fprintf(stdout, "exchange %s %s\n", cf, ln.Addr())
	}
	fmt.Fprintln(stdout, "ready")
	if watchStdin {
		gone := make(chan struct{})
		go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(gone) }()
		select {
		case <-ctx.Done():
		case <-gone:
		}
		return nil
	}
	<-ctx.Done()
	return nil
}
