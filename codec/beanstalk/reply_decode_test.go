package beanstalk

import (
	"bytes"
	"errors"
	"testing"
)

// TestDecodeReplyTable decodes every reply of replyTable with DecodeReply,
// offered its bytes one more at a time as an event loop would: nothing
// until the reply is whole, then exactly the reply and its length.
func TestDecodeReplyTable(t *testing.T) {
	lim := Limits{}.WithDefaults()
	for _, tc := range replyTable {
		data := []byte(tc.wire)
		for end := 0; end < len(data); end++ {
			var p Reply
			if n, err := DecodeReply(data[:end], lim, &p); n != 0 || err != nil {
				t.Fatalf("%s: %d bytes of %d: n %d, %v", short(tc.wire), end, len(data), n, err)
			}
			if end > 300 && end < len(data)-20 {
				end = len(data) - 20 // a long body: its end is what matters
			}
		}
		var p Reply
		n, err := DecodeReply(append(data, "USING s\r\n"...), lim, &p)
		if err != nil || n != len(data) {
			t.Fatalf("%s: n %d, %v", short(tc.wire), n, err)
		}
		if p.Kind != tc.r.Kind || p.ID != tc.r.ID || p.Count != tc.r.Count ||
			!bytes.Equal(p.Tube, tc.r.Tube) || !bytes.Equal(p.Body, tc.r.Body) {
			t.Fatalf("%s: got %+v", short(tc.wire), p)
		}
	}
}

// TestDecodeReplyErrors: a body over the limit gives its line's length and
// the size to drop; what is not a reply is a *ProtocolError.
func TestDecodeReplyErrors(t *testing.T) {
	lim := Limits{MaxJobSize: 4}.WithDefaults()
	var p Reply
	n, err := DecodeReply([]byte("RESERVED 9 5\r\nab"), lim, &p)
	var big *ReplyTooBigError
	if !errors.As(err, &big) || n != len("RESERVED 9 5\r\n") || big.ID != 9 || big.Size != 5 {
		t.Fatalf("too big: n %d, %v", n, err)
	}
	for _, bad := range []string{"HELLO\r\n", "RESERVED 1 3\r\nabcXY", "INSERTED\r\n", string(bytes.Repeat([]byte("A"), lim.MaxLine))} {
		var pe *ProtocolError
		if _, err := DecodeReply([]byte(bad), lim, &p); !errors.As(err, &pe) {
			t.Errorf("%q: %v, want a *ProtocolError", short(bad), err)
		}
	}
}

// decodeRepliesAt decodes data with DecodeReply as an event loop would,
// skipping the body of a reply over the limit, until a fatal error (which
// it returns) or until data holds no whole reply (nil).
func decodeRepliesAt(data []byte, lim Limits) ([]replyResult, error) {
	lim = lim.WithDefaults()
	var out []replyResult
	for {
		var p Reply
		n, err := DecodeReply(data, lim, &p)
		var tb *ReplyTooBigError
		switch {
		case errors.As(err, &tb):
			// The ReplyReader reports it once it has dropped the body.
			skip := n + int(tb.Size) + 2
			if skip > len(data) {
				return out, nil
			}
			out = append(out, replyResult{tooBig: tb})
			data = data[skip:]
		case err != nil:
			return out, err
		case n == 0:
			return out, nil
		default:
			out = append(out, replyResult{r: cloneReply(&p)})
			data = data[n:]
		}
	}
}

// FuzzDecodeReply checks DecodeReply against the ReplyReader on the same
// bytes: the same replies in the same order, and a *ProtocolError exactly
// when the reader ends in one. (Their texts may quote the line differently:
// the reader rebuilds it.)
func FuzzDecodeReply(f *testing.F) {
	for _, s := range replySeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := decodeRepliesAt(data, fuzzReplyLimits)
		want, werr := decodeReplies(bytes.NewReader(data), fuzzReplyLimits)
		var pe, wpe *ProtocolError
		if errors.As(err, &pe) != errors.As(werr, &wpe) {
			t.Fatalf("DecodeReply ended in %v, the ReplyReader in %v", err, werr)
		}
		if err != nil && pe == nil {
			t.Fatalf("DecodeReply ended in %v", err)
		}
		if !equalReplyResults(got, want) {
			t.Fatalf("DecodeReply: %v; ReplyReader: %v", got, want)
		}
	})
}
