package client_test

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/client/clientmetrics"
	"github.com/hatrpc/hatrpc/pkg/status"
	"github.com/hatrpc/hatrpc/pkg/status/codes"
)

// Retries, hedges and the retry budget of a Conn, and per-call options
// on the context (generated clients pass the context through).
func ExampleWithCallOptions() {
	ctx := context.Background()
	m := clientmetrics.New(prometheus.NewRegistry())
	conn, err := client.Dial(ctx, "127.0.0.1:9090",
		client.WithRetryBudget(0.1, 5),           // retries ≤ 10 % of calls + 5/s
		client.WithHedge(20*time.Millisecond),    // a second copy of a slow idempotent call
		client.WithRetryObserver(m.ObserveRetry)) // hatrpc_client_retries_total
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()

	// This call: at most 1 s, its retries included, and one retry.
	ctx = client.WithCallOptions(ctx, client.CallTimeout(time.Second), client.Retries(1))
	kv := newKVClient(conn) // a generated client: gen.NewKVClient(conn)
	if _, err := kv.Get(ctx, "user1"); status.Code(err) == codes.Unavailable {
		fmt.Println("still unavailable after the retry")
	}
}

// kvClient stands in for a generated client in the example.
type kvClient struct{ c *client.Conn }

func newKVClient(c *client.Conn) kvClient { return kvClient{c} }

func (k kvClient) Get(ctx context.Context, key string) (string, error) {
	return "", k.c.Call(ctx, &client.Method{Service: "KV", Name: "get"}, nil, nil)
}
