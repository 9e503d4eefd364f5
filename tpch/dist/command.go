package dist

import (
	"context"
	"flag"
	"io"
	"strings"
)

// Command is `tpch worker ARGS`: its flags parsed, then Main. It lives
// here rather than in cmd/tpch so that a test binary can be its own
// worker (bench's TestMain runs it for `<test binary> worker ...`): the
// Soft-RoCE guest then needs no go build of cmd/tpch.
func Command(ctx context.Context, stdout io.Writer, args []string) error {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	index := fs.Int("index", -1, "this worker's index, 0 <= index < of")
	of := fs.Int("of", 0, "the number of workers")
	sf := fs.Float64("sf", 0.01, "TPC-H scale factor (every worker and the coordinator use the same)")
	cfgs := fs.String("config", "function", "configurations to serve: vanilla, service, function (comma-separated)")
	addrs := fs.String("addr", "", "listen address per configuration, comma-separated (default 127.0.0.1:0 each)")
	rdma := fs.String("rdma", "off", "lanes for HatRPC coordinators: off, shm, ibv or auto")
	watch := fs.Bool("watch-stdin", false, "exit when stdin closes (the parent process went away)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	configs, err := ParseConfigs(*cfgs)
	if err != nil {
		return err
	}
	var as []string
	if *addrs == "" {
		for range configs {
			as = append(as, "127.0.0.1:0")
		}
	} else {
		as = strings.Split(*addrs, ",")
	}
	return Main(ctx, stdout, *index, *of, *sf, configs, as, *rdma, *watch)
}

// ParseConfigs reads a comma-separated list of configurations.
func ParseConfigs(s string) ([]Config, error) {
	var out []Config
	for _, n := range strings.Split(s, ",") {
		c, err := ParseConfig(strings.TrimSpace(n))
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}
