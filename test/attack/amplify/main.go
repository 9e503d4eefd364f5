// Command amplify measures issue 43's D2–D5 and D11 against a running
// `hatkv serve`: small requests the server might turn into much more
// memory, goroutines or log. Like replyflood (D1 and the getCounters
// flood) it prints the server's RSS and goroutines before, at their peak
// during, and 10 s after the attack, and a legitimate client's Gets,
// errors and p99 meanwhile, in the same three lines, so
// test/attack/table.sh reads both. It is a measurement run, not a test.
//
//	hatkv serve --db DIR --listen 127.0.0.1:19090 --debug-addr 127.0.0.1:19091 --transport tcp 2>server.log &
//	go run ./test/attack/amplify --mode load                      # 10,000 records zbig* of 10 × 1000 B, once
//	go run ./test/attack/amplify --pid PID --mode bigscan         # D2: Scan(zbig, 10,000): a 100 MB reply
//	go run ./test/attack/amplify --pid PID --mode theader         # D3: 200 THeader frames of 131,062 empty info pairs
//	go run ./test/attack/amplify --pid PID --mode hdrblock --block 32MiB --calls 1 --conns 4   # D4
//	go run ./test/attack/amplify --pid PID --mode oneway          # D5: fb303 shutdown/reinitialize, 8 connections, 10 s
//	go run ./test/attack/amplify --mode maxtimeout                # D11: a Get whose frame timeout is 2^63-1
//
// Against a server started with --token T (the legitimate client sends it):
//
//	go run ./test/attack/amplify --token T --mode load-user       # replyflood's records, with the token
//	go run ./test/attack/amplify --token T --pid PID --mode silent --redial   # D6: 1,280 silent connections from 64 addresses
//	go run ./test/attack/amplify --token T --pid PID --mode guess # D7: wrong tokens from one address, 10 s
//
// The attacks speak the wire as any client could (framed binary Thrift,
// THeader, HatRPC framing after its handshake); the legitimate client is
// hatkv's own, over TCP, reading the records replyflood --load wrote.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hatrpc/hatrpc/internal/hatkv"
	"github.com/hatrpc/hatrpc/test/attack/internal/records"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "amplify:", err)
		os.Exit(1)
	}
}

type config struct {
	addr, debug, mode, pairs string
	pid, calls, conns        int
	block, sources           int
	redial                   bool
	dur, after               time.Duration
	dialOpts                 []hatkv.ClientOption
}

func run() error {
	var c config
	block := flag.String("block", "60KiB", "hdrblock: size of each header block (KiB/MiB suffixes)")
	flag.StringVar(&c.addr, "addr", "127.0.0.1:19090", "hatkv serve's address")
	flag.StringVar(&c.debug, "debug", "127.0.0.1:19091", "hatkv serve's --debug-addr (goroutine counts)")
	token := flag.String("token", "", "the token the server requires (the legitimate client's)")
	flag.StringVar(&c.mode, "mode", "bigscan", "load (zbig*), load-user (replyflood's user*), bigscan (D2), theader (D3), hdrblock (D4), oneway (D5), silent (D6), guess (D7) or maxtimeout (D11)")
	flag.StringVar(&c.pairs, "pairs", "empty", "hdrblock: the block's pairs: empty (2 bytes each, the issue's input) or distinct (1,024 pairs of distinct keys, within the count bound)")
	flag.IntVar(&c.pid, "pid", 0, "the server's pid (RSS)")
	flag.IntVar(&c.calls, "calls", 0, "frames per connection (default 1 for bigscan, 200 for theader and hdrblock)")
	flag.IntVar(&c.conns, "conns", 0, "connections (default 1; 8 for oneway, 1,280 for silent)")
	flag.IntVar(&c.sources, "sources", 64, "silent: loopback source addresses the connections come from (127.0.1.1 on)")
	flag.BoolVar(&c.redial, "redial", false, "the legitimate client dials a new connection for each Get (it then measures connecting too)")
	flag.DurationVar(&c.dur, "dur", 10*time.Second, "how long the attack lasts before its connections close")
	flag.DurationVar(&c.after, "after", 10*time.Second, "how long to watch after they close")
	flag.Parse()
	var err error
	if c.block, err = parseSize(*block); err != nil {
		return err
	}
	c.dialOpts = []hatkv.ClientOption{hatkv.WithClientTransport("tcp"), hatkv.WithClientToken(*token)}
	ctx := context.Background()
	cl, err := hatkv.Dial(ctx, c.addr, c.dialOpts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	switch c.mode {
	case "load":
		return load(ctx, cl.KV(), bigPrefix, 1000)
	case "load-user":
		return load(ctx, cl.KV(), "user", 100)
	case "maxtimeout":
		return maxTimeout(c)
	}
	if c.pid == 0 {
		return errors.New("-pid is required")
	}
	a, ok := attacks[c.mode]
	if !ok {
		return fmt.Errorf("-mode %q: load, load-user, bigscan, theader, hdrblock, oneway, silent, guess or maxtimeout", c.mode)
	}
	return measure(ctx, c, cl.KV(), a)
}

// bigPrefix sorts after replyflood's user* keys, so its Scan("", n)
// still reads the small records.
const bigPrefix = "zbig"

// load writes 10,000 records of 10 fields × vsize bytes under prefix:
// D2's (zbig, 1000 B: a Scan(zbig, 10,000) reply is about 100 MB, over
// the 64 MiB limit), or replyflood's (user, 100 B) the legitimate client
// reads, for a server that requires a token.
func load(ctx context.Context, kv hatkv.KV, prefix string, vsize int) error {
	err := records.Load(ctx, kv, records.Spec{N: 10000, Batch: 100, VSize: vsize, Fill: 'w',
		Key: func(i int) string { return fmt.Sprintf("%s%06d", prefix, i) }})
	if err == nil {
		fmt.Printf("loaded 10,000 records of 10 × %d B under %s\n", vsize, prefix)
	}
	return err
}

// parseSize reads 123, 60KiB or 32MiB.
func parseSize(s string) (int, error) {
	mult := 1
	for suf, m := range map[string]int{"KiB": 1 << 10, "MiB": 1 << 20} {
		if v, ok := strings.CutSuffix(s, suf); ok {
			s, mult = v, m
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("size %q: want a positive number with an optional KiB or MiB suffix", s)
	}
	return n * mult, nil
}

// dialRaw opens an attack connection whose replies are never read.
func dialRaw(addr string) (net.Conn, error) {
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err == nil {
		_ = nc.(*net.TCPConn).SetReadBuffer(4096)
	}
	return nc, err
}
