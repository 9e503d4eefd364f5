package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/spf13/cobra"

	"github.com/hatrpc/hatrpc/internal/hatkv"
)

// Defaults that make `hatkv serve` (and so `make run`) work with no flags.
const (
	defaultDB   = "./hatkv-data"
	defaultAddr = "127.0.0.1:9090"
)

func newServeCmd() *cobra.Command {
	var (
		db, listen, transport, debugAddr, hintLevel string
		syncMode, commit, writeMap                  string
		mapSize, concurrency                        string
		emulListen                                  string
		shutdownTimeout                             time.Duration
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve a HatKV store (configured by the IDL's kv.* hints)",
		Long: `Serve opens (or creates) the store in --db and serves it over HatRPC.
The storage settings come from the hints in internal/hatkv/hatkv.thrift
(kv.sync, kv.commit, kv.writemap, concurrency); the flags below override them.
SIGINT or SIGTERM shuts down gracefully: in-flight calls finish, then the
store is closed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			opts := []hatkv.Option{hatkv.WithLogger(log), hatkv.WithTransport(transport)}
			switch hintLevel {
			case "function":
			case "service":
				opts = append(opts, hatkv.WithServiceLevelHints())
			default:
				return fmt.Errorf("%w: --hint-level %q: want function or service", hatkv.ErrConfig, hintLevel)
			}
			if debugAddr != "" {
				opts = append(opts, hatkv.WithDebugAddr(debugAddr))
			}
			for _, o := range []struct{ key, val string }{
				{"sync", syncMode}, {"commit", commit}, {"writemap", writeMap},
				{"mapsize", mapSize}, {"concurrency", concurrency},
			} {
				if o.val != "" {
					opts = append(opts, hatkv.WithSetting(o.key, o.val))
				}
			}
			srv, err := hatkv.Open(ctx, db, opts...)
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				_ = srv.Shutdown(context.Background())
				return fmt.Errorf("listen %s: %w", listen, err)
			}
			if debugAddr != "" {
				a, err := srv.StartDebug()
				if err != nil {
					ln.Close()
					_ = srv.Shutdown(context.Background())
					return fmt.Errorf("debug listener %s: %w", debugAddr, err)
				}
				outf(cmd.OutOrStdout(), "debug: http://%s/metrics and /debug/pprof/\n", a)
			}
			outf(cmd.OutOrStdout(), "hatkv: store %s (%v), transport %s, listening on %s\n", db, srv.Config(), srv.Transport(), ln.Addr())
			stopEmul, err := startEmul(cmd, srv, emulListen, log)
			if err != nil {
				ln.Close()
				_ = srv.Shutdown(context.Background())
				return err
			}
			served := make(chan error, 1)
			go func() { served <- srv.Serve(ln) }()
			select {
			case err := <-served:
				stopEmul()
				_ = srv.Shutdown(context.Background())
				return err
			case <-ctx.Done():
			}
			log.Info("hatkv: shutting down", "timeout", shutdownTimeout)
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
			defer cancel()
			stopEmul()
			err = srv.Shutdown(sctx)
			if serr := <-served; serr != nil && err == nil {
				err = serr
			}
			if err == nil {
				outf(cmd.OutOrStdout(), "hatkv: stopped\n")
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&db, "db", defaultDB, "data directory (created if missing)")
	f.StringVar(&listen, "listen", defaultAddr, "TCP address to serve on")
	f.StringVar(&transport, "transport", "auto", "auto|tcp|shm|rdma: auto adds engine lanes (RDMA NIC if any, else shm for same-host clients) to TCP")
	f.StringVar(&debugAddr, "debug-addr", "", "serve Prometheus /metrics and pprof on this address")
	f.StringVar(&hintLevel, "hint-level", "function", "plan RPCs from function-level hints (function) or service-level hints only (service)")
	f.StringVar(&syncMode, "sync", "", "override kv.sync: always|nometasync|nosync")
	f.StringVar(&commit, "commit", "", "override kv.commit: immediate|group|auto")
	f.StringVar(&writeMap, "writemap", "", "override kv.writemap: on|off")
	f.StringVar(&mapSize, "map-size", "", "override kv.mapsize (LMDB map size, e.g. 4GiB)")
	f.StringVar(&concurrency, "max-readers", "", "override the concurrency hint that sizes LMDB's reader table")
	f.StringVar(&emulListen, "emul-listen", "", "also serve the protocol emulations (bench --emulate) on this TCP address")
	f.DurationVar(&shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long in-flight calls may take on shutdown")
	return cmd
}
