// Package otelrpc holds what the client (pkg/tracing) and server
// (pkg/tracing/tracingserver) interceptors share: their options, the
// header carrier, the span attributes and how a failure is recorded. It
// imports neither pkg/client nor pkg/server, so a client that traces links
// no server code.
package otelrpc

import (
	"errors"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/proto"
)

// ScopeName is the instrumentation scope of the spans.
const ScopeName = "github.com/hatrpc/hatrpc/pkg/tracing"

// Option configures an interceptor.
type Option func(*Config)

// Config is what the options set.
type Config struct {
	TP   trace.TracerProvider
	Prop propagation.TextMapPropagator
}

// NewConfig applies opts over the defaults: the global tracer provider,
// W3C trace context and baggage.
func NewConfig(opts []Option) *Config {
	c := &Config{}
	for _, o := range opts {
		o(c)
	}
	if c.TP == nil {
		c.TP = otel.GetTracerProvider()
	}
	if c.Prop == nil {
		c.Prop = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	}
	return c
}

// Carrier adapts metadata.MD to the propagators.
type Carrier metadata.MD

func (c Carrier) Get(k string) string { return c[k] }
func (c Carrier) Set(k, v string)     { c[k] = v }
func (c Carrier) Keys() []string {
	ks := make([]string, 0, len(c))
	for k := range c {
		ks = append(ks, k)
	}
	return ks
}

// Attribute keys, after OpenTelemetry's RPC semantic conventions.
const (
	AttrSystem    = attribute.Key("rpc.system")
	AttrService   = attribute.Key("rpc.service")
	AttrMethod    = attribute.Key("rpc.method")
	AttrTransport = attribute.Key("hatrpc.transport")
	AttrRequestID = attribute.Key("hatrpc.request_id")
	AttrExcType   = attribute.Key("thrift.exception_type")
	// A stream's: its mode and the messages each way (recorded at its end).
	AttrStreamMode = attribute.Key("hatrpc.stream.mode")
	AttrSent       = attribute.Key("hatrpc.stream.messages_sent")
	AttrReceived   = attribute.Key("hatrpc.stream.messages_received")
)

// SpanName is "service/method", or the method alone without a service.
func SpanName(service, method string) string {
	if service == "" {
		return method
	}
	return service + "/" + method
}

// Record marks a failed call's span: an application exception by its
// type, anything else by its text.
func Record(span trace.Span, err error) {
	if err == nil {
		return
	}
	var ae *proto.ApplicationException
	if errors.As(err, &ae) {
		span.SetAttributes(AttrExcType.Int64(int64(ae.Type)))
	}
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
}
