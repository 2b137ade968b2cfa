package proxy_test

import (
	"bytes"
	"net"
	"testing"
	"time"
)

// BenchmarkBeanstalkServerCycle runs put, reserve and delete over loopback
// against an in-process jobgate: the whole server path, codec and engine.
// The client reuses its buffers, so allocs/op are the server's (the job and
// its body copy).
func BenchmarkBeanstalkServerCycle(b *testing.B) {
	bsBenchCycle(b, bsStartJobgate(b, 0).addr)
}

// bsBenchCycle runs put, reserve and delete against the server at addr.
func bsBenchCycle(b *testing.B, addr string) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	put := []byte("put 0 0 60 100\r\n" + string(bytes.Repeat([]byte("x"), 100)) + "\r\n")
	reserve := []byte("reserve\r\n")
	buf := make([]byte, 4096)
	del := make([]byte, 0, 64)
	// roundTrip sends req and reads until the reply ends in "\r\n" and is
	// at least min bytes long.
	roundTrip := func(req []byte, min int) []byte {
		if _, err := nc.Write(req); err != nil {
			b.Fatal(err)
		}
		n := 0
		for n < min || !bytes.HasSuffix(buf[:n], []byte("\r\n")) {
			k, err := nc.Read(buf[n:])
			if err != nil {
				b.Fatal(err)
			}
			n += k
		}
		return buf[:n]
	}
	nc.SetDeadline(time.Now().Add(10 * time.Minute))
	b.ReportAllocs()
	for b.Loop() {
		r := roundTrip(put, len("INSERTED 1\r\n"))
		if !bytes.HasPrefix(r, []byte("INSERTED ")) {
			b.Fatalf("put: %q", r)
		}
		del = append(append(append(del[:0], "delete "...), r[len("INSERTED "):len(r)-2]...), "\r\n"...)
		if r = roundTrip(reserve, len("RESERVED 1 100\r\n")+102); !bytes.HasPrefix(r, []byte("RESERVED ")) {
			b.Fatalf("reserve: %q", r)
		}
		if r = roundTrip(del, len("DELETED\r\n")); string(r) != "DELETED\r\n" {
			b.Fatalf("delete: %q", r)
		}
	}
}
