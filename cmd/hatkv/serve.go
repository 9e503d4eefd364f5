package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/hatrpc/hatrpc/internal/hatkv"
	"github.com/hatrpc/hatrpc/internal/hatkv/kvstore"
	"github.com/hatrpc/hatrpc/pkg/fastpath"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/wire"
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
		keepDumpable                                bool
		rdmaDevice, rdmaGID                         string
		shutdownTimeout                             time.Duration
		tlsCert, tlsKey, tlsClientCA, token, verify string
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve a HatKV store (configured by the IDL's kv.* hints)",
		Long: `Serve opens (or creates) the store in --db and serves it over HatRPC.
The storage settings come from the hints in internal/hatkv/hatkv.thrift
(kv.sync, kv.commit, kv.writemap, concurrency); the flags below override them.
SIGINT or SIGTERM shuts down gracefully: in-flight calls finish, then the
store is closed.

Before LMDB maps data.mdb, every page and record is checked (--verify full;
--verify meta checks only the meta pages and the file size): a damaged store
is refused with what is wrong instead of crashing at the first request.
--db must be missing, empty, or a hatkv data directory (it holds the
hatkv-format marker); anything else is refused and left untouched.

Security: without --tls-cert/--tls-key everything, records included, travels
in clear; without --token (or $HATKV_TOKEN) anyone who reaches the port can
read, write and delete every record. The default --listen 127.0.0.1:9090 is
reachable from this host only; --listen 0.0.0.0:PORT exposes the store on
every network interface. --debug-addr (metrics, pprof) has no authentication:
keep it on loopback.

Memory: the server holds at most 256 MiB for its clients, 64 MiB for one
connection (requests of 64 KiB or more and every reply, replies waiting for
a reader included), and the Go runtime's soft memory limit is that and
48 MiB (304 MiB) unless $GOMEMLIMIT sets another; the records live in LMDB's
map, outside it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			defer limitMemory()() // memlimit.go
			ctx := cmd.Context()
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			opts := []hatkv.Option{hatkv.WithLogger(log), hatkv.WithTransport(transport), hatkv.WithRDMAChoice(rdmaDevice, rdmaGID)}
			switch hintLevel {
			case "function":
			case "service":
				opts = append(opts, hatkv.WithServiceLevelHints())
			default:
				return fmt.Errorf("%w: --hint-level %q: want function or service", hatkv.ErrConfig, hintLevel)
			}
			if keepDumpable {
				opts = append(opts, hatkv.WithRPCOptions(server.WithDumpable()))
			}
			if debugAddr != "" {
				opts = append(opts, hatkv.WithDebugAddr(debugAddr))
			}
			level, err := kvstore.ParseVerifyLevel(verify)
			if err != nil {
				return fmt.Errorf("%w: --verify: %v", hatkv.ErrConfig, err)
			}
			opts = append(opts, hatkv.WithVerify(level))
			secure, err := securityOptions(tlsCert, tlsKey, tlsClientCA, &token)
			if err != nil {
				return err
			}
			opts = append(opts, secure...)
			if emulListen != "" && len(secure) > 0 {
				return fmt.Errorf("%w: --emul-listen serves the emulations' own protocols, without TLS or token; not with --tls-cert or --token", hatkv.ErrConfig)
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
			ln, err := server.Listen(listen)
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
			outf(cmd.OutOrStdout(), "hatkv: store %s (%v), transport %s, %s, listening on %s\n", db, srv.Config(), srv.Transport(),
				securityLabel(tlsCert != "", token != ""), addrFlag(ln.Addr()))
			if exposed(ln.Addr()) && (tlsCert == "" || token == "") {
				log.Warn("hatkv: listening beyond loopback without TLS and a token: anyone who reaches the port can read and change every record",
					"addr", ln.Addr().String(), "tls", tlsCert != "", "token", token != "")
			}
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
	f.StringVar(&listen, "listen", defaultAddr, "address to serve on: host:port, or a unix socket unix:/path (mode 0600) or unix:@name (abstract)")
	f.StringVar(&transport, "transport", "auto", "auto|tcp|shm|rdma: auto adds engine lanes (RDMA NIC if any, else shm for same-host clients) to TCP")
	f.StringVar(&rdmaDevice, "rdma-device", "", "RDMA device[:port] of the lanes (default: $"+fastpath.EnvRDMADevice+", else the one whose netdev carries the address a client arrived on)")
	f.StringVar(&rdmaGID, "rdma-gid", "", "RDMA GID: auto (that address's GID, RoCE v2 first), v2, or a GID index (default: $"+fastpath.EnvRDMAGID+", else auto)")
	f.BoolVar(&keepDumpable, "dumpable", false, "with shm lanes, keep the process dumpable (core dumps, same-user debuggers and /proc readers; also lets same-user processes open its shared segments): see docs/observability.md")
	f.StringVar(&debugAddr, "debug-addr", "", "serve Prometheus /metrics and pprof on this address")
	f.StringVar(&hintLevel, "hint-level", "function", "plan RPCs from function-level hints (function) or service-level hints only (service)")
	f.StringVar(&syncMode, "sync", "", "override kv.sync: always|nometasync|nosync")
	f.StringVar(&commit, "commit", "", "override kv.commit: immediate|group|auto")
	f.StringVar(&writeMap, "writemap", "", "override kv.writemap: on|off")
	f.StringVar(&mapSize, "map-size", "", "override kv.mapsize (LMDB map size, e.g. 4GiB)")
	f.StringVar(&concurrency, "max-readers", "", "override the concurrency hint that sizes LMDB's reader table")
	f.StringVar(&emulListen, "emul-listen", "", "also serve the protocol emulations (bench --emulate) on this TCP address")
	f.DurationVar(&shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long in-flight calls may take on shutdown")
	f.StringVar(&verify, "verify", "full", "check data.mdb before opening it: full (every page and record) or meta (meta pages and file size)")
	f.StringVar(&tlsCert, "tls-cert", "", "serve TLS with this certificate (PEM; needs --tls-key)")
	f.StringVar(&tlsKey, "tls-key", "", "private key of --tls-cert (PEM)")
	f.StringVar(&tlsClientCA, "tls-client-ca", "", "require client certificates signed by this CA (PEM; needs --tls-cert)")
	f.StringVar(&token, "token", "", "require this shared secret from every client (default: $"+hatkv.TokenEnv+"; the variable keeps it out of ps)")
	return cmd
}

// securityOptions turns the TLS and token flags into server options; the
// token falls back to $HATKV_TOKEN.
func securityOptions(cert, key, clientCA string, token *string) ([]hatkv.Option, error) {
	var opts []hatkv.Option
	if cert != "" || key != "" || clientCA != "" {
		cfg, err := hatkv.ServerTLS(cert, key, clientCA)
		if err != nil {
			return nil, err
		}
		opts = append(opts, hatkv.WithTLS(cfg))
	}
	if *token == "" {
		*token = os.Getenv(hatkv.TokenEnv)
	}
	if *token != "" {
		opts = append(opts, hatkv.WithToken(*token))
	}
	return opts, nil
}

func securityLabel(tls, token bool) string {
	s := "plain TCP"
	if tls {
		s = "TLS"
	}
	if token {
		return s + " + token"
	}
	return s + ", no token"
}

// addrFlag is addr as clients' --addr takes it.
func addrFlag(addr net.Addr) string {
	if _, ok := addr.(*net.UnixAddr); ok {
		return wire.UnixPrefix + addr.String()
	}
	return addr.String()
}

// exposed reports whether addr is reachable from other hosts (a unix
// socket never is).
func exposed(addr net.Addr) bool {
	if _, ok := addr.(*net.UnixAddr); ok {
		return false
	}
	ta, ok := addr.(*net.TCPAddr)
	return !ok || !ta.IP.IsLoopback()
}
