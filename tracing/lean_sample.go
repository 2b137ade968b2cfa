package tracing

import (
	"encoding/binary"

	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// leanSampler decides like the SDK sampler newSampler builds for the same
// Config (TestLeanSamplerMatchesSDK compares them): the lean path needs the
// decision from a span context, without the context.Context and parameter
// struct the SDK's Sampler interface takes.
type leanSampler struct {
	parentBased bool
	// root decides for a span without a valid parent: always (bound
	// max), never (bound 0), or by trace id below bound.
	always, never bool
	bound         uint64
}

func newLeanSampler(rc Config) leanSampler {
	var s leanSampler
	ratio := func(r float64) {
		switch {
		case r >= 1:
			s.always = true
		case r <= 0:
			s.never = true
		default:
			s.bound = uint64(r * (1 << 63))
		}
	}
	switch rc.Sampler {
	case SamplerAlwaysOn:
		s.always = true
	case SamplerAlwaysOff:
		s.never = true
	case SamplerTraceIDRatio:
		ratio(rc.SampleRatio)
	case SamplerParentBasedAlwaysOff:
		s.parentBased, s.never = true, true
	case SamplerParentBasedTraceIDRatio:
		s.parentBased = true
		ratio(rc.SampleRatio)
	default:
		s.parentBased, s.always = true, true
	}
	return s
}

// sample reports whether a span of trace tid under parent is recorded.
// Parent-based samplers follow a valid parent's sampled flag, remote or
// local alike, as the SDK's defaults do.
func (s leanSampler) sample(parent trace.SpanContext, tid trace.TraceID) bool {
	if s.parentBased && parent.IsValid() {
		return parent.IsSampled()
	}
	switch {
	case s.always:
		return true
	case s.never:
		return false
	}
	return binary.BigEndian.Uint64(tid[8:16])>>1 < s.bound
}

// Keys of the typed attributes of a lean span.
var (
	systemKey     = semconv.MessagingSystemKey
	opTypeKey     = semconv.MessagingOperationTypeKey
	opNameKey     = semconv.MessagingOperationNameKey
	destKey       = semconv.MessagingDestinationNameKey
	msgIDKey      = semconv.MessagingMessageIDKey
	convIDKey     = semconv.MessagingMessageConversationIDKey
	bodySizeKey   = semconv.MessagingMessageBodySizeKey
	serverAddrKey = semconv.ServerAddressKey
	serverPortKey = semconv.ServerPortKey
	errorTypeKey  = semconv.ErrorTypeKey
)
