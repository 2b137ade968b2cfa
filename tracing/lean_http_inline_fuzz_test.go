package tracing

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"testing"
)

// FuzzReplyComplete: whatever replyComplete calls whole, net/http reads
// as one final reply from those bytes alone, body included, so an inline
// send that reads it cannot wait for more.
func FuzzReplyComplete(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 3\r\n\r\nabc",
		"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\nRetry-After: 1\r\n\r\nbusy",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"HTTP/1.0 204 No Content\r\nContent-Length: 0\r\n\r\nXYZ",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !replyComplete(b) {
			return
		}
		// A reader that fails rather than waits when the bytes run out.
		br := bufio.NewReader(io.MultiReader(bytes.NewReader(b), errReader{}))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			if err == errNoMore {
				t.Fatalf("called whole, but reading its head needs more bytes: %q", b)
			}
			return // a malformed reply net/http refuses: an error, not a wait
		}
		if resp.StatusCode < 200 {
			t.Fatalf("called whole, but the reply is informational: %q", b)
		}
		if _, err := io.ReadAll(resp.Body); err == errNoMore {
			t.Fatalf("called whole, but reading its body needs more bytes: %q", b)
		}
	})
}

var errNoMore = io.ErrNoProgress

// errReader stands for a socket with nothing more to read.
type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errNoMore }
