package connlimit

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobgate/jobgate/metrics"
)

// floodServer is a Listener on 127.0.0.1:0 whose admitted connections arrive
// on accepted, and whose rejections are recorded.
type floodServer struct {
	l        *Listener
	accepted chan net.Conn

	mu       sync.Mutex
	rejected []string // "ip reason"
}

func newFloodServer(t *testing.T, o Options) *floodServer {
	t.Helper()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &floodServer{accepted: make(chan net.Conn, 100)}
	o.OnReject = func(a net.Addr, r Reason) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.rejected = append(s.rejected, a.(*net.TCPAddr).IP.String()+" "+r.String())
	}
	s.l = NewListener(raw, o)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := s.l.Accept()
			if err != nil {
				return
			}
			s.accepted <- c
		}
	}()
	t.Cleanup(func() {
		s.l.Close()
		<-done
		for {
			select {
			case c := <-s.accepted:
				c.Close()
			default:
				return
			}
		}
	})
	return s
}

// dial connects from the loopback address from (Linux routes all of
// 127/8 to lo) and waits for the outcome: the server's side of an admitted
// connection, or nil and what the client read before EOF for a refused one.
func (s *floodServer) dial(t *testing.T, from string) (server net.Conn, refusal string) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", s.l.Addr().String())
	if err != nil {
		t.Fatalf("dial from %s: %v", from, err)
	}
	t.Cleanup(func() { c.Close() })
	type readResult struct {
		data string
		err  error
	}
	read := make(chan readResult, 1)
	go func() {
		b, err := io.ReadAll(c)
		read <- readResult{string(b), err}
	}()
	select {
	case sc := <-s.accepted:
		if sc.RemoteAddr().String() != c.LocalAddr().String() {
			t.Fatalf("accepted %v, dialled from %v", sc.RemoteAddr(), c.LocalAddr())
		}
		return sc, ""
	case r := <-read:
		if r.err != nil && !errors.Is(r.err, net.ErrClosed) {
			// A reset is as good as a close for a refused client.
			return nil, r.data + "<" + r.err.Error() + ">"
		}
		return nil, r.data + "<EOF>"
	case <-time.After(10 * time.Second):
		t.Fatalf("dial from %s: neither accepted nor refused", from)
		return nil, ""
	}
}

func (s *floodServer) rejections() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.rejected...)
}

func TestFloodPerIPAndTotal(t *testing.T) {
	s := newFloodServer(t, Options{MaxConns: 5, MaxPerIP: 2, Reject: func(c net.Conn, r Reason) {
		io.WriteString(c, "OUT_OF_MEMORY\r\n")
	}})
	var held []net.Conn
	expect := func(from string, admitted bool) {
		t.Helper()
		sc, refusal := s.dial(t, from)
		switch {
		case admitted && sc == nil:
			t.Fatalf("from %s: refused (%q), want admitted", from, refusal)
		case !admitted && sc != nil:
			t.Fatalf("from %s: admitted, want refused", from)
		case !admitted && refusal != "OUT_OF_MEMORY\r\n<EOF>":
			t.Fatalf("from %s: client read %q", from, refusal)
		}
		if sc != nil {
			held = append(held, sc)
		}
	}
	// One address floods: two in, the rest out.
	expect("127.0.0.1", true)
	expect("127.0.0.1", true)
	expect("127.0.0.1", false)
	expect("127.0.0.1", false)
	// Others get their share until the total of 5 is reached.
	expect("127.0.0.2", true)
	expect("127.0.0.2", true)
	expect("127.0.0.3", true)
	expect("127.0.0.3", false) // total cap first, though .3 has room
	expect("127.0.0.4", false)

	if got := s.l.Open(); got != 5 {
		t.Errorf("Open = %d, want 5", got)
	}
	if got := s.l.OpenFrom(netip.MustParseAddr("127.0.0.2")); got != 2 {
		t.Errorf("OpenFrom(127.0.0.2) = %d, want 2", got)
	}
	want := []string{
		"127.0.0.1 max_connections_per_ip", "127.0.0.1 max_connections_per_ip",
		"127.0.0.3 max_connections", "127.0.0.4 max_connections",
	}
	if got := s.rejections(); !equal(got, want) {
		t.Errorf("rejections %q, want %q", got, want)
	}

	// Closing frees the slot, once however often it is closed.
	held[0].Close()
	held[0].Close()
	if got := s.l.OpenFrom(netip.MustParseAddr("127.0.0.1")); got != 1 {
		t.Errorf("OpenFrom(127.0.0.1) after a close = %d, want 1", got)
	}
	expect("127.0.0.1", true)
	expect("127.0.0.1", false)

	// A reload lowering the caps keeps open connections and refuses new ones.
	s.l.SetLimits(10, 1)
	expect("127.0.0.4", true)
	expect("127.0.0.4", false)
	expect("127.0.0.2", false)
	if got := s.l.Open(); got != 6 {
		t.Errorf("Open = %d, want 6", got)
	}
	for _, c := range held {
		c.Close()
	}
	if got := s.l.Open(); got != 0 {
		t.Errorf("Open after closing all = %d, want 0", got)
	}
}

// TestFloodCloseOnly: without Reject a refused client just sees the
// connection end.
func TestFloodCloseOnly(t *testing.T) {
	s := newFloodServer(t, Options{MaxConns: 1})
	if sc, _ := s.dial(t, "127.0.0.1"); sc == nil {
		t.Fatal("first connection refused")
	}
	for range 3 {
		sc, refusal := s.dial(t, "127.0.0.5")
		if sc != nil || (refusal != "<EOF>" && refusal[0] != '<') {
			t.Fatalf("over the cap: admitted %v, read %q", sc != nil, refusal)
		}
	}
	if got := len(s.rejections()); got != 3 {
		t.Errorf("%d rejections counted, want 3", got)
	}
}

// TestRejectingBounded: with every Reject slot busy, further refusals close
// at once instead of queueing goroutines.
func TestRejectingBounded(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 10)
	s := newFloodServer(t, Options{MaxConns: 1, MaxRejecting: 1, Reject: func(c net.Conn, r Reason) {
		entered <- struct{}{}
		<-release
		io.WriteString(c, "late\r\n")
	}})
	defer close(release)
	if sc, _ := s.dial(t, "127.0.0.1"); sc == nil {
		t.Fatal("first connection refused")
	}
	// The first refusal occupies the only Reject slot (its client is left
	// waiting); dial it without waiting for the outcome.
	c, err := net.Dial("tcp", s.l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	<-entered
	_, refusal := s.dial(t, "127.0.0.1")
	if refusal != "<EOF>" && refusal[0] != '<' {
		t.Errorf("with the Reject slot busy the client read %q, want a bare close", refusal)
	}
}

// TestFloodConcurrent dials 50 connections at once from five loopback
// addresses: exactly the caps' worth are admitted, whatever the order.
func TestFloodConcurrent(t *testing.T) {
	var opened, closed atomic.Int32
	s := newFloodServer(t, Options{MaxConns: 12, MaxPerIP: 3,
		OnOpen: func() { opened.Add(1) }, OnClose: func() { closed.Add(1) }})
	const perAddr, addrs = 10, 5
	refused := make(chan struct{}, perAddr*addrs)
	var dialed sync.WaitGroup
	for a := range addrs {
		for range perAddr {
			dialed.Go(func() {
				d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(10+a))}}
				c, err := d.Dial("tcp", s.l.Addr().String())
				if err != nil {
					t.Errorf("dial: %v", err)
					return
				}
				t.Cleanup(func() { c.Close() })
				go func() {
					io.ReadAll(c) // returns for a refused client; an admitted one waits for cleanup
					refused <- struct{}{}
				}()
			})
		}
	}
	dialed.Wait()
	var held []net.Conn
	for range 12 {
		held = append(held, <-s.accepted)
	}
	for range perAddr*addrs - 12 {
		<-refused
	}
	if n := s.l.Open(); n != 12 {
		t.Errorf("Open = %d, want 12", n)
	}
	if n := len(s.rejections()); n != perAddr*addrs-12 {
		t.Errorf("%d rejections, want %d", n, perAddr*addrs-12)
	}
	perIP := map[string]int{}
	for _, c := range held {
		perIP[c.(*Conn).RemoteIP().String()]++
	}
	for ip, n := range perIP {
		if n > 3 {
			t.Errorf("%s has %d connections, cap 3", ip, n)
		}
	}
	for _, c := range held {
		c.Close()
	}
	if opened.Load() != 12 || closed.Load() != 12 {
		t.Errorf("OnOpen %d, OnClose %d; want 12, 12", opened.Load(), closed.Load())
	}
}

func TestReasonStrings(t *testing.T) {
	for r, want := range map[Reason]string{
		ReasonMaxConnections: "max_connections", ReasonMaxPerIP: "max_connections_per_ip",
		ReasonIdle: "idle_timeout", ReasonReadTimeout: "read_timeout",
		ReasonWriteTimeout: "write_timeout", ReasonSlowReader: "slow_reader", 0: "Reason(0)",
	} {
		if r.String() != want {
			t.Errorf("%d.String() = %q, want %q", r, r.String(), want)
		}
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestReasonsMatchMetrics keeps Reason.String in step with the metric
// label constants the wiring passes them to.
func TestReasonsMatchMetrics(t *testing.T) {
	for r, want := range map[Reason]string{
		ReasonMaxConnections: metrics.ReasonMaxConnections, ReasonMaxPerIP: metrics.ReasonMaxPerIP,
		ReasonIdle: metrics.ReasonIdle, ReasonReadTimeout: metrics.ReasonReadTimeout,
		ReasonWriteTimeout: metrics.ReasonWriteTimeout, ReasonSlowReader: metrics.ReasonSlowReader,
	} {
		if r.String() != want {
			t.Errorf("%v: metrics spells it %q", r, want)
		}
	}
}

// TestGroupSharedByListeners: two listeners counting in one Group share
// its caps; a close on either frees a slot for both.
func TestGroupSharedByListeners(t *testing.T) {
	g := NewGroup(1, 0)
	var ls [2]*Listener
	for i := range ls {
		raw, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls[i] = NewListener(raw, Options{Group: g})
		t.Cleanup(func() { ls[i].Close() })
	}
	accepted := make(chan net.Conn, 4)
	for _, l := range ls {
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				accepted <- c
			}
		}()
	}
	c0, err := net.Dial("tcp", ls[0].Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c0.Close()
	first := <-accepted
	c1, err := net.Dial("tcp", ls[1].Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	c1.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c1.Read(make([]byte, 1)); err == nil {
		t.Fatal("the second listener admitted a connection over the shared cap")
	}
	if n := g.Open(); n != 1 {
		t.Fatalf("group counts %d open, want 1", n)
	}
	first.Close()
	if n := g.Open(); n != 0 {
		t.Fatalf("group counts %d open after the close, want 0", n)
	}
	c2, err := net.Dial("tcp", ls[1].Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	select {
	case c := <-accepted:
		c.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("a freed slot did not admit a connection on the other listener")
	}
}
