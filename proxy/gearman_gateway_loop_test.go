//go:build linux

package proxy

import (
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/jobserver/gearman"
)

// Gateway tests of the event-loop path: client connections and their
// plain-TCP upstream sessions served by one epoll loop
// (gearman_gateway_loop.go, gearman_loop_upstream_linux.go).

// loopServed fails the test unless every client connection of srv is
// served by its event loop.
func loopServed(t *testing.T, srv *GearmanServer) {
	t.Helper()
	if srv.loop.Load() == nil {
		t.Fatal("the gateway has no event loop")
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	for c := range srv.conns {
		if c.loop == nil {
			t.Fatal("a gateway connection is served by goroutines")
		}
	}
}

// listenTest starts a TCP server whose connections serve runs; it stops
// with the test.
func listenTest(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := false
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		done = true
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	go func() {
		for {
			nc, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			if done {
				mu.Unlock()
				nc.Close()
				return
			}
			conns = append(conns, nc)
			mu.Unlock()
			go serve(nc)
		}
	}()
	return l.Addr().String()
}

// TestGearmanGatewayLoopUpstreamDies: an upstream that dies mid-request
// gets its client an ERROR; the same connection goes on with its other
// upstream and the local engine, and a later request reopens the dead
// backend's session (and fails again, as it dies again).
func TestGearmanGatewayLoopUpstreamDies(t *testing.T) {
	st := startGatewaySetup(t, []string{fakeGearmand(t, 0, codec.SubmitJob), testutil.StartGearmand(t)}, config.Breaker{})
	doomed, fine := st.fnOwnedBy(t, "f", 1), st.fnOwnedBy(t, "f", 2)
	c := dialGW(t, st.addr)
	c.send(codec.SubmitJobBg, fine, "", "0")
	c.expect(codec.JobCreated)
	loopServed(t, st.srv)
	for i := 0; i < 2; i++ {
		var batch []byte
		batch = append(batch, pkt(codec.SubmitJob, doomed, "", "x")...)
		batch = append(batch, pkt(codec.SubmitJobBg, fine, "", "y")...)
		batch = append(batch, pkt(codec.SubmitJobBg, "local.ok", "", "z")...)
		c.write(batch)
		if p := c.expect(codec.Error); string(p.Args[0]) != string(codec.CodeQueueError) || !strings.Contains(string(p.Args[1]), "backend g1") {
			t.Fatalf("round %d: got %v", i, p.String())
		}
		if p := c.expect(codec.JobCreated); !strings.HasPrefix(string(p.Args[0]), "@2:") {
			t.Fatalf("round %d: got %v", i, p.String())
		}
		if p := c.expect(codec.JobCreated); !strings.HasPrefix(string(p.Args[0]), "H:jobgate:") {
			t.Fatalf("round %d: got %v", i, p.String())
		}
	}
	c.quiet()
	if got := st.upstreamStatus(t, 2, fine); !strings.HasPrefix(got, fine+"\t3\t") {
		t.Fatalf("status of %s on backend 2: %q", fine, got)
	}
}

// TestGearmanGatewayLoopStalledUpstreams: one upstream never answers, one
// never reads. Requests to them get ERROR after the I/O timeout (a read
// timeout and a write that would block), and while they wait the loop
// serves other clients, and the same client's other backends.
func TestGearmanGatewayLoopStalledUpstreams(t *testing.T) {
	silent := listenTest(t, func(nc net.Conn) {
		buf := make([]byte, 64<<10)
		for {
			if _, err := nc.Read(buf); err != nil {
				return
			}
		}
	})
	stuck := listenTest(t, func(net.Conn) {}) // accepts, never reads
	const ioTimeout = 1500 * time.Millisecond
	st := startGatewaySetup(t, []string{silent, stuck, testutil.StartGearmand(t)}, config.Breaker{},
		func(b *config.Backend) { b.IOTimeout = ioTimeout })
	fSilent, fStuck, fFine := st.fnOwnedBy(t, "f", 1), st.fnOwnedBy(t, "f", 2), st.fnOwnedBy(t, "f", 3)

	a := dialGW(t, st.addr) // waits on the silent upstream
	b := dialGW(t, st.addr) // waits on the stuck one
	start := time.Now()
	a.send(codec.SubmitJobBg, fSilent, "", "x")
	// More than the socket buffers take. Written on its own goroutine:
	// the gateway takes its time to read 16 MiB (under -race, seconds),
	// and the client below must not wait for that to be sent.
	big := strings.Repeat("d", 16<<20)
	bWrote := make(chan error, 1)
	go func() {
		_, err := b.nc.Write(append(pkt(codec.SubmitJobBg, fStuck, "", big), pkt(codec.EchoReq, "after")...))
		bWrote <- err
	}()

	// Meanwhile: another client, served through the loop.
	o := dialGW(t, st.addr)
	o.send(codec.SubmitJobBg, fFine, "", "y")
	o.expect(codec.JobCreated)
	o.send(codec.SubmitJobBg, "local.f", "", "z")
	o.expect(codec.JobCreated)
	served := time.Since(start)
	loopServed(t, st.srv)

	if err := <-bWrote; err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		c    *gwClient
		name string
	}{{a, "silent"}, {b, "stuck"}} {
		p := w.c.expect(codec.Error)
		if !strings.Contains(string(p.Args[1]), "did not answer in time") {
			t.Fatalf("%s upstream: %v", w.name, p.String())
		}
	}
	if waited := time.Since(start); waited < ioTimeout || served >= ioTimeout {
		t.Fatalf("the stalled requests failed after %v, the other client was served after %v (I/O timeout %v)", waited, served, ioTimeout)
	}
	b.expect(codec.EchoRes) // request order kept
	// Both connections go on; their next requests reopen the sessions.
	a.send(codec.SubmitJobBg, fFine, "", "1")
	a.expect(codec.JobCreated)
	b.send(codec.SubmitJobBg, fFine, "", "2")
	b.expect(codec.JobCreated)
}

// TestGearmanGatewayLoopManyClients: many clients, each with sessions on
// two upstreams, pipelining requests across them; every reply comes back
// in request order, and the gateway holds no goroutine per client or per
// upstream session.
func TestGearmanGatewayLoopManyClients(t *testing.T) {
	// A generous dial timeout: many connections at once can overflow
	// gearmand's listen backlog, and a dropped SYN is sent again after 1s.
	st := startGatewaySetup(t, []string{testutil.StartGearmand(t), testutil.StartGearmand(t)}, config.Breaker{},
		func(b *config.Backend) { b.DialTimeout = 5 * time.Second })
	f1, f2 := st.fnOwnedBy(t, "f", 1), st.fnOwnedBy(t, "f", 2)
	base := runtime.NumGoroutine()
	const clients, rounds = 64, 5
	cs := make([]*gwClient, clients)
	for i := range cs {
		cs[i] = dialGW(t, st.addr)
	}
	var batch []byte
	batch = append(batch, pkt(codec.SubmitJobBg, f1, "", "a")...)
	batch = append(batch, pkt(codec.EchoReq, "e")...)
	batch = append(batch, pkt(codec.SubmitJobBg, f2, "", "b")...)
	batch = append(batch, pkt(codec.SubmitJobBg, "local.f", "", "c")...)
	check := func(i, r int, c *gwClient) {
		t.Helper()
		for j, want := range []string{"@1:", "e", "@2:", "H:jobgate:"} {
			p := c.next()
			if !strings.HasPrefix(string(p.Arg(0)), want) {
				t.Fatalf("client %d round %d reply %d: %v, want %s...", i, r, j, p.String(), want)
			}
		}
	}
	for i, c := range cs { // the first round opens the upstream sessions
		c.write(batch)
		check(i, 0, c)
	}
	for r := 1; r < rounds; r++ { // then every client at once
		for _, c := range cs {
			c.write(batch)
		}
		for i, c := range cs {
			check(i, r, c)
		}
	}
	loopServed(t, st.srv)
	// The goroutines that dialled the sessions have ended; what is left is
	// independent of the number of clients (with goroutines, each client
	// would hold two and each upstream session one more).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		n := runtime.NumGoroutine()
		if n <= base+8 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines with %d clients, %d before them", n, clients, base)
		}
	}
	for _, id := range []int{1, 2} {
		fn := map[int]string{1: f1, 2: f2}[id]
		want := fn + "\t" + "320\t" // clients × rounds, none running
		if got := st.upstreamStatus(t, id, fn); !strings.HasPrefix(got, want) {
			t.Fatalf("backend %d: %q, want %q...", id, got, want)
		}
	}
}

// TestGearmanGatewayLoopTLSUpstream: a TLS upstream, whose writes may
// block, is never served from the event loop: a gateway with one serves
// its connections with goroutines, and a reload cannot add one to a
// gateway on the loop.
func TestGearmanGatewayLoopTLSUpstream(t *testing.T) {
	up := []string{testutil.StartGearmand(t), testutil.StartGearmand(t)}
	withTLS := func() *config.Config {
		c := reloadConfig(t, up, "g2") // "moved." goes to g2, over TLS
		c.Backends[1].TLS.Enabled = true
		return c
	}
	addr, srv := startGearmanGateway(t, reloadConfig(t, up, "g1"), gearman.Config{})
	loopRunning(t, addr, srv)
	if _, err := srv.PrepareReload(withTLS(), nil); err == nil || !strings.Contains(err.Error(), "TLS upstream") {
		t.Fatalf("reload adding a TLS upstream: %v", err)
	}
	_, srv = startGearmanGateway(t, withTLS(), gearman.Config{})
	if !srv.cfg.Goroutines {
		t.Fatal("a gateway with a TLS upstream is on the event loop")
	}
	if _, err := srv.PrepareReload(withTLS(), nil); err != nil {
		t.Fatalf("reload of a goroutine gateway: %v", err)
	}
}

// hangingListener returns the address of a listener whose accept queue
// is full, so that connecting to it hangs (the kernel drops the SYNs)
// until the dialler gives up.
func hangingListener(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
	for i := 0; ; i++ { // fill the queue until a dial hangs
		nc, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			return addr
		}
		t.Cleanup(func() { nc.Close() })
		if i == 16 {
			t.Skip("the kernel keeps accepting connections nobody accepts")
		}
	}
}

// TestGearmanGatewayLoopSlowDial: dialling an upstream blocks, so it
// happens off the loop. While one client's submit waits for a dial that
// hangs, other clients are served; then the submit fails over to the
// next backend of the pool.
func TestGearmanGatewayLoopSlowDial(t *testing.T) {
	const dialTimeout = 1500 * time.Millisecond
	st := startGatewaySetup(t, []string{hangingListener(t), testutil.StartGearmand(t)}, config.Breaker{},
		func(b *config.Backend) { b.DialTimeout = dialTimeout })
	fHang, fFine := st.fnOwnedBy(t, "f", 1), st.fnOwnedBy(t, "f", 2)
	a := dialGW(t, st.addr)
	o := dialGW(t, st.addr)
	o.quiet() // connected before a's dial starts
	start := time.Now()
	a.write(append(pkt(codec.SubmitJobBg, fHang, "", "x"), pkt(codec.EchoReq, "after")...))
	o.send(codec.SubmitJobBg, fFine, "", "y")
	o.expect(codec.JobCreated)
	o.send(codec.SubmitJobBg, "local.f", "", "z")
	o.expect(codec.JobCreated)
	served := time.Since(start)
	loopServed(t, st.srv)
	if p := a.expect(codec.JobCreated); !strings.HasPrefix(string(p.Args[0]), "@2:") {
		t.Fatalf("the submit did not fail over: %v", p.String())
	}
	if waited := time.Since(start); waited < dialTimeout || served >= dialTimeout {
		t.Fatalf("the submit was answered after %v, the other client served after %v (dial timeout %v)", waited, served, dialTimeout)
	}
	a.expect(codec.EchoRes) // the connection was read again, in order
}
