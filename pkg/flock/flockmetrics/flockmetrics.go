// Package flockmetrics exports a flock.Metrics to Prometheus as the flock_*
// series. It is apart from pkg/flock so that a client binary, which links
// pkg/flock for its FLOCK handle, links no Prometheus.
package flockmetrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hatrpc/hatrpc/pkg/flock"
)

var (
	degree = prometheus.NewDesc("flock_coalescing_degree",
		"Requests or responses per posted message.", []string{"side"}, nil)
	creditsGranted = prometheus.NewDesc("flock_credits_granted_total",
		"Credit renewals the QP scheduler granted.", nil, nil)
	creditsDeclined = prometheus.NewDesc("flock_credits_declined_total",
		"Credit renewals declined (QP deactivated).", nil, nil)
	activeQPs = prometheus.NewDesc("flock_active_qps",
		"Active QPs per sender.", []string{"peer"}, nil)
	migrations = prometheus.NewDesc("flock_migrations_total",
		"Callers moved to another QP by the goroutine scheduler.", nil, nil)
	messages = prometheus.NewDesc("flock_messages_total",
		"Coalesced messages posted.", []string{"side"}, nil)
	entries = prometheus.NewDesc("flock_entries_total",
		"Requests or responses carried in messages.", []string{"side"}, nil)
	headReads = prometheus.NewDesc("flock_head_reads_total",
		"RDMA READs of a peer ring head (piggybacked head was stale).", nil, nil)
	sleeps = prometheus.NewDesc("flock_dispatcher_sleeps_total",
		"Dispatcher sleeps on the doorbell: a client's (calls outstanding, rings empty) or an idle server's.", nil, nil)
	wakeups = prometheus.NewDesc("flock_dispatcher_wakeups_total",
		"Doorbells rung to wake a sleeping dispatcher (a client's by the server, the server's by a client).", nil, nil)
	peers = prometheus.NewDesc("flock_peers",
		"Senders connected to the server (released when they leave or die).", nil, nil)
	serverQPs = prometheus.NewDesc("flock_server_qps",
		"QPs the server holds for its senders.", nil, nil)
)

var descs = []*prometheus.Desc{degree, creditsGranted, creditsDeclined, activeQPs, migrations, messages,
	entries, headReads, sleeps, wakeups, peers, serverQPs}

type collector struct{ m *flock.Metrics }

// New returns a collector of m's series, to register on a registry.
func New(m *flock.Metrics) prometheus.Collector { return collector{m} }

func (collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range descs {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	s := c.m.Snapshot()
	counter := func(d *prometheus.Desc, v uint64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), lv...)
	}
	gauge := func(d *prometheus.Desc, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv...)
	}
	for side, ss := range s.Sides {
		// Prometheus buckets are cumulative and leave out +Inf (the count).
		buckets := make(map[float64]uint64, len(flock.DegreeBuckets))
		var cum uint64
		for i, le := range flock.DegreeBuckets {
			cum += ss.Degree.Counts[i]
			buckets[le] = cum
		}
		ch <- prometheus.MustNewConstHistogram(degree, ss.Degree.Count, ss.Degree.Sum, buckets, side)
		counter(messages, ss.Messages, side)
		counter(entries, ss.Entries, side)
	}
	counter(creditsGranted, s.CreditsGranted)
	counter(creditsDeclined, s.CreditsDeclined)
	counter(migrations, s.Migrations)
	counter(headReads, s.HeadReads)
	counter(sleeps, s.DispatcherSleeps)
	counter(wakeups, s.DispatcherWakeups)
	gauge(peers, s.Peers)
	gauge(serverQPs, s.ServerQPs)
	for peer, v := range s.ActiveQPs {
		gauge(activeQPs, v, peer)
	}
}
