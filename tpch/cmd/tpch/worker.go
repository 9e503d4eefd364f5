package main

import (
	"context"
	"os"

	"github.com/hatrpc/hatrpc/tpch/dist"
)

// worker is `tpch worker`: one DuckDB worker of the distributed engine,
// holding its partition of lineitem and orders (orderkey % of == index)
// and the other tables whole, serving the exchange in each configuration
// on an address of its own.
func worker(ctx context.Context, args []string) error {
	return dist.Command(ctx, os.Stdout, args)
}
