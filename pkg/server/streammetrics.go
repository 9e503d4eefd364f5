package server

import "github.com/prometheus/client_golang/prometheus"

// streamMetrics count streams per function: opened, open now, and their
// messages and message bytes each way (in: from the client).
type streamMetrics struct {
	opened, msgs, bytes *prometheus.CounterVec
	open                *prometheus.GaugeVec
}

func newStreamMetrics(reg *prometheus.Registry) *streamMetrics {
	lbl := []string{"service", "function"}
	dir := []string{"service", "function", "direction"}
	m := &streamMetrics{
		opened: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hatrpc", Subsystem: "server", Name: "streams_opened_total",
			Help: "Streams opened per function, by route: lane (a shm/RDMA lane carried it) or tcp (the connection did: the plan has the function's streams on TCP, the client has no lanes, or all of its lanes were busy).",
		}, append(lbl, "route")),
		open: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "hatrpc", Subsystem: "server", Name: "streams_open", Help: "Streams whose handler runs now.",
		}, lbl),
		msgs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hatrpc", Subsystem: "server", Name: "stream_messages_total",
			Help: "Stream data messages per function, by direction: in (from the client) or out.",
		}, dir),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hatrpc", Subsystem: "server", Name: "stream_message_bytes_total",
			Help: "Stream data message bytes (frame payloads) per function, by direction: in or out.",
		}, dir),
	}
	reg.MustRegister(m.opened, m.open, m.msgs, m.bytes)
	return m
}

// streamStats are one function's stream metric children, looked up once
// per stream.
type streamStats struct {
	open              prometheus.Gauge
	inMsgs, inBytes   prometheus.Counter
	outMsgs, outBytes prometheus.Counter
}

// Routes of a stream, the values of streams_opened_total's route label.
const (
	routeLane = "lane"
	routeTCP  = "tcp"
)

func (m *streamMetrics) begin(svc, fn, route string) *streamStats {
	m.opened.WithLabelValues(svc, fn, route).Inc()
	st := &streamStats{
		open:     m.open.WithLabelValues(svc, fn),
		inMsgs:   m.msgs.WithLabelValues(svc, fn, "in"),
		inBytes:  m.bytes.WithLabelValues(svc, fn, "in"),
		outMsgs:  m.msgs.WithLabelValues(svc, fn, "out"),
		outBytes: m.bytes.WithLabelValues(svc, fn, "out"),
	}
	st.open.Inc()
	return st
}
