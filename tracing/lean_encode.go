package tracing

import (
	"encoding/binary"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of the OTLP trace protos (opentelemetry/proto/trace/v1 and
// common/v1, resource/v1) that the encoder writes.
const (
	fRSResource   = 1 // ResourceSpans.resource
	fRSScopeSpans = 2 // ResourceSpans.scope_spans
	fRSSchemaURL  = 3 // ResourceSpans.schema_url

	fResAttributes = 1 // Resource.attributes

	fSSScope     = 1 // ScopeSpans.scope
	fSSSpans     = 2 // ScopeSpans.spans
	fSSSchemaURL = 3 // ScopeSpans.schema_url

	fScopeName    = 1 // InstrumentationScope.name
	fScopeVersion = 2 // InstrumentationScope.version
	fScopeAttrs   = 3 // InstrumentationScope.attributes

	fSpanTraceID    = 1
	fSpanSpanID     = 2
	fSpanTraceState = 3
	fSpanParentID   = 4
	fSpanName       = 5
	fSpanKind       = 6
	fSpanStart      = 7
	fSpanEnd        = 8
	fSpanAttrs      = 9
	fSpanEvents     = 11
	fSpanLinks      = 13
	fSpanStatus     = 15
	fSpanFlags      = 16

	fEventTime  = 1
	fEventName  = 2
	fEventAttrs = 3

	fLinkTraceID    = 1
	fLinkSpanID     = 2
	fLinkTraceState = 3
	fLinkFlags      = 6

	fStatusMessage = 2
	fStatusCode    = 3

	fKVKey   = 1
	fKVValue = 2

	fAnyString = 1
	fAnyBool   = 2
	fAnyInt    = 3
	fAnyDouble = 4
	fAnyArray  = 5

	fArrayValues = 1

	// SpanFlags bits above the W3C trace flags: whether the parent (or the
	// linked span) is remote is known, and whether it is.
	flagHasIsRemote = 0x100
	flagIsRemote    = 0x200

	// Status codes on the wire (they differ from the API's codes).
	statusOK    = 1
	statusError = 2
)

// The tags every span has, as the bytes they encode to: writing a
// constant byte costs less than appendTag, which is a call (a fifth of
// the encoding went to tags and the small appends around them).
const (
	tagTraceID  = fSpanTraceID<<3 | 2  // bytes
	tagSpanID   = fSpanSpanID<<3 | 2   // bytes
	tagParentID = fSpanParentID<<3 | 2 // bytes
	tagKind     = fSpanKind << 3       // varint (wire type 0)
	tagStart    = fSpanStart<<3 | 1    // fixed64
	tagEnd      = fSpanEnd<<3 | 1      // fixed64
	tagStatus   = fSpanStatus<<3 | 2   // bytes
	tagLinks    = fSpanLinks<<3 | 2    // bytes
	// Field 16 takes two bytes: 0x80|(16<<3|5)&0x7f, then (16<<3|5)>>7.
	tagFlags0 = 0x80 | (fSpanFlags<<3|5)&0x7f
	tagFlags1 = (fSpanFlags<<3 | 5) >> 7

	tagLinkTraceID = fLinkTraceID<<3 | 2 // bytes
	tagLinkSpanID  = fLinkSpanID<<3 | 2  // bytes
	tagLinkFlags   = fLinkFlags<<3 | 5   // fixed32
)

// appendSpanField appends s as a ScopeSpans.spans field. The span is
// encoded in place after room for a two-byte length, which nearly every
// span needs (128 bytes to 16 KiB), so it is not copied; otherwise it is
// moved to fit its length.
func appendSpanField(b []byte, s *leanSpan, hc *leanHeadCache) []byte {
	const room = 2
	b = appendTag(b, fSSSpans, protowire.BytesType)
	at := len(b)
	b = appendSpan(append(b, make([]byte, room)...), s, hc)
	n := len(b) - at - room
	if n >= 1<<7 && n < 1<<14 { // the length as the two bytes left for it
		b[at], b[at+1] = byte(n)|0x80, byte(n>>7)
		return b
	}
	k := protowire.SizeVarint(uint64(n))
	switch {
	case k < room:
		copy(b[at+k:], b[at+room:])
		b = b[:at+k+n]
	case k > room:
		b = append(b, make([]byte, k-room)...)
		copy(b[at+k:], b[at+room:at+room+n])
	}
	appendVarint(b[at:at], uint64(n))
	return b
}

// appendSpan appends the Span message body of s. s is ended, so nothing
// writes to it any more. hc, when not nil, caches the name and the first
// attributes.
func appendSpan(b []byte, s *leanSpan, hc *leanHeadCache) []byte {
	tid, sid := s.sc.TraceID(), s.sc.SpanID()
	b = append(b, tagTraceID, byte(len(tid)))
	b = append(b, tid[:]...)
	b = append(b, tagSpanID, byte(len(sid)))
	b = append(b, sid[:]...)
	if ts := s.sc.TraceState(); ts.Len() > 0 {
		b = appendString(b, fSpanTraceState, ts.String())
	}
	if psid := s.parent.SpanID(); psid.IsValid() {
		b = append(b, tagParentID, byte(len(psid)))
		b = append(b, psid[:]...)
	}
	var head []byte
	if hc != nil {
		var name []byte
		name, head = hc.lookup(s)
		b = append(b, name...)
	} else {
		b = appendName(b, s.name, s.nameDest)
	}
	b = append(b, tagKind)
	b = appendVarint(b, uint64(s.kind))
	b = append(b, tagStart)
	b = binary.LittleEndian.AppendUint64(b, uint64(s.start))
	b = append(b, tagEnd)
	b = binary.LittleEndian.AppendUint64(b, uint64(s.end))

	if hc != nil {
		b = append(b, head...)
	} else {
		b = appendStrKV(b, headSystem, s.system)
		b = appendStrKV(b, headOpType, s.opType)
		b = appendStrKV(b, headOpName, s.opName)
		b = appendStrKV(b, headDest, s.dest)
	}
	if s.msgIDNum != 0 && s.msgID == "" {
		if hc != nil {
			b = hc.appendMsgID(b, s.msgIDPrefix, s.msgIDNum)
		} else {
			b = appendNumKV(b, headMsgID, s.msgIDPrefix, s.msgIDNum)
		}
	} else {
		b = appendStrKV(b, headMsgID, s.msgID)
	}
	b = appendStrKV(b, headConvID, s.convID)
	if s.has&hasBodySize != 0 {
		b = appendIntKV(b, headBodySize, s.bodySize)
	}
	b = appendStrKV(b, headServerAddr, s.serverAddr)
	if s.has&hasServerPort != 0 {
		b = appendIntKV(b, headServerPort, s.serverPort)
	}
	if s.has&hasAttempt != 0 {
		b = appendIntKV(b, headAttempt, s.attempt)
	}
	if s.has&hasQueueWait != 0 {
		b = appendIntKV(b, headQueueWait, s.queueWait)
	}
	b = appendStrKV(b, headOutcome, s.outcome)
	b = appendStrKV(b, headErrorType, s.errType)
	for _, kv := range s.extra {
		b = appendKV(b, fSpanAttrs, kv)
	}

	for i := range s.events {
		b = appendEvent(b, &s.events[i])
	}
	switch {
	case s.linkParent:
		b = appendLink(b, s.parent)
	case s.link != nil:
		b = appendLink(b, *s.link)
	}
	// Always present, even unset, as the SDK's exporter writes it.
	if s.status == codes.Unset && s.statusDesc == "" {
		b = append(b, tagStatus, 0) // an empty Status, as most spans have
	} else {
		b = appendStatus(b, s.status, s.statusDesc)
	}
	flags := uint32(s.sc.TraceFlags()) | flagHasIsRemote
	if s.parent.IsRemote() {
		flags |= flagIsRemote
	}
	b = append(b, tagFlags0, tagFlags1)
	return binary.LittleEndian.AppendUint32(b, flags)
}

func appendEvent(b []byte, e *leanEvent) []byte {
	name := validString(e.name)
	n := protowire.SizeTag(fEventTime) + 8 + protowire.SizeTag(fEventName) + protowire.SizeBytes(len(name))
	e.attributes(func(kv attribute.KeyValue) { n += sizeKVField(fEventAttrs, kv) })
	b = appendTag(b, fSpanEvents, protowire.BytesType)
	b = appendVarint(b, uint64(n))
	b = appendTime(b, fEventTime, e.time.UnixNano())
	b = appendTag(b, fEventName, protowire.BytesType)
	b = protowire.AppendString(b, name)
	e.attributes(func(kv attribute.KeyValue) { b = appendKV(b, fEventAttrs, kv) })
	return b
}

func appendLink(b []byte, sc trace.SpanContext) []byte {
	tid, sid := sc.TraceID(), sc.SpanID()
	var ts string
	if sc.TraceState().Len() > 0 {
		ts = sc.TraceState().String()
	}
	n := 2*protowire.SizeTag(fLinkTraceID) + protowire.SizeBytes(16) + protowire.SizeBytes(8) +
		protowire.SizeTag(fLinkFlags) + 4
	if ts != "" {
		n += protowire.SizeTag(fLinkTraceState) + protowire.SizeBytes(len(ts))
	}
	flags := uint32(sc.TraceFlags()) | flagHasIsRemote
	if sc.IsRemote() {
		flags |= flagIsRemote
	}
	b = append(b, tagLinks)
	b = appendVarint(b, uint64(n))
	b = append(b, tagLinkTraceID, byte(len(tid)))
	b = append(b, tid[:]...)
	b = append(b, tagLinkSpanID, byte(len(sid)))
	b = append(b, sid[:]...)
	b = appendString(b, fLinkTraceState, ts)
	b = append(b, tagLinkFlags)
	return binary.LittleEndian.AppendUint32(b, flags)
}

func appendStatus(b []byte, c codes.Code, desc string) []byte {
	desc = validString(desc)
	var code uint64
	switch c {
	case codes.Ok:
		code = statusOK
	case codes.Error:
		code = statusError
	}
	n := 0
	if code != 0 {
		n += protowire.SizeTag(fStatusCode) + protowire.SizeVarint(code)
	}
	if desc != "" {
		n += protowire.SizeTag(fStatusMessage) + protowire.SizeBytes(len(desc))
	}
	b = appendTag(b, fSpanStatus, protowire.BytesType)
	b = appendVarint(b, uint64(n))
	b = appendString(b, fStatusMessage, desc)
	if code == 0 {
		return b
	}
	b = appendTag(b, fStatusCode, protowire.VarintType)
	return appendVarint(b, code)
}

func appendTime(b []byte, field protowire.Number, ns int64) []byte {
	b = appendTag(b, field, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, uint64(ns))
}

// validString replaces invalid UTF-8, which OTLP's string fields must not
// hold: one bad Gearman function name would otherwise make the collector
// reject the whole batch.
func validString(s string) string {
	// Nearly every string is ASCII, which is cleared eight bytes at a
	// time: byte by byte, this check was a fifth of the encoding.
	i := 0
	for ; i+8 <= len(s); i += 8 {
		if binary.LittleEndian.Uint64(unsafe.Slice(unsafe.StringData(s[i:]), 8))&0x8080808080808080 != 0 {
			return validUTF8(s)
		}
	}
	for ; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return validUTF8(s)
		}
	}
	return s
}

func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// appendString appends a string field, leaving it out when empty as proto3
// does.
func appendString(b []byte, field protowire.Number, v string) []byte {
	v = validString(v)
	if v == "" {
		return b
	}
	b = appendTag(b, field, protowire.BytesType)
	return protowire.AppendString(b, v)
}

// appendName appends the span name field: name, or name + " " + dest.
func appendName(b []byte, name, dest string) []byte {
	if dest == "" {
		return appendString(b, fSpanName, name)
	}
	name, dest = validString(name), validString(dest)
	b = appendTag(b, fSpanName, protowire.BytesType)
	b = appendVarint(b, uint64(len(name)+1+len(dest)))
	b = append(b, name...)
	b = append(b, ' ')
	return append(b, dest...)
}

// The typed attributes, each encoded once as a template of a whole span
// attribute but its value: the Span.attributes tag, a byte for the
// KeyValue's length, the key field, the value field's tag, a byte for the
// AnyValue's length and the AnyValue's tag. The encoder copies the
// template, fills in the two lengths and appends the value.
var (
	headSystem     = kvHead(systemKey, fAnyString, protowire.BytesType)
	headOpType     = kvHead(opTypeKey, fAnyString, protowire.BytesType)
	headOpName     = kvHead(opNameKey, fAnyString, protowire.BytesType)
	headDest       = kvHead(destKey, fAnyString, protowire.BytesType)
	headMsgID      = kvHead(msgIDKey, fAnyString, protowire.BytesType)
	headConvID     = kvHead(convIDKey, fAnyString, protowire.BytesType)
	headBodySize   = kvHead(bodySizeKey, fAnyInt, protowire.VarintType)
	headServerAddr = kvHead(serverAddrKey, fAnyString, protowire.BytesType)
	headServerPort = kvHead(serverPortKey, fAnyInt, protowire.VarintType)
	headAttempt    = kvHead(AttrAttempt, fAnyInt, protowire.VarintType)
	headQueueWait  = kvHead(AttrQueueWait, fAnyInt, protowire.VarintType)
	headOutcome    = kvHead(AttrOutcome, fAnyString, protowire.BytesType)
	headErrorType  = kvHead(errorTypeKey, fAnyString, protowire.BytesType)
)

// kvHead returns the template of a span attribute with key k whose
// AnyValue is of field f and type typ. Every tag in it takes one byte.
func kvHead(k attribute.Key, f protowire.Number, typ protowire.Type) []byte {
	b := appendTag(nil, fSpanAttrs, protowire.BytesType)
	b = append(b, 0)
	b = appendTag(b, fKVKey, protowire.BytesType)
	b = protowire.AppendString(b, string(k))
	b = appendTag(b, fKVValue, protowire.BytesType)
	b = append(b, 0)
	return appendTag(b, f, typ)
}

// appendKVHead appends template t for a value of vlen bytes (its length
// varint and value, which the caller appends). A length of 128 or more
// is moved to fit its varint: rare, for keys and values this short.
func appendKVHead(b, t []byte, vlen int) []byte {
	at := len(b)
	b = append(b, t...)
	av := 1 + vlen        // the AnyValue's length: its tag and the value
	kv := len(t) - 3 + av // the KeyValue's: key field, value tag, length, AnyValue
	if kv < 0x80 {
		b[at+1] = byte(kv)
		b[len(b)-2] = byte(av)
		return b
	}
	// Long: write the lengths as varints of their own size.
	b = b[:at]
	b = append(b, t[0])
	b = appendVarint(b, uint64(len(t)-4+protowire.SizeVarint(uint64(av))+av))
	b = append(b, t[2:len(t)-2]...)
	b = appendVarint(b, uint64(av))
	return append(b, t[len(t)-1])
}

// appendStrKV appends a string span attribute from template t; an empty
// value means unset.
func appendStrKV(b []byte, t []byte, v string) []byte {
	if v == "" {
		return b
	}
	v = validString(v)
	b = appendKVHead(b, t, protowire.SizeBytes(len(v)))
	b = appendVarint(b, uint64(len(v)))
	return append(b, v...)
}

// appendNumKV appends a string span attribute whose value is prefix
// followed by n in decimal (leanSpan.msgIDNum).
func appendNumKV(b []byte, t []byte, prefix string, n uint64) []byte {
	prefix = validString(prefix) // the digits are ASCII: valid as they are
	var digits [20]byte
	d := strconv.AppendUint(digits[:0], n, 10)
	vl := len(prefix) + len(d)
	b = appendKVHead(b, t, protowire.SizeBytes(vl))
	b = appendVarint(b, uint64(vl))
	b = append(b, prefix...)
	return append(b, d...)
}

// appendIntKV appends an integer span attribute from template t.
func appendIntKV(b []byte, t []byte, v int64) []byte {
	b = appendKVHead(b, t, protowire.SizeVarint(uint64(v)))
	return appendVarint(b, uint64(v))
}

// sizeAny is the AnyValue message size of v.
func sizeAny(v attribute.Value) int {
	switch v.Type() {
	case attribute.BOOL:
		return protowire.SizeTag(fAnyBool) + 1
	case attribute.INT64:
		return protowire.SizeTag(fAnyInt) + protowire.SizeVarint(uint64(v.AsInt64()))
	case attribute.FLOAT64:
		return protowire.SizeTag(fAnyDouble) + 8
	case attribute.STRING:
		return protowire.SizeTag(fAnyString) + protowire.SizeBytes(len(validString(v.AsString())))
	}
	n := 0
	forEachElem(v, func(e attribute.Value) { n += protowire.SizeTag(fArrayValues) + protowire.SizeBytes(sizeAny(e)) })
	return protowire.SizeTag(fAnyArray) + protowire.SizeBytes(n)
}

// forEachElem calls f for each element of a slice value.
func forEachElem(v attribute.Value, f func(attribute.Value)) {
	switch v.Type() {
	case attribute.BOOLSLICE:
		for _, x := range v.AsBoolSlice() {
			f(attribute.BoolValue(x))
		}
	case attribute.INT64SLICE:
		for _, x := range v.AsInt64Slice() {
			f(attribute.Int64Value(x))
		}
	case attribute.FLOAT64SLICE:
		for _, x := range v.AsFloat64Slice() {
			f(attribute.Float64Value(x))
		}
	case attribute.STRINGSLICE:
		for _, x := range v.AsStringSlice() {
			f(attribute.StringValue(x))
		}
	}
}

func appendAny(b []byte, v attribute.Value) []byte {
	switch v.Type() {
	case attribute.BOOL:
		var x uint64
		if v.AsBool() {
			x = 1
		}
		b = appendTag(b, fAnyBool, protowire.VarintType)
		return appendVarint(b, x)
	case attribute.INT64:
		b = appendTag(b, fAnyInt, protowire.VarintType)
		return appendVarint(b, uint64(v.AsInt64()))
	case attribute.FLOAT64:
		b = appendTag(b, fAnyDouble, protowire.Fixed64Type)
		return protowire.AppendFixed64(b, math.Float64bits(v.AsFloat64()))
	case attribute.STRING:
		b = appendTag(b, fAnyString, protowire.BytesType)
		return protowire.AppendString(b, validString(v.AsString()))
	}
	n := 0
	forEachElem(v, func(e attribute.Value) { n += protowire.SizeTag(fArrayValues) + protowire.SizeBytes(sizeAny(e)) })
	b = appendTag(b, fAnyArray, protowire.BytesType)
	b = appendVarint(b, uint64(n))
	forEachElem(v, func(e attribute.Value) {
		b = appendTag(b, fArrayValues, protowire.BytesType)
		b = appendVarint(b, uint64(sizeAny(e)))
		b = appendAny(b, e)
	})
	return b
}

func sizeKVField(field protowire.Number, kv attribute.KeyValue) int {
	n := protowire.SizeTag(fKVKey) + protowire.SizeBytes(len(validString(string(kv.Key)))) +
		protowire.SizeTag(fKVValue) + protowire.SizeBytes(sizeAny(kv.Value))
	return protowire.SizeTag(field) + protowire.SizeBytes(n)
}

// appendKV appends any attribute as a KeyValue field.
func appendKV(b []byte, field protowire.Number, kv attribute.KeyValue) []byte {
	av := sizeAny(kv.Value)
	key := validString(string(kv.Key))
	n := protowire.SizeTag(fKVKey) + protowire.SizeBytes(len(key)) + protowire.SizeTag(fKVValue) + protowire.SizeBytes(av)
	b = appendTag(b, field, protowire.BytesType)
	b = appendVarint(b, uint64(n))
	b = appendTag(b, fKVKey, protowire.BytesType)
	b = protowire.AppendString(b, key)
	b = appendTag(b, fKVValue, protowire.BytesType)
	b = appendVarint(b, uint64(av))
	return appendAny(b, kv.Value)
}

// appendVarint is protowire.AppendVarint with the one-byte case inlined:
// nearly every length and tag the encoder writes is below 128, and the
// call was a fifth of the encoder's time.
func appendVarint(b []byte, v uint64) []byte {
	if v < 0x80 {
		return append(b, byte(v))
	}
	return protowire.AppendVarint(b, v)
}

// appendTag is protowire.AppendTag through appendVarint.
func appendTag(b []byte, num protowire.Number, typ protowire.Type) []byte {
	return appendVarint(b, uint64(num)<<3|uint64(typ&7))
}
