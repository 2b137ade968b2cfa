package beanstalk

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing/iotest"
)

// result is what one ReadCommand gives: a command or a client error.
type result struct {
	cmd *Command  // a copy, owning its bytes
	err ReplyKind // the client error's reply kind
}

func (r result) String() string {
	if r.cmd == nil {
		return r.err.String()
	}
	return fmt.Sprintf("%+v", cmdString(r.cmd))
}

func cmdString(c *Command) string {
	return fmt.Sprintf("{%v tube=%q id=%d pri=%d delay=%d ttr=%d timeout=%d bound=%d body=%q}",
		c.Verb, c.Tube, c.ID, c.Pri, c.Delay, c.TTR, c.Timeout, c.Bound, c.Body)
}

// one, fail and then build expected results for the tables.
func one(c Command) []result       { return []result{{cmd: &c}} }
func fail(k ReplyKind) []result    { return []result{{err: k}} }
func then(rs ...[]result) []result { return concat(rs...) }

func concat(rs ...[]result) []result {
	var out []result
	for _, r := range rs {
		out = append(out, r...)
	}
	return out
}

func cloneCommand(c *Command) *Command {
	d := *c
	d.Tube = bytes.Clone(c.Tube)
	d.Body = bytes.Clone(c.Body)
	return &d
}

func equalCommand(a, b *Command) bool {
	return a.Verb == b.Verb && bytes.Equal(a.Tube, b.Tube) && a.ID == b.ID &&
		a.Pri == b.Pri && a.Delay == b.Delay && a.TTR == b.TTR &&
		a.Timeout == b.Timeout && a.Bound == b.Bound && bytes.Equal(a.Body, b.Body) &&
		(a.Verb == Put) == (a.Body != nil) // put always has a Body, even empty
}

func equalResults(a, b []result) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if (a[i].cmd == nil) != (b[i].cmd == nil) || a[i].err != b[i].err {
			return false
		}
		if a[i].cmd != nil && !equalCommand(a[i].cmd, b[i].cmd) {
			return false
		}
	}
	return true
}

// decodeAll reads commands until a fatal error, which it returns.
func decodeAll(rd io.Reader, lim Limits) ([]result, error) {
	r := NewReader(rd, lim)
	var out []result
	for {
		c, err := r.ReadCommand()
		var ce *ClientError
		switch {
		case errors.As(err, &ce):
			out = append(out, result{err: ce.Kind})
		case err != nil:
			return out, err
		default:
			out = append(out, result{cmd: cloneCommand(c)})
		}
	}
}

// splitReader returns its parts, each in as few Reads as the caller's
// buffer allows, never joining two parts in one Read.
type splitReader struct{ parts [][]byte }

func (s *splitReader) Read(p []byte) (int, error) {
	for len(s.parts) > 0 && len(s.parts[0]) == 0 {
		s.parts = s.parts[1:]
	}
	if len(s.parts) == 0 {
		return 0, io.EOF
	}
	n := copy(p, s.parts[0])
	s.parts[0] = s.parts[0][n:]
	return n, nil
}

func split2(data []byte, at int) io.Reader {
	return &splitReader{parts: [][]byte{data[:at], data[at:]}}
}

// splitPoints returns the positions to split data at: all of them for a
// short input, else those near its start and end and near every "\r\n",
// plus a stride.
func splitPoints(data []byte) []int {
	if len(data) <= 1024 {
		pts := make([]int, len(data)+1)
		for i := range pts {
			pts[i] = i
		}
		return pts
	}
	seen := map[int]bool{}
	var pts []int
	add := func(i int) {
		if i >= 0 && i <= len(data) && !seen[i] {
			seen[i] = true
			pts = append(pts, i)
		}
	}
	for i := range 300 {
		add(i)
		add(len(data) - i)
	}
	for i := 0; i < len(data); i++ {
		if data[i] == '\r' {
			for d := -3; d <= 3; d++ {
				add(i + d)
			}
		}
	}
	for i := 0; i < len(data); i += 997 {
		add(i)
	}
	for _, i := range []int{readBufSize - 1, readBufSize, readBufSize + 1, bigStart - 1, bigStart, bigStart + 1} {
		add(i)
	}
	return pts
}

// readers returns the ways every test input is fed: whole, one byte at a
// time, with the last data and io.EOF together, and in halves.
func readers(data []byte) map[string]func() io.Reader {
	return map[string]func() io.Reader{
		"whole":    func() io.Reader { return bytes.NewReader(data) },
		"onebyte":  func() io.Reader { return iotest.OneByteReader(bytes.NewReader(data)) },
		"dataerr":  func() io.Reader { return iotest.DataErrReader(bytes.NewReader(data)) },
		"half":     func() io.Reader { return iotest.HalfReader(bytes.NewReader(data)) },
		"timeout":  func() io.Reader { return &retryReader{r: iotest.TimeoutReader(bytes.NewReader(data))} },
		"emptyrds": func() io.Reader { return &emptyReader{r: bytes.NewReader(data)} },
	}
}

// retryReader hides the one timeout of iotest.TimeoutReader: the second
// Read returns an error, which must be fatal; so skip it for equivalence.
type retryReader struct{ r io.Reader }

func (r *retryReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err == iotest.ErrTimeout {
		return r.r.Read(p)
	}
	return n, err
}

// emptyReader returns (0, nil) before every real Read, as an io.Reader may.
type emptyReader struct {
	r    io.Reader
	flip bool
}

func (r *emptyReader) Read(p []byte) (int, error) {
	if r.flip = !r.flip; r.flip {
		return 0, nil
	}
	return r.r.Read(p)
}

func short(s string) string {
	if len(s) > 60 {
		return fmt.Sprintf("%q...(%d bytes)", s[:40], len(s))
	}
	return fmt.Sprintf("%q", s)
}

func x(n int) string { return strings.Repeat("x", n) }

func itoa(i int) string { return strconv.Itoa(i) }
