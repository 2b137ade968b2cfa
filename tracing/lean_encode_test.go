package tracing

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
)

// captureClient is an otlptrace.Client that keeps what the SDK's OTLP
// exporter would send: the official transform of SDK spans into protos.
type captureClient struct {
	mu  sync.Mutex
	got []*tracepb.ResourceSpans
}

func (c *captureClient) Start(context.Context) error { return nil }
func (c *captureClient) Stop(context.Context) error  { return nil }
func (c *captureClient) UploadTraces(_ context.Context, rs []*tracepb.ResourceSpans) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, rs...)
	return nil
}

// sdkEncoding returns what the SDK's OTLP exporter makes of stubs.
func sdkEncoding(t testing.TB, stubs tracetest.SpanStubs) *tracepb.ResourceSpans {
	t.Helper()
	c := &captureClient{}
	exp, err := otlptrace.New(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.ExportSpans(context.Background(), stubs.Snapshots()); err != nil {
		t.Fatal(err)
	}
	if len(c.got) != 1 {
		t.Fatalf("SDK exporter sent %d ResourceSpans, want 1", len(c.got))
	}
	return c.got[0]
}

// stubOf describes a lean span as an SDK span with the same content, its
// attributes in the order the encoder writes them, and invalid UTF-8
// replaced as the encoder replaces it.
func stubOf(s *leanSpan, res *resource.Resource) tracetest.SpanStub {
	v := validString
	var a []attribute.KeyValue
	str := func(k attribute.Key, val string) {
		if val != "" {
			a = append(a, k.String(v(val)))
		}
	}
	num := func(k attribute.Key, bit uint8, val int64) {
		if s.has&bit != 0 {
			a = append(a, k.Int64(val))
		}
	}
	str(systemKey, s.system)
	str(opTypeKey, s.opType)
	str(opNameKey, s.opName)
	str(destKey, s.dest)
	if s.msgID == "" && s.msgIDNum != 0 { // a numeric id, formatted by the encoder
		str(msgIDKey, s.msgIDPrefix+strconv.FormatUint(s.msgIDNum, 10))
	} else {
		str(msgIDKey, s.msgID)
	}
	str(convIDKey, s.convID)
	num(bodySizeKey, hasBodySize, s.bodySize)
	str(serverAddrKey, s.serverAddr)
	num(serverPortKey, hasServerPort, s.serverPort)
	num(AttrAttempt, hasAttempt, s.attempt)
	num(AttrQueueWait, hasQueueWait, s.queueWait)
	str(AttrOutcome, s.outcome)
	str(errorTypeKey, s.errType)
	for _, kv := range s.extra {
		a = append(a, validKV(kv))
	}
	stub := tracetest.SpanStub{
		Name: spanName(v(s.name), v(s.nameDest)), SpanContext: s.sc, Parent: s.parent, SpanKind: s.kind,
		StartTime: time.Unix(0, s.start), EndTime: time.Unix(0, s.end), Attributes: a,
		Status:   sdktrace.Status{Code: s.status, Description: v(s.statusDesc)},
		Resource: res, InstrumentationScope: leanScope,
	}
	for i := range s.events {
		e := &s.events[i]
		ev := sdktrace.Event{Name: v(e.name), Time: e.time}
		e.attributes(func(kv attribute.KeyValue) { ev.Attributes = append(ev.Attributes, validKV(kv)) })
		stub.Events = append(stub.Events, ev)
	}
	switch {
	case s.linkParent:
		stub.Links = []sdktrace.Link{{SpanContext: s.parent}}
	case s.link != nil:
		stub.Links = []sdktrace.Link{{SpanContext: *s.link}}
	}
	return stub
}

// validKV replaces invalid UTF-8 in kv as the encoder does.
func validKV(kv attribute.KeyValue) attribute.KeyValue {
	kv.Key = attribute.Key(validString(string(kv.Key)))
	switch kv.Value.Type() {
	case attribute.STRING:
		kv.Value = attribute.StringValue(validString(kv.Value.AsString()))
	case attribute.STRINGSLICE:
		ss := kv.Value.AsStringSlice()
		for i := range ss {
			ss[i] = validString(ss[i])
		}
		kv.Value = attribute.StringSliceValue(ss)
	}
	return kv
}

// checkEncoding encodes spans with the lean encoder, decodes the bytes with
// the official OTLP types and compares them with the SDK exporter's
// protos for the same spans.
func checkEncoding(t testing.TB, spans []*leanSpan) {
	t.Helper()
	res := resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName("enc"),
		attribute.Int("n", 3), attribute.Bool("b", true), attribute.Float64("f", 0.5),
		attribute.StringSlice("ss", []string{"x", ""}), attribute.Int64Slice("is", []int64{-1, 2}))
	enc := newLeanEncoder(res, leanScope)
	var got tracepb.ResourceSpans
	if err := proto.Unmarshal(enc.encode(spans), &got); err != nil {
		t.Fatalf("lean encoding does not decode: %v", err)
	}
	var stubs tracetest.SpanStubs
	for _, s := range spans {
		stubs = append(stubs, stubOf(s, res))
	}
	want := sdkEncoding(t, stubs)
	if !proto.Equal(want, &got) {
		t.Fatalf("lean encoding differs from the SDK exporter's:\nSDK:  %s\nlean: %s",
			prototext.Format(want), prototext.Format(&got))
	}
}

// testSpan builds an ended lean span from fuzzable parts, through the same
// setters the Tracer uses.
func testSpan(r *rand.Rand, name, dest, id, key, val string, n int64, remote bool, status uint8) *leanSpan {
	lt := &leanTracer{system: "gearman"}
	var tid trace.TraceID
	var sid, psid trace.SpanID
	binary.BigEndian.PutUint64(tid[:8], r.Uint64()|1)
	binary.BigEndian.PutUint64(sid[:], r.Uint64()|1)
	binary.BigEndian.PutUint64(psid[:], r.Uint64()|1)
	ts, _ := trace.ParseTraceState("vendor=" + strings.Repeat("x", int(n&7)+1))
	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: psid, TraceFlags: trace.FlagsSampled, Remote: remote})
	s := &leanSpan{
		lt: lt, system: lt.system, name: name, nameDest: dest, kind: trace.SpanKind(1 + n&3),
		sc:     trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: ts}),
		parent: parent,
		start:  n & 0xffffffffff, end: 1e9 + n&0xffffff,
	}
	if n&8 != 0 {
		s.parent = trace.SpanContext{}
	}
	m := &Message{Operation: "JOB_ASSIGN", Destination: dest, ID: id, ConversationID: val,
		BodySize: int(n), ServerAddress: "h", ServerPort: int(n & 0xffff)}
	if n&128 != 0 { // the id as a prefix and a number (Message.IDNum)
		m.ID, m.IDPrefix, m.IDNum = "", id, uint64(n)|1
	}
	s.setMessage("process", m, n&16 != 0)
	s.setDelivery(&Message{Attempt: int(n & 3), Enqueued: time.Unix(0, 1)}, time.Unix(0, n&0xfffffff))
	if key != "" {
		s.SetAttributes(attribute.String(key, val), attribute.Int64(key+".n", n), attribute.Bool(key+".b", n&1 == 0),
			attribute.Float64(key+".f", float64(n)/3), attribute.StringSlice(key+".s", []string{val, key}))
	}
	s.addEvent(EventWorkStatus, time.Unix(2, n&0xffff), AttrNumerator.String(val), AttrDenominator.String(key))
	s.addEvent(EventTouch, time.Unix(3, 0))
	s.addEvent("three", time.Unix(4, 0), attribute.Int("a", 1), attribute.Int("b", -2), attribute.String("c", val))
	if n&32 != 0 {
		s.linkParent = true
	}
	if n&64 != 0 {
		s.AddLink(trace.Link{SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{9}, SpanID: sid})})
	}
	switch status % 3 {
	case 1:
		s.SetAttributes(AttrOutcome.String(OutcomeFailed), semconv.ErrorTypeKey.String(val))
		s.SetStatus(codes.Error, val)
	case 2:
		s.SetStatus(codes.Ok, "ignored")
	}
	s.ended = true
	return s
}

// TestLeanEncodingMatchesSDK: the lean encoder writes a job's spans as the
// SDK's OTLP exporter would.
func TestLeanEncodingMatchesSDK(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var spans []*leanSpan
	for i := range 64 {
		spans = append(spans, testSpan(r, "process fn", "fn", "H:x:1", "k", "v", int64(i*7919), i%2 == 0, uint8(i)))
	}
	checkEncoding(t, spans)
}

// FuzzLeanEncoding compares the lean encoder with the SDK exporter on
// arbitrary names, ids and values, invalid UTF-8 included.
func FuzzLeanEncoding(f *testing.F) {
	f.Add("send f", "f", "", "", "", int64(0), false, uint8(0))
	f.Add("process \xff", "\xfe", "H:1", "custom.key", "v\x00", int64(-1), true, uint8(1))
	f.Add("", "", "id", "messaging.message.id", "42", int64(1<<40), true, uint8(2))
	f.Fuzz(func(t *testing.T, name, dest, id, key, val string, n int64, remote bool, status uint8) {
		r := rand.New(rand.NewPCG(uint64(n), 7))
		checkEncoding(t, []*leanSpan{testSpan(r, name, dest, id, key, val, n, remote, status)})
	})
}

// TestLeanSamplerMatchesSDK: for every sampler jobgate offers, the lean
// path's decision equals the SDK sampler's, for roots and for sampled and
// unsampled parents, local and remote.
func TestLeanSamplerMatchesSDK(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, name := range []string{SamplerAlwaysOn, SamplerAlwaysOff, SamplerTraceIDRatio,
		SamplerParentBasedAlwaysOn, SamplerParentBasedAlwaysOff, SamplerParentBasedTraceIDRatio} {
		for _, ratio := range []float64{1, 0.5, 0.1, 0.001} {
			rc := Config{Sampler: name, SampleRatio: ratio}
			sdk, lean := newSampler(rc), newLeanSampler(rc)
			for i := range 2000 {
				var tid trace.TraceID
				binary.BigEndian.PutUint64(tid[:8], r.Uint64())
				binary.BigEndian.PutUint64(tid[8:], r.Uint64())
				var parent trace.SpanContext
				if i%3 != 0 {
					parent = trace.NewSpanContext(trace.SpanContextConfig{
						TraceID: tid, SpanID: trace.SpanID{1},
						TraceFlags: trace.TraceFlags(i % 2), Remote: i%4 < 2,
					})
				}
				ctx := trace.ContextWithSpanContext(context.Background(), parent)
				want := sdk.ShouldSample(sdktrace.SamplingParameters{ParentContext: ctx, TraceID: tid}).Decision == sdktrace.RecordAndSample
				if got := lean.sample(parent, tid); got != want {
					t.Fatalf("%s ratio %v, parent %v: lean %v, SDK %v", name, ratio, parent, got, want)
				}
			}
		}
	}
}

// TestLeanEncodingSpanSizes: spans whose length takes one, two and three
// bytes are encoded in place right, in one batch, in every order.
func TestLeanEncodingSpanSizes(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	tiny := &leanSpan{name: "t", sc: trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}}), ended: true}
	mid := testSpan(r, "process", "f", "H:1", "k", "v", 5, false, 0)
	huge := testSpan(r, "process", "f", "H:2", "k", strings.Repeat("v", 40000), 6, true, 1)
	var b []byte
	for _, s := range []*leanSpan{tiny, mid, huge} {
		if n := len(appendSpan(b[:0], s, nil)); (s == tiny) != (n < 128) || (s == huge) != (n >= 16384) {
			t.Fatalf("span of %d bytes is not the size meant", n)
		}
	}
	checkEncoding(t, []*leanSpan{tiny, mid, huge, tiny, huge, mid, mid, tiny})
}
