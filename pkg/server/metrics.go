package server

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hatrpc/hatrpc/pkg/fastpath"
	"github.com/hatrpc/hatrpc/pkg/proto"
)

// metrics are created per Server on its registry so several servers (and
// tests) never collide on the global default registry.
type metrics struct {
	calls, errors *prometheus.CounterVec
	handled       *prometheus.CounterVec
	reqBytes      *prometheus.CounterVec
	repBytes      *prometheus.CounterVec
	inflight      *prometheus.GaugeVec
	latency       *prometheus.HistogramVec
	bytesIn       *prometheus.CounterVec
	bytesOut      *prometheus.CounterVec
	conns         prometheus.Gauge
	lanes         prometheus.Gauge
	flockPeers    prometheus.Gauge
	laneReplies   *prometheus.CounterVec
	engineSent    *prometheus.CounterVec
	rejected      *prometheus.CounterVec
	closedBy      *prometheus.CounterVec
	closed        [numWhy]prometheus.Counter // closedBy's children, by close reason

	// The shards the calls execute ends are counted in (callmeter.go).
	shards  int
	ioc     []ioCell
	trackMu sync.Mutex
	tracked []*methodStats
}

// newMetrics makes the server's metrics on reg; snap is what the
// dedicated lanes' meters counted, which the families they count for add
// at scrape time, with the call shards (callmeter.go).
func newMetrics(reg *prometheus.Registry, snap func() *laneSnap) *metrics {
	lbl := []string{"service", "function", "transport"}
	n := callShardCount()
	m := &metrics{
		shards: n,
		ioc:    make([]ioCell, n),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hatrpc", Subsystem: "server", Name: "calls_total", Help: "Calls handled.",
		}, lbl),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hatrpc", Subsystem: "server", Name: "errors_total",
			Help: "Calls that did not end ok, by outcome: the declared exception's type name, overload, deadline, canceled, or the application exception's kind (internal_error, protocol_error, missing_result, ...).",
		}, append(lbl, "outcome")),
		handled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hatrpc", Subsystem: "server", Name: "handled_total",
			Help: "Calls ended, by outcome: ok, or an errors_total outcome.",
		}, append(lbl, "outcome")),
		reqBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hatrpc", Subsystem: "server", Name: "request_bytes_total", Help: "Request message bytes per function.",
		}, lbl),
		repBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hatrpc", Subsystem: "server", Name: "reply_bytes_total", Help: "Reply message bytes per function.",
		}, lbl),
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "hatrpc", Subsystem: "server", Name: "in_flight", Help: "Calls executing now.",
		}, lbl),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "hatrpc", Subsystem: "server", Name: "call_duration_seconds", Help: "Handler latency.",
			Buckets: DurationBuckets,
		}, lbl),
		bytesIn: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hatrpc", Subsystem: "server", Name: "bytes_in_total", Help: "Request bytes read.",
		}, []string{"transport"}),
		bytesOut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hatrpc", Subsystem: "server", Name: "bytes_out_total", Help: "Reply bytes written.",
		}, []string{"transport"}),
		conns: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "hatrpc", Subsystem: "server", Name: "connections", Help: "Open connections.",
		}),
		lanes: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "hatrpc", Subsystem: "server", Name: "lanes", Help: "Open rdma/shm lanes (each also counts as a connection).",
		}),
		flockPeers: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "hatrpc", Subsystem: "server", Name: "flock_peers",
			Help: "Client processes attached through FLOCK (qp_sharing); each holds QPs, rings and registered memory of the server until it leaves.",
		}),
		laneReplies: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hatrpc", Subsystem: "server", Name: "lane_replies_total",
			Help: "Replies sent on rdma/shm lanes, by the engine protocol the server side planned for their size; flock: sent through FLOCK (qp_sharing).",
		}, []string{"service", "function", "protocol"}),
		engineSent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hatrpc", Subsystem: "server", Name: "engine_messages_total",
			Help: "Messages the dedicated lanes' engine endpoints sent, by the protocol they actually went by: hybrid as eager or write_rndv, a message too large for its protocol's buffer as write_rndv, an RFP reply left for fetching as rfp.",
		}, []string{"service", "function", "protocol"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hatrpc", Subsystem: "server", Name: "rejected_total", Help: "Connections or calls turned away.",
		}, []string{"reason"}),
	}
	m.closedBy = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "hatrpc", Subsystem: "server", Name: "connections_closed_total",
		Help: "Connections closed, by reason: client_closed, bad_input, read_error, write_error, shutdown, handshake_timeout, idle_timeout, slow_read, lane_closed.",
	}, []string{"reason"})
	for w := whyClient; w < numWhy; w++ {
		m.closed[w] = m.closedBy.WithLabelValues(whyNames[w])
	}
	reg.MustRegister(m.errors, m.conns, m.lanes, m.flockPeers, m.rejected, m.closedBy)
	reg.MustRegister(m.laneFamilies(func() *laneSnap {
		s := snap()
		m.addCalls(s)
		return s
	})...)
	// The adaptive poller is process-wide (pkg/fastpath): its
	// decisions so far and the lanes waiting in C now.
	for d := 0; d < fastpath.NumDecisions; d++ {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "hatrpc", Subsystem: "rdma", Name: "polling_decisions_total",
			Help:        "Adaptive polling decisions (every 10 ms while adaptive lanes exist): spin, short_spin or block.",
			ConstLabels: prometheus.Labels{"decision": fastpath.DecisionName(d)},
		}, func() float64 { return float64(fastpath.Polling().Decisions[d]) }))
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "hatrpc", Subsystem: "rdma", Name: "lanes_waiting",
		Help: "Lanes of this process waiting in C for a message (the adaptive poller's input).",
	}, func() float64 { return float64(fastpath.Polling().Waiting) }))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "hatrpc", Subsystem: "rdma", Name: "polling_load",
		Help: "The process's CPU share (0-1 of all cores) the adaptive poller last decided by, its lanes' own polling left out.",
	}, func() float64 { return fastpath.Polling().Load }))
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: "hatrpc", Subsystem: "rdma", Name: "lanes_polled_seconds_total",
		Help: "Time the lanes of this process spent polling in their waits (spinning, not asleep): the CPU their spin took.",
	}, func() float64 { return fastpath.Polling().Polled.Seconds() }))
	// The series of the transports every server serves exist from the
	// start, at zero; the io shards add to them (callmeter.go).
	for _, tr := range []uint8{trTCP, trThrift} {
		m.bytesIn.WithLabelValues(transportNames[tr])
		m.bytesOut.WithLabelValues(transportNames[tr])
	}
	return m
}

// DurationBuckets are the bounds (seconds) of the call duration
// histograms, server and client (pkg/client/clientmetrics): 5 µs, ×2.5
// each, to 29 s, so a call held by a slow disk, a long deadline or the
// default 30 s write timeout still lands in a bucket of its own.
var DurationBuckets = prometheus.ExponentialBuckets(5e-6, 2.5, numDurationBuckets)

const numDurationBuckets = 18

// methodStats are the metric children of one method on one transport,
// resolved once at Register so the hot path does no label lookups (an
// outcome other than ok is looked up when it happens). The calls execute
// ends are counted in cells, not in the children (callmeter.go); the
// children make the series exist from registration, at zero, as before.
type methodStats struct {
	key   cellKey // the method and transport the cells count for; m nil: none
	n     int     // shards
	cells atomic.Pointer[[]callCell]

	calls              prometheus.Counter
	errors, handled    *prometheus.CounterVec // curried: outcome only
	ok                 prometheus.Counter
	reqBytes, repBytes prometheus.Counter
	inflight           prometheus.Gauge
	latency            prometheus.Observer
}

func (m *metrics) forMethod(svc, fn, transport string) *methodStats {
	return &methodStats{
		n:        m.shards,
		calls:    m.calls.WithLabelValues(svc, fn, transport),
		reqBytes: m.reqBytes.WithLabelValues(svc, fn, transport),
		repBytes: m.repBytes.WithLabelValues(svc, fn, transport),
		errors:   m.errors.MustCurryWith(prometheus.Labels{"service": svc, "function": fn, "transport": transport}),
		handled:  m.handled.MustCurryWith(prometheus.Labels{"service": svc, "function": fn, "transport": transport}),
		inflight: m.inflight.WithLabelValues(svc, fn, transport),
		latency:  m.latency.WithLabelValues(svc, fn, transport),
		ok:       m.handled.WithLabelValues(svc, fn, transport, proto.OutcomeOK),
	}
}

// outcome counts how a call ended.
func (st *methodStats) outcome(o string) {
	if o == proto.OutcomeOK {
		st.ok.Inc()
		return
	}
	st.handled.WithLabelValues(o).Inc()
	st.errors.WithLabelValues(o).Inc()
}
