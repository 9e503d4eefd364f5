// Package tracing provides OpenTelemetry interceptors for HatRPC clients
// and servers. The client interceptor starts a client span per call and
// injects its context into the call's outgoing headers (W3C traceparent
// and tracestate by default, through the configured propagator); the
// server interceptor extracts it from the incoming headers and starts the
// server span as its child. Headers travel in THeader info headers and in
// the HatRPC frame's header block (pkg/metadata), on TCP, lanes and FLOCK;
// calls on plain framed/unframed Thrift connections carry none, so their
// server spans start new traces. Kept out of pkg/client and pkg/server so the core does not
// depend on OpenTelemetry.
package tracing

import (
	"context"
	"errors"
	"maps"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
)

// ScopeName is the instrumentation scope of the spans.
const ScopeName = "github.com/hatrpc/hatrpc/pkg/tracing"

// Option configures an interceptor.
type Option func(*config)

type config struct {
	tp   trace.TracerProvider
	prop propagation.TextMapPropagator
}

// WithTracerProvider uses tp instead of otel.GetTracerProvider().
func WithTracerProvider(tp trace.TracerProvider) Option { return func(c *config) { c.tp = tp } }

// WithPropagator uses p instead of W3C trace context and baggage.
func WithPropagator(p propagation.TextMapPropagator) Option {
	return func(c *config) { c.prop = p }
}

func newConfig(opts []Option) *config {
	c := &config{}
	for _, o := range opts {
		o(c)
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	if c.prop == nil {
		c.prop = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	}
	return c
}

// carrier adapts metadata.MD to the propagators.
type carrier metadata.MD

func (c carrier) Get(k string) string { return c[k] }
func (c carrier) Set(k, v string)     { c[k] = v }
func (c carrier) Keys() []string {
	ks := make([]string, 0, len(c))
	for k := range c {
		ks = append(ks, k)
	}
	return ks
}

// Attribute keys, after OpenTelemetry's RPC semantic conventions.
const (
	attrSystem    = attribute.Key("rpc.system")
	attrService   = attribute.Key("rpc.service")
	attrMethod    = attribute.Key("rpc.method")
	attrTransport = attribute.Key("hatrpc.transport")
	attrRequestID = attribute.Key("hatrpc.request_id")
	attrExcType   = attribute.Key("thrift.exception_type")
)

func spanName(service, method string) string {
	if service == "" {
		return method
	}
	return service + "/" + method
}

// Client returns a client interceptor; give it first to
// client.WithInterceptors so its span covers the others.
func Client(opts ...Option) client.Interceptor {
	cfg := newConfig(opts)
	tr := cfg.tp.Tracer(ScopeName)
	return func(ctx context.Context, m *client.Method, args, result proto.Struct, next client.Invoker) error {
		ctx, span := tr.Start(ctx, spanName(m.Service, m.Name),
			trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(attrSystem.String("apache_thrift"), attrService.String(m.Service), attrMethod.String(m.Name)))
		defer span.End()
		old, _ := metadata.FromOutgoingContext(ctx)
		md := make(metadata.MD, len(old)+2)
		maps.Copy(md, old)
		cfg.prop.Inject(ctx, carrier(md))
		if md[metadata.RequestIDKey] == "" {
			// Set here rather than by the Conn so the client span
			// records the id the server logs.
			md[metadata.RequestIDKey] = metadata.NewRequestID()
		}
		span.SetAttributes(attrRequestID.String(md[metadata.RequestIDKey]))
		err := next(metadata.NewOutgoingContext(ctx, md), m, args, result)
		record(span, err)
		return err
	}
}

// Server returns a server interceptor; give it first to
// server.WithInterceptors so its span covers the others.
func Server(opts ...Option) server.Interceptor {
	cfg := newConfig(opts)
	tr := cfg.tp.Tracer(ScopeName)
	return func(ctx context.Context, info *server.CallInfo, args proto.Struct, next server.Handler) (proto.Struct, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		ctx = cfg.prop.Extract(ctx, carrier(md))
		attrs := []attribute.KeyValue{attrSystem.String("apache_thrift"), attrService.String(info.Service),
			attrMethod.String(info.Method.Name), attrTransport.String(info.Transport)}
		if id := md[metadata.RequestIDKey]; id != "" {
			attrs = append(attrs, attrRequestID.String(id))
		}
		ctx, span := tr.Start(ctx, spanName(info.Service, info.Method.Name),
			trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
		defer span.End()
		res, err := next(ctx, args)
		record(span, err)
		return res, err
	}
}

// record marks a failed call's span: an application exception by its
// type, anything else by its text.
func record(span trace.Span, err error) {
	if err == nil {
		return
	}
	var ae *proto.ApplicationException
	if errors.As(err, &ae) {
		span.SetAttributes(attrExcType.Int64(int64(ae.Type)))
	}
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
}
