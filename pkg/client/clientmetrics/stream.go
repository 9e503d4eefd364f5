package clientmetrics

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/proto"
)

// streamSeries are the stream series:
//
//	hatrpc_client_streams_opened_total{service,function}          streams opened
//	hatrpc_client_streams_open{service,function}                  streams not yet ended
//	hatrpc_client_streams_handled_total{service,function,outcome} streams ended, by outcome
//	hatrpc_client_stream_messages_total{service,function,direction} messages, out (sent) or in
//	hatrpc_client_stream_message_bytes_total{service,function,direction} their bytes (frame payloads)
type streamSeries struct {
	opened, handled, msgs, bytes *prometheus.CounterVec
	open                         *prometheus.GaugeVec
}

func newStreamSeries() streamSeries {
	lbl := []string{"service", "function"}
	return streamSeries{
		opened: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hatrpc", Subsystem: "client", Name: "streams_opened_total", Help: "Streams opened.",
		}, lbl),
		open: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "hatrpc", Subsystem: "client", Name: "streams_open", Help: "Streams opened and not yet ended.",
		}, lbl),
		handled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hatrpc", Subsystem: "client", Name: "streams_handled_total",
			Help: "Streams ended (RecvMsg returned an error, or the context ended), by outcome: ok (a clean end), or an errors_total outcome.",
		}, []string{"service", "function", "outcome"}),
		msgs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hatrpc", Subsystem: "client", Name: "stream_messages_total",
			Help: "Stream messages, by direction: out (sent) or in (received).",
		}, []string{"service", "function", "direction"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hatrpc", Subsystem: "client", Name: "stream_message_bytes_total",
			Help: "Stream message bytes (frame payloads, as the server's hatrpc_server_stream_message_bytes_total counts them), by direction: out (sent) or in (received).",
		}, []string{"service", "function", "direction"}),
	}
}

func (s *streamSeries) describe(ch chan<- *prometheus.Desc) {
	s.opened.Describe(ch)
	s.open.Describe(ch)
	s.handled.Describe(ch)
	s.msgs.Describe(ch)
	s.bytes.Describe(ch)
}

func (s *streamSeries) collect(ch chan<- prometheus.Metric) {
	s.opened.Collect(ch)
	s.open.Collect(ch)
	s.handled.Collect(ch)
	s.msgs.Collect(ch)
	s.bytes.Collect(ch)
}

// StreamInterceptor returns the client stream interceptor that counts
// streams, their messages and their bytes: give it to
// client.WithStreamInterceptors.
func (m *Metrics) StreamInterceptor() client.StreamInterceptor {
	return func(ctx context.Context, meth *client.Method, final proto.Struct, next client.StreamOpener) (client.Stream, error) {
		svc, fn := meth.Service, meth.Name
		s := &m.streams
		s.opened.WithLabelValues(svc, fn).Inc()
		// Sizes are known only inside the stream: it reports them to the
		// meter the context carries (client.WithStreamMeter).
		b := &byteMeter{out: s.bytes.WithLabelValues(svc, fn, "out"), in: s.bytes.WithLabelValues(svc, fn, "in")}
		st, err := next(client.WithStreamMeter(ctx, b), meth, final)
		if err != nil {
			o := Outcome(nil, err)
			s.handled.WithLabelValues(svc, fn, o).Inc()
			return nil, err
		}
		open := s.open.WithLabelValues(svc, fn)
		open.Inc()
		ms := &meteredStream{Stream: st, final: final, open: open,
			handled: s.handled.MustCurryWith(prometheus.Labels{"service": svc, "function": fn}),
			out:     s.msgs.WithLabelValues(svc, fn, "out"), in: s.msgs.WithLabelValues(svc, fn, "in")}
		ms.stop = context.AfterFunc(st.Context(), func() { ms.end(context.Cause(st.Context())) })
		return ms, nil
	}
}

// byteMeter adds a stream's message bytes to its function's counters.
type byteMeter struct{ out, in prometheus.Counter }

func (b *byteMeter) SentMsg(n int64)     { b.out.Add(float64(n)) }
func (b *byteMeter) ReceivedMsg(n int64) { b.in.Add(float64(n)) }

type meteredStream struct {
	client.Stream
	final   proto.Struct
	open    prometheus.Gauge
	handled *prometheus.CounterVec
	out, in prometheus.Counter
	stop    func() bool
	once    sync.Once
}

func (s *meteredStream) SendMsg(m proto.Struct) error {
	err := s.Stream.SendMsg(m)
	if err == nil {
		s.out.Inc()
	}
	return err
}

func (s *meteredStream) RecvMsg(m proto.Struct) error {
	err := s.Stream.RecvMsg(m)
	if err == nil {
		s.in.Inc()
		return nil
	}
	s.stop()
	s.end(err)
	return err
}

func (s *meteredStream) end(err error) {
	s.once.Do(func() {
		s.open.Dec()
		if errors.Is(err, io.EOF) {
			err = nil // a clean end: the final struct says the rest
		}
		s.handled.WithLabelValues(Outcome(s.final, err)).Inc()
	})
}
