package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/hatrpc/hatrpc/internal/hatkv"
	gen "github.com/hatrpc/hatrpc/internal/hatkv/gen/hatkv"
	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/fastpath"
	"github.com/hatrpc/hatrpc/pkg/proto"
)

// clientFlags are shared by the commands that talk to a server.
type clientFlags struct {
	addr      string
	addrs     []string
	transport string
	timeout   time.Duration

	tls           bool
	tlsCA         string
	tlsServerName string
	tlsCert       string
	tlsKey        string
	token         string
	rdmaDevice    string
	rdmaGID       string
}

func (c *clientFlags) register(cmd *cobra.Command) {
	c.registerConn(cmd)
	cmd.Flags().DurationVar(&c.timeout, "timeout", 10*time.Second, "deadline for the whole command")
}

// registerConn registers the connection flags only (bench runs as long as
// its workload says, so it has no --timeout).
func (c *clientFlags) registerConn(cmd *cobra.Command) {
	cmd.Flags().StringVar(&c.addr, "addr", defaultAddr, "server address")
	cmd.Flags().StringSliceVar(&c.addrs, "addrs", nil, "several independent servers (comma separated): keys are spread over them by consistent hashing")
	cmd.MarkFlagsMutuallyExclusive("addr", "addrs")
	cmd.Flags().StringVar(&c.transport, "transport", "auto", "auto|tcp|shm|rdma (shm/rdma: fail unless the server grants lanes)")
	f := cmd.Flags()
	f.BoolVar(&c.tls, "tls", false, "speak TLS, verifying the server against the system roots (implied by the other --tls-* flags)")
	f.StringVar(&c.tlsCA, "tls-ca", "", "speak TLS, verifying the server's certificate against this CA (PEM)")
	f.StringVar(&c.tlsServerName, "tls-server-name", "", "name the server's certificate must carry (default: the host of --addr)")
	f.StringVar(&c.tlsCert, "tls-cert", "", "client certificate (PEM), for a server started with --tls-client-ca")
	f.StringVar(&c.tlsKey, "tls-key", "", "client certificate's key (PEM)")
	f.StringVar(&c.rdmaDevice, "rdma-device", "", "RDMA device[:port] of the lanes (default: $"+fastpath.EnvRDMADevice+", else the one the route to the server leaves from)")
	f.StringVar(&c.rdmaGID, "rdma-gid", "", "source GID: auto (the route's source address's GID, RoCE v2 first), v2, or a GID index (default: $"+fastpath.EnvRDMAGID+")")
	f.StringVar(&c.token, "token", "", "shared secret the server requires (default: $"+hatkv.TokenEnv+")")
}

// dialOptions turns the TLS and token flags into client options.
func (c *clientFlags) dialOptions() ([]hatkv.ClientOption, error) {
	var opts []hatkv.ClientOption
	if c.tls || c.tlsCA != "" || c.tlsServerName != "" || c.tlsCert != "" || c.tlsKey != "" {
		cfg, err := hatkv.ClientTLS(c.tlsCA, c.tlsServerName, c.tlsCert, c.tlsKey)
		if err != nil {
			return nil, err
		}
		opts = append(opts, hatkv.WithClientTLS(cfg))
	}
	if c.rdmaDevice != "" || c.rdmaGID != "" {
		opts = append(opts, hatkv.WithClientOptions(client.WithRDMADevice(c.rdmaDevice), client.WithRDMAGID(c.rdmaGID)))
	}
	if c.token == "" {
		c.token = os.Getenv(hatkv.TokenEnv)
	}
	if c.token != "" {
		opts = append(opts, hatkv.WithClientToken(c.token))
	}
	return opts, nil
}

// servers returns the addresses to use: --addrs, or --addr.
func (c *clientFlags) servers() []string {
	if len(c.addrs) > 0 {
		return c.addrs
	}
	return []string{c.addr}
}

// dial connects with the connection flags and extra options: one client
// per server, keys spread over them by the ring (one server: all keys).
func (c *clientFlags) dial(ctx context.Context, extra ...hatkv.ClientOption) (*hatkv.Cluster, error) {
	opts, err := c.dialOptions()
	if err != nil {
		return nil, err
	}
	opts = append(append(opts, hatkv.WithClientTransport(c.transport)), extra...)
	cl, err := hatkv.DialCluster(ctx, c.servers(), opts...)
	return cl, c.hint(err)
}

// hint adds what to try when a server closed the connection on a client
// without a token: a token-protected server cannot tell it anything. A
// message over the size limit is not that: its error says what it is.
func (c *clientFlags) hint(err error) error {
	var ce *client.ConnError
	closed := errors.As(err, &ce) && ce.Op != "dial" && !errors.Is(err, proto.ErrSizeLimit)
	// A server that requires a token drops the handshake of a client
	// without one; the client then sees no lanes granted.
	if err != nil && c.token == "" && (closed || errors.Is(err, hatkv.ErrTransportUnavailable)) {
		return fmt.Errorf("%w (if the server requires a token, give --token or $%s)", err, hatkv.TokenEnv)
	}
	return err
}

// with dials, runs fn under the timeout and closes the connection.
func (c *clientFlags) with(cmd *cobra.Command, fn func(ctx context.Context, kv hatkv.KV) error) error {
	ctx, cancel := context.WithTimeout(cmd.Context(), c.timeout)
	defer cancel()
	cl, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	return c.hint(fn(ctx, cl))
}

func newGetCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "get KEY [FIELD...]",
		Short: "Print a record (all fields, or the ones named; a named field the record lacks is an error)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return cf.with(cmd, func(ctx context.Context, kv hatkv.KV) error {
				rec, err := kv.Get(ctx, args[0], args[1:])
				if err != nil {
					return err
				}
				printRecord(cmd.OutOrStdout(), "", rec)
				var missing []string
				for _, f := range args[1:] {
					if _, ok := rec[f]; !ok && !slices.Contains(missing, f) {
						missing = append(missing, f)
					}
				}
				if len(missing) > 0 {
					return fmt.Errorf("%w: record %q has no field %s", errMissingField, args[0], strings.Join(missing, ", "))
				}
				return nil
			})
		},
	}
	cf.register(cmd)
	return cmd
}

// errMissingField: get named a field the record does not have.
var errMissingField = errors.New("missing field")

func newPutCmd() *cobra.Command {
	var (
		cf    clientFlags
		field string
	)
	cmd := &cobra.Command{
		Use:   "put KEY [FIELD=VALUE...]",
		Short: "Merge fields into a record (created if missing)",
		Long: `Put merges FIELD=VALUE pairs into the record under KEY. Without pairs the
fields come from stdin: one FIELD=VALUE per line, or, with --field NAME, all
of stdin (binary safe) becomes the value of that one field.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rec, err := recordFrom(args[1:], field, cmd.InOrStdin())
			if err != nil {
				return err
			}
			return cf.with(cmd, func(ctx context.Context, kv hatkv.KV) error {
				if err := kv.Put(ctx, args[0], rec); err != nil {
					return err
				}
				outf(cmd.OutOrStdout(), "OK %s (%d fields)\n", args[0], len(rec))
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&field, "field", "", "read this one field's value from stdin")
	cf.register(cmd)
	return cmd
}

// recordFrom builds a record from FIELD=VALUE arguments or from stdin.
func recordFrom(pairs []string, field string, stdin io.Reader) (gen.Record, error) {
	rec := gen.Record{}
	if field != "" {
		if len(pairs) > 0 {
			return nil, errors.New("--field reads the value from stdin; give no FIELD=VALUE pairs with it")
		}
		v, err := io.ReadAll(stdin)
		if err != nil {
			return nil, fmt.Errorf("reading stdin: %w", err)
		}
		rec[field] = v
		return rec, nil
	}
	add := func(src, s string) error {
		name, val, ok := strings.Cut(s, "=")
		if !ok || name == "" {
			return fmt.Errorf("%s: %q is not FIELD=VALUE", src, s)
		}
		rec[name] = []byte(val)
		return nil
	}
	for _, p := range pairs {
		if err := add("argument", p); err != nil {
			return nil, err
		}
	}
	if len(pairs) > 0 {
		return rec, nil
	}
	sc := bufio.NewScanner(stdin)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		if err := add(fmt.Sprintf("stdin line %d", n), line); err != nil {
			return nil, err
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading stdin: %w", err)
	}
	if len(rec) == 0 {
		return nil, errors.New("no fields: give FIELD=VALUE arguments or lines on stdin")
	}
	return rec, nil
}

func newDelCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:     "del KEY",
		Aliases: []string{"delete"},
		Short:   "Delete a record",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return cf.with(cmd, func(ctx context.Context, kv hatkv.KV) error {
				if err := kv.Delete(ctx, args[0]); err != nil {
					return err
				}
				outf(cmd.OutOrStdout(), "deleted %s\n", args[0])
				return nil
			})
		},
	}
	cf.register(cmd)
	return cmd
}

func newScanCmd() *cobra.Command {
	var (
		cf     clientFlags
		count  int32
		fields []string
		all    bool
	)
	cmd := &cobra.Command{
		Use:   "scan [START] | scan FROM TO | scan --all",
		Short: "Print up to --count records with keys >= START; every record of [FROM, TO), or of the store, streamed",
		Long: `scan START prints up to --count records (at most 10,000) with keys >= START,
in key order, from one Scan call.

scan FROM TO prints every record with FROM <= key < TO and scan --all every
record of the store, in key order, without that limit: the server streams
them (ScanStream) in batches of about 64 KiB, so memory stays constant on
both sides however many records there are. --count, when given, stops
after that many. A streamed scan has no deadline unless --timeout is given.`,
		Args: cobra.MaximumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if all && len(args) > 0 {
				return errors.New("scan --all takes no keys: give --all, or FROM TO")
			}
			if all || len(args) == 2 {
				req := &gen.ScanRequest{Fields: fields}
				if len(args) == 2 {
					req.StartKey, req.EndKey = args[0], args[1]
				}
				if cmd.Flags().Changed("count") {
					if count < 1 {
						return fmt.Errorf("--count %d: want at least 1", count)
					}
					req.Limit = int64(count)
				}
				return cf.streamScan(cmd, req)
			}
			start := ""
			if len(args) == 1 {
				start = args[0]
			}
			return cf.with(cmd, func(ctx context.Context, kv hatkv.KV) error {
				recs, err := kv.Scan(ctx, start, count, fields)
				if err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				for _, kr := range recs {
					outf(w, "%s\n", kr.Key)
					printRecord(w, "  ", kr.Record)
				}
				outf(w, "(%d records)\n", len(recs))
				return nil
			})
		},
	}
	cmd.Flags().Int32VarP(&count, "count", "n", 10, "maximum number of records")
	cmd.Flags().StringSliceVar(&fields, "fields", nil, "only these fields (comma separated)")
	cmd.Flags().BoolVar(&all, "all", false, "every record of the store, streamed")
	cf.register(cmd)
	return cmd
}

// streamScan prints the records of a ScanStream as they come (through
// a buffer: a million records are a million lines).
func (c *clientFlags) streamScan(cmd *cobra.Command, req *gen.ScanRequest) error {
	ctx, cancel := context.WithCancel(cmd.Context())
	defer cancel()
	if cmd.Flags().Changed("timeout") {
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	cl, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	// Records in wire form (no map per record), printed from its bytes.
	st, err := cl.ScanStreamWire(ctx, req)
	if err != nil {
		return c.hint(err)
	}
	w := bufio.NewWriterSize(cmd.OutOrStdout(), 64<<10)
	var (
		b      hatkv.WireBatch
		fields []wireField
	)
	n := 0
	for {
		err := st.Recv(&b)
		if err == io.EOF {
			break
		}
		if err != nil {
			_ = w.Flush()
			return c.hint(err)
		}
		for _, kr := range b.Records {
			outf(w, "%s\n", kr.Key)
			fields = printWire(w, "  ", kr, fields[:0])
		}
		n += len(b.Records)
	}
	outf(w, "(%d records)\n", n)
	return w.Flush()
}

func newStatsCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "stats",
		Short: "Print store statistics",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cf.with(cmd, func(ctx context.Context, kv hatkv.KV) error {
				st, err := kv.Stats(ctx)
				if err != nil {
					return err
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
				rows := [][2]string{
					{"records", fmt.Sprint(st.Records)},
					{"map size", fmt.Sprintf("%d bytes", st.MapSize)},
					{"used", fmt.Sprintf("%d bytes (%.1f%%)", st.UsedBytes, 100*float64(st.UsedBytes)/float64(max(st.MapSize, 1)))},
					{"readers", fmt.Sprintf("%d of %d", st.NumReaders, st.MaxReaders)},
					{"sync", st.SyncMode},
					{"commit", st.CommitMode},
					{"writemap", strconv.FormatBool(st.WriteMap)},
					{"max key size", fmt.Sprint(st.MaxKeySize)},
					{"gets / puts / deletes / scans", fmt.Sprintf("%d / %d / %d / %d", st.Gets, st.Puts, st.Deletes, st.Scans)},
					{"commits (writes carried, max batch)", fmt.Sprintf("%d (%d, %d)", st.Commits, st.BatchedWrites, st.MaxBatch)},
					{"last txn id", fmt.Sprint(st.LastTxnID)},
					{"map growths", fmt.Sprint(st.MapGrowths)},
				}
				for _, r := range rows {
					outf(tw, "%s\t%s\n", r[0], r[1])
				}
				return tw.Flush()
			})
		},
	}
	cf.register(cmd)
	return cmd
}

// printRecord prints fields sorted by name; values that are not printable
// text are quoted so binary data cannot garble the terminal.
func printRecord(w io.Writer, indent string, rec gen.Record) {
	for _, name := range slices.Sorted(maps.Keys(rec)) {
		outf(w, "%s%s=%s\n", indent, name, printable(rec[name]))
	}
}

// wireField is one field of a wire-form record, for printWire.
type wireField struct{ name, val []byte }

// printWire prints a wire-form record as printRecord prints its map:
// fields sorted by name (a store's records are sorted already, a
// decoding server's need not be). fields is scratch space, returned for
// reuse.
func printWire(w io.Writer, indent string, kr hatkv.WireRecord, fields []wireField) []wireField {
	for n, v := range kr.All() {
		fields = append(fields, wireField{n, v})
	}
	if !slices.IsSortedFunc(fields, cmpField) {
		slices.SortFunc(fields, cmpField)
	}
	for _, f := range fields {
		outf(w, "%s%s=%s\n", indent, f.name, printable(f.val))
	}
	return fields
}

func cmpField(a, b wireField) int { return bytes.Compare(a.name, b.name) }

func printable(v []byte) string {
	s := string(v)
	if !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return strconv.Quote(s)
	}
	return s
}
