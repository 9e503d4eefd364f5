// Package clientmetrics counts a HatRPC client's calls in Prometheus: a
// client interceptor, in a package of its own so that pkg/client does not
// depend on Prometheus (a client-only binary need not link it).
//
//	m := clientmetrics.New(reg)
//	conn, err := client.Dial(ctx, addr, client.WithInterceptors(m.Interceptor()))
//
// One Metrics may serve any number of Conns (and the per-server Conns of a
// cluster.Client); its series are
//
//	hatrpc_client_calls_total{service,function}           calls started
//	hatrpc_client_handled_total{service,function,outcome} calls ended, by outcome
//	hatrpc_client_errors_total{service,function,outcome}  the same without ok
//	hatrpc_client_in_flight{service,function}             calls waiting now
//	hatrpc_client_call_duration_seconds{service,function} call latency
//	hatrpc_client_retries_total{service,function,kind}    retries (retry), hedges (hedge) and
//	                                                       retries the budget refused (throttled)
//
// and, through StreamInterceptor (client.WithStreamInterceptors), the
// streams' series (stream.go): opened, open, handled by outcome, and
// messages each way.
//
// The retries series counts what a Conn built with
// client.WithRetryObserver(m.ObserveRetry) reports: retries run under the
// interceptors, which see one call however many attempts it took.
//
// An outcome is ok, the declared exception's type name, a status
// error's code (pkg/status: not_found, unavailable, user_code, ...),
// overload (the server's rate limit, proto.ErrOverloaded), deadline, canceled,
// transport_error (the connection failed or closed: client.ErrConnClosed),
// the Thrift application exception's kind (internal_error, unknown_method,
// ...), or client_error for anything else the client refused.
package clientmetrics

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/proto"
)

// DurationBuckets are the bounds (seconds) of the latency histogram, the
// same as the server's (server.DurationBuckets): 5 µs ×2.5 each to 29 s.
var DurationBuckets = prometheus.ExponentialBuckets(5e-6, 2.5, 18)

// OutcomeClientError labels an error the client itself returned that is
// neither a transport failure nor a Thrift exception.
const OutcomeClientError = "client_error"

// Metrics holds the client's series.
type Metrics struct {
	calls, handled, errors *prometheus.CounterVec
	inflight               *prometheus.GaugeVec
	latency                *prometheus.HistogramVec
	retries                *prometheus.CounterVec
	streams                streamSeries // stream.go
}

// New creates the series and registers them with reg (nil: not registered;
// the caller may register the Metrics itself, it is a prometheus.Collector).
// It panics if reg already holds them, as prometheus.MustRegister does.
func New(reg prometheus.Registerer) *Metrics {
	lbl := []string{"service", "function"}
	withOutcome := []string{"service", "function", "outcome"}
	m := &Metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hatrpc", Subsystem: "client", Name: "calls_total", Help: "Calls started.",
		}, lbl),
		handled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hatrpc", Subsystem: "client", Name: "handled_total", Help: "Calls ended, by outcome: ok or an errors_total outcome.",
		}, withOutcome),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hatrpc", Subsystem: "client", Name: "errors_total",
			Help: "Calls that did not end ok, by outcome: the declared exception's type name, overload, deadline, canceled, transport_error, the application exception's kind, client_error.",
		}, withOutcome),
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "hatrpc", Subsystem: "client", Name: "in_flight", Help: "Calls waiting for their reply now.",
		}, lbl),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "hatrpc", Subsystem: "client", Name: "call_duration_seconds", Help: "Call latency, from the interceptor to the reply.",
			Buckets: DurationBuckets,
		}, lbl),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hatrpc", Subsystem: "client", Name: "retries_total",
			Help: "Attempts after a call's first, by kind: retry (after a failure), hedge (a second copy of a slow call), throttled (refused by the retry budget).",
		}, []string{"service", "function", "kind"}),
		streams: newStreamSeries(),
	}
	if reg != nil {
		reg.MustRegister(m)
	}
	return m
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	m.calls.Describe(ch)
	m.handled.Describe(ch)
	m.errors.Describe(ch)
	m.inflight.Describe(ch)
	m.latency.Describe(ch)
	m.retries.Describe(ch)
	m.streams.describe(ch)
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.calls.Collect(ch)
	m.handled.Collect(ch)
	m.errors.Collect(ch)
	m.inflight.Collect(ch)
	m.latency.Collect(ch)
	m.retries.Collect(ch)
	m.streams.collect(ch)
}

// ObserveRetry counts a Conn's retry, hedge or throttled retry: give it
// to client.WithRetryObserver.
func (m *Metrics) ObserveRetry(ev client.RetryEvent) {
	m.retries.WithLabelValues(ev.Method.Service, ev.Method.Name, ev.Kind.String()).Inc()
}

// Interceptor returns the client interceptor that counts every call. Give
// it first to client.WithInterceptors so the time it measures includes
// the other interceptors.
func (m *Metrics) Interceptor() client.Interceptor {
	return func(ctx context.Context, meth *client.Method, args, result proto.Struct, next client.Invoker) error {
		svc, fn := meth.Service, meth.Name
		m.calls.WithLabelValues(svc, fn).Inc()
		in := m.inflight.WithLabelValues(svc, fn)
		in.Inc()
		start := time.Now()
		err := next(ctx, meth, args, result)
		m.latency.WithLabelValues(svc, fn).Observe(time.Since(start).Seconds())
		in.Dec()
		o := Outcome(result, err)
		m.handled.WithLabelValues(svc, fn, o).Inc()
		if o != proto.OutcomeOK {
			m.errors.WithLabelValues(svc, fn, o).Inc()
		}
		return err
	}
}

// Outcome labels how a call ended on the client side: proto.Outcome, with
// connection failures as transport_error and other client errors as
// client_error.
func Outcome(result proto.Struct, err error) string {
	if o := proto.Outcome(result, err); o != "" {
		return o
	}
	if errors.Is(err, client.ErrConnClosed) {
		return proto.OutcomeTransport
	}
	return OutcomeClientError
}
