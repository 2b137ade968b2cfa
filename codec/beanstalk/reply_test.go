package beanstalk

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

// replyTable is every reply kind with its exact bytes, as beanstalkd's
// prot.c formats them.
var replyTable = []struct {
	r    Reply
	wire string
}{
	{Reply{Kind: Inserted, ID: 5}, "INSERTED 5\r\n"},
	{Reply{Kind: Inserted, ID: 1<<64 - 1}, "INSERTED 18446744073709551615\r\n"},
	{Reply{Kind: BuriedID, ID: 7}, "BURIED 7\r\n"},
	{Reply{Kind: Buried}, "BURIED\r\n"},
	{Reply{Kind: Reserved, ID: 5, Body: []byte("abc")}, "RESERVED 5 3\r\nabc\r\n"},
	{Reply{Kind: Reserved, ID: 1, Body: []byte{}}, "RESERVED 1 0\r\n\r\n"},
	{Reply{Kind: Reserved, ID: 2, Body: []byte("a\r\nb\x00")}, "RESERVED 2 5\r\na\r\nb\x00\r\n"},
	{Reply{Kind: Reserved, ID: 3, Body: []byte(x(65535))}, "RESERVED 3 65535\r\n" + x(65535) + "\r\n"},
	{Reply{Kind: DeadlineSoon}, "DEADLINE_SOON\r\n"},
	{Reply{Kind: TimedOut}, "TIMED_OUT\r\n"},
	{Reply{Kind: Deleted}, "DELETED\r\n"},
	{Reply{Kind: NotFound}, "NOT_FOUND\r\n"},
	{Reply{Kind: Released}, "RELEASED\r\n"},
	{Reply{Kind: Touched}, "TOUCHED\r\n"},
	{Reply{Kind: Using, Tube: []byte("default")}, "USING default\r\n"},
	{Reply{Kind: Using, Tube: []byte(b200)}, "USING " + b200 + "\r\n"},
	{Reply{Kind: Watching, Count: 1}, "WATCHING 1\r\n"},
	{Reply{Kind: NotIgnored}, "NOT_IGNORED\r\n"},
	{Reply{Kind: Found, ID: 1, Body: []byte("a")}, "FOUND 1 1\r\na\r\n"},
	{Reply{Kind: KickedCount, Count: 3}, "KICKED 3\r\n"},
	{Reply{Kind: KickedCount, Count: 0}, "KICKED 0\r\n"},
	{Reply{Kind: Kicked}, "KICKED\r\n"},
	{Reply{Kind: OK, Body: []byte("---\n- default\n")}, "OK 14\r\n---\n- default\n\r\n"},
	{Reply{Kind: OK, Body: []byte("---\nid: 1\n")}, "OK 10\r\n---\nid: 1\n\r\n"},
	{Reply{Kind: Paused}, "PAUSED\r\n"},
	{Reply{Kind: ExpectedCRLF}, "EXPECTED_CRLF\r\n"},
	{Reply{Kind: JobTooBig}, "JOB_TOO_BIG\r\n"},
	{Reply{Kind: Draining}, "DRAINING\r\n"},
	{Reply{Kind: OutOfMemory}, "OUT_OF_MEMORY\r\n"},
	{Reply{Kind: InternalError}, "INTERNAL_ERROR\r\n"},
	{Reply{Kind: BadFormat}, "BAD_FORMAT\r\n"},
	{Reply{Kind: UnknownCommand}, "UNKNOWN_COMMAND\r\n"},
}

func TestReplyAppendTo(t *testing.T) {
	seen := map[ReplyKind]bool{}
	for _, tc := range replyTable {
		seen[tc.r.Kind] = true
		if got := string(tc.r.AppendTo([]byte(">"))); got != ">"+tc.wire {
			t.Errorf("%v: got %s, want %s", tc.r.Kind, short(got), short(">"+tc.wire))
		}
	}
	for k := Inserted; k <= UnknownCommand; k++ {
		if !seen[k] {
			t.Errorf("no row for %v", k)
		}
	}
	for _, k := range []ReplyKind{0, UnknownCommand + 1} {
		if got := (&Reply{Kind: k}).AppendTo(nil); len(got) != 0 {
			t.Errorf("%v: got %q", k, got)
		}
	}
}

func equalReply(a, b *Reply) bool {
	return a.Kind == b.Kind && a.ID == b.ID && a.Count == b.Count &&
		bytes.Equal(a.Tube, b.Tube) && bytes.Equal(a.Body, b.Body) &&
		a.Kind.HasBody() == (a.Body != nil)
}

func cloneReply(r *Reply) *Reply {
	c := *r
	c.Tube = bytes.Clone(r.Tube)
	c.Body = bytes.Clone(r.Body)
	return &c
}

// replyResult is what one ReadReply gives.
type replyResult struct {
	r      *Reply
	tooBig *ReplyTooBigError
}

func (r replyResult) String() string {
	if r.r == nil {
		return fmt.Sprintf("%+v", *r.tooBig)
	}
	return fmt.Sprintf("{%v id=%d count=%d tube=%q body=%s}", r.r.Kind, r.r.ID, r.r.Count, r.r.Tube, short(string(r.r.Body)))
}

// decodeReplies reads replies until a fatal error, which it returns.
func decodeReplies(rd io.Reader, lim Limits) ([]replyResult, error) {
	r := NewReplyReader(rd, lim)
	var out []replyResult
	for {
		rep, err := r.ReadReply()
		var tb *ReplyTooBigError
		switch {
		case errors.As(err, &tb):
			out = append(out, replyResult{tooBig: tb})
		case err != nil:
			return out, err
		default:
			out = append(out, replyResult{r: cloneReply(rep)})
		}
	}
}

func equalReplyResults(a, b []replyResult) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		switch {
		case (a[i].r == nil) != (b[i].r == nil):
			return false
		case a[i].r != nil && !equalReply(a[i].r, b[i].r):
			return false
		case a[i].r == nil && *a[i].tooBig != *b[i].tooBig:
			return false
		}
	}
	return true
}

// TestReplyReaderTable decodes the bytes of every reply, fed in every way,
// followed by a sentinel reply, and checks it gives the reply back.
func TestReplyReaderTable(t *testing.T) {
	sentinel := &Reply{Kind: Using, Tube: []byte("s")}
	for _, tc := range replyTable {
		data := []byte(tc.wire + "USING s\r\n")
		want := []replyResult{{r: &tc.r}, {r: sentinel}}
		check := func(how string, got []replyResult, err error) {
			t.Helper()
			if !equalReplyResults(got, want) || err != io.EOF {
				t.Fatalf("%s: %s: got %v, %v; want %v", short(tc.wire), how, got, err, want)
			}
		}
		for how, rd := range readers(data) {
			got, err := decodeReplies(rd(), Limits{})
			check(how, got, err)
		}
		for _, at := range splitPoints(data) {
			got, err := decodeReplies(split2(data, at), Limits{})
			check("split at "+itoa(at), got, err)
		}
	}
}

// TestReplyReaderErrors checks what is not a reply: every error is fatal
// but a body over the limit, which is skipped.
func TestReplyReaderErrors(t *testing.T) {
	using := replyResult{r: &Reply{Kind: Using, Tube: []byte("s")}}
	for _, tc := range []struct {
		in    string
		lim   Limits
		want  []replyResult
		fatal any // *ProtocolError or an error for errors.Is
	}{
		{in: "FOO\r\n", fatal: &ProtocolError{}},
		{in: "\r\n", fatal: &ProtocolError{}},
		{in: "inserted 1\r\n", fatal: &ProtocolError{}},
		{in: "INSERTED\r\n", fatal: &ProtocolError{}},
		{in: "INSERTED \r\n", fatal: &ProtocolError{}},
		{in: "INSERTED x\r\n", fatal: &ProtocolError{}},
		{in: "INSERTED  5\r\n", fatal: &ProtocolError{}},
		{in: "INSERTED 5 \r\n", fatal: &ProtocolError{}},
		{in: "INSERTED -5\r\n", fatal: &ProtocolError{}},
		{in: "INSERTED 18446744073709551616\r\n", fatal: &ProtocolError{}},
		{in: "BURIED \r\n", fatal: &ProtocolError{}},
		{in: "BURIED 1 2\r\n", fatal: &ProtocolError{}},
		{in: "KICKED x\r\n", fatal: &ProtocolError{}},
		{in: "DELETED 5\r\n", fatal: &ProtocolError{}},
		{in: "DELETED\n", fatal: io.ErrUnexpectedEOF},
		{in: "USING\r\n", fatal: &ProtocolError{}},
		{in: "USING \r\n", fatal: &ProtocolError{}},
		{in: "USING a b\r\n", fatal: &ProtocolError{}},
		{in: "USING -a\r\n", fatal: &ProtocolError{}},
		{in: "WATCHING\r\n", fatal: &ProtocolError{}},
		{in: "RESERVED 1\r\n", fatal: &ProtocolError{}},
		{in: "RESERVED 1 3\r\nabcXY", fatal: &ProtocolError{}},
		{in: "RESERVED 1 4294967296\r\n", fatal: &ProtocolError{}},
		{in: "OK\r\n", fatal: &ProtocolError{}},
		{in: "OK 3\r\nab", fatal: io.ErrUnexpectedEOF},
		{in: "USING " + x(300) + "\r\n", fatal: &ProtocolError{}},
		{in: "NOT_FOUND", fatal: io.ErrUnexpectedEOF},
		{in: "NOT_FOUND\r\nNOT", want: []replyResult{{r: &Reply{Kind: NotFound}}}, fatal: io.ErrUnexpectedEOF},
		{in: "RESERVED 9 65536\r\n" + x(65536) + "\r\nUSING s\r\n",
			want: []replyResult{{tooBig: &ReplyTooBigError{Kind: Reserved, ID: 9, Size: 65536, Limit: DefaultMaxJobSize}}, using}, fatal: io.EOF},
		{in: "FOUND 9 11\r\n" + x(11) + "XYUSING s\r\n", lim: Limits{MaxJobSize: 10},
			want: []replyResult{{tooBig: &ReplyTooBigError{Kind: Found, ID: 9, Size: 11, Limit: 10}}, using}, fatal: io.EOF},
		{in: "OK 14\r\n---\n- default\n\r\nUSING s\r\n", lim: Limits{MaxYAMLSize: 13},
			want: []replyResult{{tooBig: &ReplyTooBigError{Kind: OK, Size: 14, Limit: 13}}, using}, fatal: io.EOF},
		{in: "OK 14\r\n---\n- default\n\r\nUSING s\r\n", lim: Limits{MaxYAMLSize: 14, MaxJobSize: 1},
			want: []replyResult{{r: &Reply{Kind: OK, Body: []byte("---\n- default\n")}}, using}, fatal: io.EOF},
		{in: "KICKED\r\nKICKED 1\r\n", lim: Limits{MaxLine: 9},
			want: []replyResult{{r: &Reply{Kind: Kicked}}}, fatal: &ProtocolError{}},
	} {
		data := []byte(tc.in)
		for how, rd := range readers(data) {
			got, err := decodeReplies(rd(), tc.lim)
			if !equalReplyResults(got, tc.want) {
				t.Errorf("%s: %s: got %v, want %v", short(tc.in), how, got, tc.want)
			}
			var pe *ProtocolError
			switch f := tc.fatal.(type) {
			case *ProtocolError:
				if !errors.As(err, &pe) || !IsFatal(err) {
					t.Errorf("%s: %s: got %v, want a ProtocolError", short(tc.in), how, err)
				}
			case error:
				if !errors.Is(err, f) || !IsFatal(err) {
					t.Errorf("%s: %s: got %v, want %v", short(tc.in), how, err, f)
				}
			}
		}
	}
}

// TestReplyReaderSticky checks a fatal error stays, and its text.
func TestReplyReaderSticky(t *testing.T) {
	r := NewReplyReader(strings.NewReader("BOGUS 1\r\nDELETED\r\n"), Limits{})
	_, err1 := r.ReadReply()
	_, err2 := r.ReadReply()
	if err1 == nil || err1 != err2 {
		t.Fatalf("got %v then %v", err1, err2)
	}
	if want := `beanstalk: bad reply: unknown reply: "BOGUS 1"`; err1.Error() != want {
		t.Fatalf("got %q, want %q", err1, want)
	}
	if r.Buffered() != len("DELETED\r\n") {
		t.Fatalf("Buffered = %d", r.Buffered())
	}
	if r.Limits().MaxYAMLSize != DefaultMaxYAMLSize {
		t.Fatal(r.Limits())
	}
	boom := errors.New("boom")
	r = NewReplyReader(errReader{boom}, Limits{})
	if _, err := r.ReadReply(); !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), "beanstalk: reading reply: ") {
		t.Fatal(err)
	}
}

func TestReplyKindString(t *testing.T) {
	for k, want := range map[ReplyKind]string{
		BuriedID: "BURIED", Buried: "BURIED", KickedCount: "KICKED", NotIgnored: "NOT_IGNORED",
		0: "ReplyKind(0)", UnknownCommand + 1: "ReplyKind(26)",
	} {
		if got := k.String(); got != want {
			t.Errorf("%d: got %q, want %q", k, got, want)
		}
	}
}

func TestErrors(t *testing.T) {
	if IsFatal(nil) || IsFatal(errBadArgs) || IsFatal(fmt.Errorf("x: %w", errBadArgs)) ||
		IsFatal(&ReplyTooBigError{}) || !IsFatal(io.EOF) || !IsFatal(&ProtocolError{}) {
		t.Error("IsFatal")
	}
	if got := errBadName.Error(); got != "beanstalk: BAD_FORMAT: invalid tube name" {
		t.Error(got)
	}
	e := &ReplyTooBigError{Kind: Reserved, ID: 1, Size: 70000, Limit: 65535}
	if got := e.Error(); got != "beanstalk: RESERVED body of 70000 bytes exceeds the limit of 65535" {
		t.Error(got)
	}
}
