package tracing

import (
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// decodeResourceSpans parses a ResourceSpans body with the official OTLP
// types and turns its spans back into SDK spans, the inverse of what the
// SDK's OTLP exporter does. It is how WithExporter and NewSyncTracer see
// lean spans: through their real encoding.
func decodeResourceSpans(body []byte) ([]sdktrace.ReadOnlySpan, error) {
	var rs tracepb.ResourceSpans
	if err := proto.Unmarshal(body, &rs); err != nil {
		return nil, err
	}
	stubs, err := stubsFromOTLP(&rs)
	if err != nil {
		return nil, err
	}
	return stubs.Snapshots(), nil
}

// stubsFromOTLP converts decoded OTLP spans to span stubs.
func stubsFromOTLP(rs *tracepb.ResourceSpans) (tracetest.SpanStubs, error) {
	res := resource.NewWithAttributes(rs.GetSchemaUrl(), kvsFromOTLP(rs.GetResource().GetAttributes())...)
	var out tracetest.SpanStubs
	for _, ss := range rs.GetScopeSpans() {
		scope := instrumentation.Scope{
			Name:      ss.GetScope().GetName(),
			Version:   ss.GetScope().GetVersion(),
			SchemaURL: ss.GetSchemaUrl(),
		}
		for _, s := range ss.GetSpans() {
			stub, err := stubFromOTLP(s)
			if err != nil {
				return nil, err
			}
			stub.Resource = res
			stub.InstrumentationScope = scope
			out = append(out, stub)
		}
	}
	return out, nil
}

func stubFromOTLP(s *tracepb.Span) (tracetest.SpanStub, error) {
	var stub tracetest.SpanStub
	sc, err := spanContextFromOTLP(s.GetTraceId(), s.GetSpanId(), s.GetTraceState(), s.GetFlags(), false)
	if err != nil {
		return stub, err
	}
	stub.SpanContext = sc
	if p := s.GetParentSpanId(); len(p) > 0 {
		stub.Parent, err = spanContextFromOTLP(s.GetTraceId(), p, "", 0, s.GetFlags()&flagIsRemote != 0)
		if err != nil {
			return stub, err
		}
	}
	stub.Name = s.GetName()
	stub.SpanKind = trace.SpanKind(s.GetKind())
	stub.StartTime = time.Unix(0, int64(s.GetStartTimeUnixNano()))
	stub.EndTime = time.Unix(0, int64(s.GetEndTimeUnixNano()))
	stub.Attributes = kvsFromOTLP(s.GetAttributes())
	for _, e := range s.GetEvents() {
		stub.Events = append(stub.Events, sdktrace.Event{
			Name:       e.GetName(),
			Time:       time.Unix(0, int64(e.GetTimeUnixNano())),
			Attributes: kvsFromOTLP(e.GetAttributes()),
		})
	}
	for _, l := range s.GetLinks() {
		lsc, err := spanContextFromOTLP(l.GetTraceId(), l.GetSpanId(), l.GetTraceState(), l.GetFlags(), l.GetFlags()&flagIsRemote != 0)
		if err != nil {
			return stub, err
		}
		stub.Links = append(stub.Links, sdktrace.Link{SpanContext: lsc, Attributes: kvsFromOTLP(l.GetAttributes())})
	}
	switch s.GetStatus().GetCode() {
	case tracepb.Status_STATUS_CODE_ERROR:
		stub.Status = sdktrace.Status{Code: codes.Error, Description: s.GetStatus().GetMessage()}
	case tracepb.Status_STATUS_CODE_OK:
		stub.Status = sdktrace.Status{Code: codes.Ok}
	}
	return stub, nil
}

func spanContextFromOTLP(tid, sid []byte, ts string, flags uint32, remote bool) (trace.SpanContext, error) {
	var cfg trace.SpanContextConfig
	if len(tid) != len(cfg.TraceID) || len(sid) != len(cfg.SpanID) {
		return trace.SpanContext{}, fmt.Errorf("%w: ids of %d and %d bytes", ErrCreation, len(tid), len(sid))
	}
	copy(cfg.TraceID[:], tid)
	copy(cfg.SpanID[:], sid)
	state, err := trace.ParseTraceState(ts)
	if err != nil {
		return trace.SpanContext{}, err
	}
	cfg.TraceState = state
	cfg.TraceFlags = trace.TraceFlags(flags & 0xff)
	cfg.Remote = remote
	return trace.NewSpanContext(cfg), nil
}

func kvsFromOTLP(kvs []*commonpb.KeyValue) []attribute.KeyValue {
	if len(kvs) == 0 {
		return nil
	}
	out := make([]attribute.KeyValue, 0, len(kvs))
	for _, kv := range kvs {
		out = append(out, attribute.KeyValue{Key: attribute.Key(kv.GetKey()), Value: valueFromOTLP(kv.GetValue())})
	}
	return out
}

// valueFromOTLP converts the AnyValue kinds attribute.Value can hold;
// arrays take their type from their first element, as the SDK writes
// only homogeneous ones.
func valueFromOTLP(v *commonpb.AnyValue) attribute.Value {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return attribute.StringValue(x.StringValue)
	case *commonpb.AnyValue_BoolValue:
		return attribute.BoolValue(x.BoolValue)
	case *commonpb.AnyValue_IntValue:
		return attribute.Int64Value(x.IntValue)
	case *commonpb.AnyValue_DoubleValue:
		return attribute.Float64Value(x.DoubleValue)
	case *commonpb.AnyValue_ArrayValue:
		vals := x.ArrayValue.GetValues()
		if len(vals) == 0 {
			return attribute.StringSliceValue(nil)
		}
		switch vals[0].GetValue().(type) {
		case *commonpb.AnyValue_BoolValue:
			s := make([]bool, len(vals))
			for i, e := range vals {
				s[i] = e.GetBoolValue()
			}
			return attribute.BoolSliceValue(s)
		case *commonpb.AnyValue_IntValue:
			s := make([]int64, len(vals))
			for i, e := range vals {
				s[i] = e.GetIntValue()
			}
			return attribute.Int64SliceValue(s)
		case *commonpb.AnyValue_DoubleValue:
			s := make([]float64, len(vals))
			for i, e := range vals {
				s[i] = e.GetDoubleValue()
			}
			return attribute.Float64SliceValue(s)
		default:
			s := make([]string, len(vals))
			for i, e := range vals {
				s[i] = e.GetStringValue()
			}
			return attribute.StringSliceValue(s)
		}
	}
	return attribute.StringValue("")
}
