package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/hatrpc/hatrpc/tpch/dist"
)

// worker is `tpch worker`: one DuckDB worker of the distributed engine,
// holding its partition of lineitem and orders (orderkey % of == index)
// and the other tables whole, serving the exchange in each configuration
// on an address of its own.
func worker(ctx context.Context, args []string) error {
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
	configs, err := parseDistConfigs(*cfgs)
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
	return dist.Main(ctx, os.Stdout, *index, *of, *sf, configs, as, *rdma, *watch)
}

func parseDistConfigs(s string) ([]dist.Config, error) {
	var out []dist.Config
	for _, n := range strings.Split(s, ",") {
		c, err := dist.ParseConfig(strings.TrimSpace(n))
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no configuration")
	}
	return out, nil
}
