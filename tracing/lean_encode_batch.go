package tracing

import (
	"encoding/binary"

	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	"google.golang.org/protobuf/encoding/protowire"
)

// leanEncoder writes batches of lean spans as the body of one OTLP
// ResourceSpans message, as the SDK's OTLP exporter would (same fields,
// same flags), with the resource and scope encoded once. It is used by
// one goroutine at a time.
type leanEncoder struct {
	resource  []byte // Resource message body
	resSchema string
	scope     []byte // InstrumentationScope message body
	scopeURL  string

	// head is the room a batch leaves in front of its spans: the request's
	// framing, the resource field and the ScopeSpans field's tag and
	// length, which are known only once the spans are written.
	head  int
	heads leanHeadCache
	last  leanBatch // encode's batch, whose buffer it reuses
}

// leanBatch is one batch of encoded spans. Spans are appended to buf as
// they end (leanEncoder.add); seal then fills in the fields in front of
// them, right-aligned in the room left for them, so a batch is neither
// sized twice nor copied.
type leanBatch struct {
	buf   []byte
	n     int // spans in buf
	start int // where the ResourceSpans body begins in buf, once sealed
}

func newLeanEncoder(res *resource.Resource, scope instrumentation.Scope) leanEncoder {
	var e leanEncoder
	if res != nil {
		for _, kv := range res.Attributes() {
			e.resource = appendKV(e.resource, fResAttributes, kv)
		}
		e.resSchema = res.SchemaURL()
	}
	e.scope = appendString(e.scope, fScopeName, scope.Name)
	e.scope = appendString(e.scope, fScopeVersion, scope.Version)
	for _, kv := range scope.Attributes.ToSlice() {
		e.scope = appendKV(e.scope, fScopeAttrs, kv)
	}
	e.scopeURL = scope.SchemaURL
	e.head = leanFrameRoom + protowire.SizeTag(fRSResource) + protowire.SizeBytes(len(e.resource)) +
		protowire.SizeTag(fRSScopeSpans) + binary.MaxVarintLen64
	return e
}

// begin starts an empty batch in buf's array (nil: a new one).
func (e *leanEncoder) begin(buf []byte) leanBatch {
	b := buf[:0]
	if cap(b) < e.head {
		b = make([]byte, 0, e.head+4096)
	}
	b = b[:e.head]
	b = appendTag(b, fSSScope, protowire.BytesType)
	b = protowire.AppendBytes(b, e.scope)
	return leanBatch{buf: b}
}

// add appends the ended span s to batch b.
func (e *leanEncoder) add(b *leanBatch, s *leanSpan) {
	b.buf = appendSpanField(b.buf, s, &e.heads)
	b.n++
}

// seal writes the fields after and in front of b's spans; b takes no
// more spans.
func (e *leanEncoder) seal(b *leanBatch) {
	buf := appendString(b.buf, fSSSchemaURL, e.scopeURL)
	ssLen := len(buf) - e.head
	buf = appendString(buf, fRSSchemaURL, e.resSchema)

	var pre [32]byte // the ScopeSpans tag and length
	p := appendTag(pre[:0], fRSScopeSpans, protowire.BytesType)
	p = appendVarint(p, uint64(ssLen))
	at := e.head - len(p)
	copy(buf[at:], p)
	at -= protowire.SizeTag(fRSResource) + protowire.SizeBytes(len(e.resource))
	r := appendTag(buf[at:at], fRSResource, protowire.BytesType)
	protowire.AppendBytes(r, e.resource)
	b.buf, b.start = buf, at
}

// encode returns the ResourceSpans body for spans in one batch; it is
// valid until the next call.
func (e *leanEncoder) encode(spans []*leanSpan) []byte {
	b := e.begin(e.last.buf)
	for _, s := range spans {
		e.add(&b, s)
	}
	e.seal(&b)
	e.last = b
	return b.body()
}

// leanFrameRoom is the room a batch leaves in front of its spans for the
// request's framing: a tag and the longest length.
const leanFrameRoom = 1 + binary.MaxVarintLen64

// body returns the sealed batch as a ResourceSpans message body.
func (b *leanBatch) body() []byte { return b.buf[b.start:] }

// request returns the sealed batch as a whole ExportTraceServiceRequest
// (its resource_spans field, 1), framed in the room left in front of it.
// It shares b's buffer, so a sink must not return while anything still
// reads it (httpSink: sentBody).
func (b *leanBatch) request() []byte {
	n := len(b.buf) - b.start
	start := b.start - 1 - protowire.SizeVarint(uint64(n))
	f := appendTag(b.buf[start:start], 1, protowire.BytesType)
	appendVarint(f, uint64(n))
	return b.buf[start:]
}

// request returns encode's last batch as a whole ExportTraceServiceRequest;
// valid until the next encode.
func (e *leanEncoder) request() []byte { return e.last.request() }
