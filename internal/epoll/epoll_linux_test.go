package epoll

import (
	"syscall"
	"testing"
)

// TestPollerRoundTrip drives a TCP connection taken over with DupConn:
// readiness, raw reads and writes, EAGAIN, and the eventfd wakeup.
func TestPollerRoundTrip(t *testing.T) {
	fd, peer := tcpPair(t)

	p, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ev, err := NewEventFD()
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	if err := p.Add(fd, In|Err, 7); err != nil {
		t.Fatal(err)
	}
	if err := p.Add(ev.FD(), In, -1); err != nil {
		t.Fatal(err)
	}
	var evs [4]syscall.EpollEvent
	if n, err := p.Wait(evs[:], 0); n != 0 || err != nil {
		t.Fatalf("idle wait: %d %v", n, err)
	}
	buf := make([]byte, 16)
	if _, err := Read(fd, buf); err != syscall.EAGAIN {
		t.Fatalf("read with nothing sent: %v", err)
	}

	peer.Write([]byte("ping"))
	n, err := waitSome(p, evs[:])
	if n != 1 || err != nil || evs[0].Fd != 7 || evs[0].Events&In == 0 {
		t.Fatalf("wait: %d %v %+v", n, err, evs[0])
	}
	if n, err := Read(fd, buf); err != nil || string(buf[:n]) != "ping" {
		t.Fatalf("read: %q %v", buf[:n], err)
	}
	if n, err := Write(fd, []byte("pong")); n != 4 || err != nil {
		t.Fatalf("write: %d %v", n, err)
	}
	got := make([]byte, 4)
	if _, err := peer.Read(got); err != nil || string(got) != "pong" {
		t.Fatalf("peer read: %q %v", got, err)
	}

	ev.Signal()
	ev.Signal()
	n, err = waitSome(p, evs[:])
	if n != 1 || err != nil || evs[0].Fd != -1 {
		t.Fatalf("eventfd wait: %d %v %+v", n, err, evs[0])
	}
	ev.Drain()
	if n, err := p.Wait(evs[:], 0); n != 0 || err != nil {
		t.Fatalf("after drain: %d %v", n, err)
	}

	if err := p.Mod(fd, In|Out|Err, 7); err != nil {
		t.Fatal(err)
	}
	if n, _ := waitSome(p, evs[:]); n != 1 || evs[0].Events&Out == 0 {
		t.Fatalf("writable: %d %+v", n, evs[0])
	}
	if err := p.Del(fd); err != nil {
		t.Fatal(err)
	}
	peer.Close()
	if n, _ := p.Wait(evs[:], 0); n != 0 {
		t.Fatalf("event after Del: %+v", evs[0])
	}
	if err := p.Add(fd, In|Err, 7); err != nil {
		t.Fatal(err)
	}
	if n, _ := waitSome(p, evs[:]); n != 1 {
		t.Fatalf("no event for the peer's close")
	}
	if n, err := Read(fd, buf); n != 0 || err != nil {
		t.Fatalf("read after peer close: %d %v", n, err)
	}
}

// waitSome waits without a limit until Wait returns events or an error:
// a signal can end a blocked wait early with none (see waitAsync).
func waitSome(p *Poller, evs []syscall.EpollEvent) (int, error) {
	for {
		n, err := p.Wait(evs, -1)
		if n != 0 || err != nil {
			return n, err
		}
	}
}
