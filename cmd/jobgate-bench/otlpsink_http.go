package main

import (
	"bytes"
	"encoding/binary"
	"io"
)

// Limits of what the sink accepts. A connection's read buffer starts large
// enough for a batch of a few hundred spans to arrive in one read, and
// grows for a larger request up to sinkMaxBody and its head.
const (
	sinkReadSize  = 1 << 20
	sinkMaxHeader = 64 << 10
	sinkMaxBody   = 64 << 20
)

var (
	sinkReplyOK = []byte("HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n")
	headerEnd   = []byte("\r\n\r\n")
)

// sinkError is the status line of an error reply, after which the sink
// closes the connection.
type sinkError string

const (
	sinkBadRequest     sinkError = "400 Bad Request"
	sinkLengthRequired sinkError = "411 Length Required"
	sinkTooLarge       sinkError = "413 Request Entity Too Large"
)

// serveConn reads HTTP/1.1 requests from rw until it fails or ends,
// answering each in order (pipelined requests too). OTLP exporters send
// their protobuf body with a Content-Length; a request without one gets
// 411 and the connection is closed, as does a malformed or oversized one.
func (s *otlpSink) serveConn(rw io.ReadWriter) {
	buf := s.takeBuffer()
	defer func() { s.putBuffer(buf) }()
	start, end := 0, 0 // buf[start:end] is read and not yet handled
	read := func() bool {
		n, err := rw.Read(buf[end:])
		end += n
		return err == nil
	}
	for {
		head := -1
		for {
			if i := bytes.Index(buf[start:end], headerEnd); i >= 0 {
				head = start + i + len(headerEnd)
				break
			}
			if end-start > sinkMaxHeader {
				s.fail(rw, sinkBadRequest)
				return
			}
			if end == len(buf) {
				end = copy(buf, buf[start:end])
				start = 0
			}
			if !read() {
				return
			}
		}
		length, errReply := parseSinkHead(buf[start:head])
		if errReply != "" {
			s.fail(rw, errReply)
			return
		}
		// The whole request must fit from start: move it to the front,
		// into a larger buffer if it is larger than this one.
		if need := head - start + length; start+need > len(buf) {
			dst := buf
			if need > len(buf) {
				dst = make([]byte, need)
			}
			end = copy(dst, buf[start:end])
			head -= start
			start = 0
			buf = dst
		}
		for end < head+length {
			if !read() {
				return
			}
		}
		body := buf[head : head+length]
		if n := countSpans(body); n >= 0 {
			s.spans.Add(int64(n))
		} else {
			s.bad.Add(1)
		}
		s.requests.Add(1)
		s.bytes.Add(int64(length))
		if _, err := rw.Write(sinkReplyOK); err != nil {
			return
		}
		start = head + length
		if start == end {
			start, end = 0, 0
		}
	}
}

// fail answers an unacceptable request with status; the caller then
// closes the connection.
func (s *otlpSink) fail(w io.Writer, status sinkError) {
	s.bad.Add(1)
	io.WriteString(w, "HTTP/1.1 "+string(status)+"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
}

// parseSinkHead checks a request's line and headers (through the blank
// line) and returns its body length, or the error to answer with. It does
// not allocate: the sink runs without a garbage collector.
func parseSinkHead(head []byte) (int, sinkError) {
	crlf := []byte("\r\n")
	line, rest, _ := bytes.Cut(head[:len(head)-len(headerEnd)], crlf)
	if !bytes.HasPrefix(line, []byte("POST ")) || !bytes.HasSuffix(line, []byte(" HTTP/1.1")) {
		return 0, sinkBadRequest
	}
	length := -1
	for len(rest) > 0 {
		line, rest, _ = bytes.Cut(rest, crlf)
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return 0, sinkBadRequest
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			n := parseLength(value)
			if n < 0 || (length >= 0 && n != length) {
				return 0, sinkBadRequest
			}
			length = n
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			return 0, sinkLengthRequired
		}
	}
	switch {
	case length < 0:
		return 0, sinkLengthRequired
	case length > sinkMaxBody:
		return 0, sinkTooLarge
	}
	return length, ""
}

// parseLength parses a Content-Length value, or returns -1 if it is not
// one. Values above sinkMaxBody come back as sinkMaxBody+1.
func parseLength(b []byte) int {
	if len(b) == 0 {
		return -1
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return -1
		}
		if n <= sinkMaxBody {
			n = n*10 + int(c-'0')
		}
	}
	return min(n, sinkMaxBody+1)
}

// countSpans returns how many spans an encoded ExportTraceServiceRequest
// holds (resource_spans = 1, their scope_spans = 2, their spans = 2), or
// -1 if b is not valid protobuf at those three levels.
func countSpans(b []byte) int {
	n := 0
	ok := eachField(b, 1, func(resource []byte) bool {
		return eachField(resource, 2, func(scope []byte) bool {
			return eachField(scope, 2, func([]byte) bool { n++; return true })
		})
	})
	if !ok {
		return -1
	}
	return n
}

// eachField calls fn with the bytes of every length-delimited field
// numbered field in the protobuf message b, skipping the other fields. It
// reports false if b does not parse or fn does.
func eachField(b []byte, field uint64, fn func([]byte) bool) bool {
	for len(b) > 0 {
		key, k := binary.Uvarint(b)
		if k <= 0 {
			return false
		}
		b = b[k:]
		switch key & 7 {
		case 0: // varint
			if _, k = binary.Uvarint(b); k <= 0 {
				return false
			}
			b = b[k:]
		case 1: // 64-bit
			if len(b) < 8 {
				return false
			}
			b = b[8:]
		case 2: // length-delimited
			size, k := binary.Uvarint(b)
			if k <= 0 || size > uint64(len(b)-k) {
				return false
			}
			value := b[k : k+int(size)]
			b = b[k+int(size):]
			if key>>3 == field && !fn(value) {
				return false
			}
		case 5: // 32-bit
			if len(b) < 4 {
				return false
			}
			b = b[4:]
		default:
			return false
		}
	}
	return true
}
