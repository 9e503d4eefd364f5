package clientmetrics_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/client/clientmetrics"
)

// ObserveRetry counts a Conn's retries, hedges and throttled retries
// by kind.
func TestObserveRetry(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := clientmetrics.New(reg)
	meth := &client.Method{Service: "KV", Name: "get"}
	for _, k := range []client.RetryKind{client.Retried, client.Retried, client.Hedged, client.Throttled} {
		m.ObserveRetry(client.RetryEvent{Method: meth, Kind: k})
	}
	for kind, want := range map[string]float64{"retry": 2, "hedge": 1, "throttled": 1} {
		assert.Equal(t, want, value(t, reg, "hatrpc_client_retries_total",
			map[string]string{"service": "KV", "function": "get", "kind": kind}), kind)
	}
}
