package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hatrpc/hatrpc/internal/hatkv"
	"github.com/hatrpc/hatrpc/internal/hatkv/emul"
	"github.com/hatrpc/hatrpc/internal/hatkv/ycsb"
	"github.com/hatrpc/hatrpc/pkg/rdma"
)

// startEmul serves the protocol emulations (internal/hatkv/emul) of srv's
// store on addr, when addr is set. The returned stop must run before the
// store closes (srv.Shutdown): it ends every emulation connection first.
func startEmul(cmd *cobra.Command, srv *hatkv.Server, addr string, log *slog.Logger) (stop func(), err error) {
	if addr == "" {
		return func() {}, nil
	}
	dev, err := rdma.Open()
	if err != nil {
		return nil, fmt.Errorf("emulations need an RDMA device (ibv, or shm): %w", err)
	}
	es, err := emul.NewServer(cmd.Context(), dev, srv.Store(), emul.WithLogger(log))
	if err != nil {
		_ = dev.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		_ = es.Close()
		_ = dev.Close()
		return nil, fmt.Errorf("emul listen %s: %w", addr, err)
	}
	served := make(chan error, 1)
	go func() { served <- es.Serve(ln) }()
	outf(cmd.OutOrStdout(), "hatkv: emulations (argrpc, herd, pilaf, rfp) over %s served at %s\n", dev.Provider(), ln.Addr())
	return func() {
		_ = es.Close() // closes ln too
		if err := <-served; err != nil {
			log.Warn("hatkv: emulation listener", "err", err)
		}
		_ = dev.Close()
	}, nil
}

// emulFlags select `hatkv bench --emulate`.
type emulFlags struct {
	kind    string
	addr    string
	polling string
}

func (e *emulFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&e.kind, "emulate", "", "run through a protocol emulation instead of HatRPC: argrpc|herd|pilaf|rfp")
	f.StringVar(&e.addr, "emul-addr", "", "the server's --emul-listen address (with --emulate)")
	f.StringVar(&e.polling, "emul-polling", "auto", "busy|event|auto (auto: busy for one thread, else event)")
}

func (e *emulFlags) pollingFor(threads int) (rdma.Polling, error) {
	switch e.polling {
	case "busy":
		return rdma.PollBusy, nil
	case "event":
		return rdma.PollEvent, nil
	case "auto":
		// Busy pollers beyond the core count take turns at the CPU.
		if threads == 1 {
			return rdma.PollBusy, nil
		}
		return rdma.PollEvent, nil
	}
	return 0, fmt.Errorf("%w: --emul-polling %q: want busy, event or auto", hatkv.ErrConfig, e.polling)
}

// runEmulBench is runBench through an emulation: one connection per
// thread (an emulation endpoint carries one call at a time). runBench has
// checked the flags they share.
func runEmulBench(cmd *cobra.Command, bf *benchFlags, w *ycsb.Workload) error {
	kind, err := emul.ParseKind(bf.emul.kind)
	if err != nil {
		return fmt.Errorf("%w: %w", hatkv.ErrConfig, err)
	}
	if bf.emul.addr == "" {
		return fmt.Errorf("%w: --emulate needs --emul-addr (the server's --emul-listen)", hatkv.ErrConfig)
	}
	poll, err := bf.emul.pollingFor(bf.threads)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	out := cmd.OutOrStdout()
	dev, err := rdma.Open()
	if err != nil {
		return fmt.Errorf("emulations need an RDMA device (ibv, or shm): %w", err)
	}
	defer dev.Close()
	var d net.Dialer
	dial := func(ctx context.Context) (net.Conn, error) { return d.DialContext(ctx, "tcp", bf.emul.addr) }
	pool, err := emul.DialPool(ctx, dev, bf.threads, dial, kind, emul.WithPolling(poll))
	if err != nil {
		return err
	}
	defer pool.Close()
	seed := bf.seed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	cfg := w.Config()
	outf(out, "hatkv bench: %s, %d records, %d fields x %d B, key %d B, batch %d, %s distribution\n",
		strings.Join(orDefault(bf.workloads, "workloada"), "+"), cfg.RecordCount, cfg.FieldCount, cfg.FieldLength, cfg.KeyLength, cfg.BatchSize,
		cfg.RequestDistribution)
	outf(out, "emulation %s at %s over %s, %d threads (one connection each), %s polling, seed %d\n",
		kind, bf.emul.addr, dev.Provider(), bf.threads, poll, seed)
	results, err := runPhases(ctx, bf, seed, func(phase string, seed uint64) (phaseResult, error) {
		return runEmulPhase(ctx, out, bf, pool, w, phase, seed)
	})
	if err != nil {
		return err
	}
	if kind == emul.Pilaf {
		var st emul.PilafStats
		for _, c := range pool.Clients() {
			s := c.PilafStats()
			st.Gets, st.Reads, st.Retries, st.Fallbacks = st.Gets+s.Gets, st.Reads+s.Reads, st.Retries+s.Retries, st.Fallbacks+s.Fallbacks
		}
		outf(out, "pilaf: %d one-sided GETs, %d READs, %d retries, %d answered by RPC\n", st.Gets, st.Reads, st.Retries, st.Fallbacks)
	}
	return finishBench(ctx, out, bf, results)
}

// runEmulPhase is runPhase over an emulation's pool. A peer gone ends the
// bench with an error: the rest of the phase would only fail too.
func runEmulPhase(ctx context.Context, out io.Writer, bf *benchFlags, db ycsb.DB, w *ycsb.Workload, phase string, seed uint64) (phaseResult, error) {
	res, cdb, err := measurePhase(ctx, out, bf, db, w, phase, seed)
	if err == nil && errors.Is(cdb.firstError(), emul.ErrPeerGone) {
		return phaseResult{}, fmt.Errorf("%s phase: %w", phase, cdb.firstError())
	}
	return res, err
}
