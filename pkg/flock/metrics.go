package flock

import "github.com/prometheus/client_golang/prometheus"

// Metrics are FLOCK's Prometheus metrics on a private registry (expose it
// with promhttp.HandlerFor(m.Registry, ...)). One Metrics may be shared by
// a server and any number of connections.
type Metrics struct {
	Registry        *prometheus.Registry
	degree          *prometheus.HistogramVec
	creditsGranted  prometheus.Counter
	creditsDeclined prometheus.Counter
	activeQPs       *prometheus.GaugeVec
	migrations      prometheus.Counter
	messages        *prometheus.CounterVec
	requests        *prometheus.CounterVec
	headReads       prometheus.Counter
	sleeps          prometheus.Counter
	wakeups         prometheus.Counter
	peers           prometheus.Gauge
	qps             prometheus.Gauge
}

// NewMetrics creates the metrics on a fresh registry.
func NewMetrics() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		degree: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "flock_coalescing_degree", Help: "Requests or responses per posted message.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64},
		}, []string{"side"}),
		creditsGranted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flock_credits_granted_total", Help: "Credit renewals the QP scheduler granted."}),
		creditsDeclined: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flock_credits_declined_total", Help: "Credit renewals declined (QP deactivated)."}),
		activeQPs: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flock_active_qps", Help: "Active QPs per sender."}, []string{"peer"}),
		migrations: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flock_migrations_total", Help: "Callers moved to another QP by the goroutine scheduler."}),
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flock_messages_total", Help: "Coalesced messages posted."}, []string{"side"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flock_entries_total", Help: "Requests or responses carried in messages."}, []string{"side"}),
		headReads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flock_head_reads_total", Help: "RDMA READs of a peer ring head (piggybacked head was stale)."}),
		sleeps: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flock_dispatcher_sleeps_total", Help: "Dispatcher sleeps on the doorbell: a client's (calls outstanding, rings empty) or an idle server's."}),
		wakeups: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flock_dispatcher_wakeups_total", Help: "Doorbells rung to wake a sleeping dispatcher (a client's by the server, the server's by a client)."}),
		peers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "flock_peers", Help: "Senders connected to the server (released when they leave or die)."}),
		qps: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "flock_server_qps", Help: "QPs the server holds for its senders."}),
	}
	m.Registry.MustRegister(m.degree, m.creditsGranted, m.creditsDeclined, m.activeQPs, m.migrations,
		m.messages, m.requests, m.headReads, m.sleeps, m.wakeups, m.peers, m.qps)
	return m
}

// sideMetrics are one side's labelled series, looked up once: a label
// lookup per message hashes the label values every time.
type sideMetrics struct {
	degree             prometheus.Observer
	messages, requests prometheus.Counter
}

func (m *Metrics) side(name string) sideMetrics {
	return sideMetrics{degree: m.degree.WithLabelValues(name), messages: m.messages.WithLabelValues(name),
		requests: m.requests.WithLabelValues(name)}
}
