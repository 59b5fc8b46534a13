package openai

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

const tracerName = "github.com/llmgw/llmgw"

// StartSpan starts a child of the request's span when Caddy's tracing
// directive records one, so each llm stage shows in the trace; otherwise
// it does nothing and costs nothing. The caller ends the span.
func StartSpan(ctx context.Context, name string) (context.Context, trace.Span, bool) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, parent, false
	}
	ctx, span := parent.TracerProvider().Tracer(tracerName).Start(ctx, name)
	return ctx, span, true
}

// InjectTrace adds the W3C trace context of ctx's span to an outgoing
// request, so an engine that traces joins the same trace.
func InjectTrace(ctx context.Context, h http.Header) {
	if trace.SpanContextFromContext(ctx).IsValid() {
		propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(h))
	}
}
