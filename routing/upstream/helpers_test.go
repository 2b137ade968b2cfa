package upstream

import (
	"net"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/routing"
)

// wait is the generous deadline for anything that crosses a real socket.
const wait = 10 * time.Second

// process is a server this test started itself, so that it can kill it
// mid-request and restart it on the same port.
type process struct {
	t      *testing.T
	cmd    *exec.Cmd
	exited chan struct{}
	addr   string
}

// gearmandArgs and beanstalkdArgs are the command lines of the servers,
// as internal/testutil runs them.
func gearmandArgs(port int) []string {
	return []string{"--listen=127.0.0.1", "--port=" + strconv.Itoa(port), "--threads=0", "--log-file=none"}
}

func beanstalkdArgs(port int) []string {
	return []string{"-l", "127.0.0.1", "-p", strconv.Itoa(port)}
}

// startProcess runs name on port and waits until it accepts connections.
// It is killed (by PID) when the test ends, if still running.
func startProcess(t *testing.T, name string, port int, args func(int) []string) *process {
	t.Helper()
	path := testutil.RequireBinary(t, name)
	p := &process{t: t, exited: make(chan struct{}), addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
	p.cmd = exec.Command(path, args(port)...)
	p.cmd.SysProcAttr = testutil.ChildAttr()
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(p.kill)
	deadline := time.Now().Add(wait)
	for {
		c, err := net.DialTimeout("tcp", p.addr, time.Second)
		if err == nil {
			c.Close()
			checkOwnPID(t, name, p)
			return p
		}
		select {
		case <-p.exited:
			t.Fatalf("%s exited before listening on %s", name, p.addr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not listening on %s: %v", name, p.addr, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// checkOwnPID makes sure the listener on p.addr belongs to the process
// just started, not to another one that took the port first.
func checkOwnPID(t *testing.T, name string, p *process) {
	t.Helper()
	_, port, _ := net.SplitHostPort(p.addr)
	n, _ := strconv.Atoi(port)
	if err := testutil.CheckListener(n, p.cmd.Process.Pid); err != nil {
		t.Fatalf("%s on %s: %v", name, p.addr, err)
	}
}

// kill stops the process at once with SIGKILL, by its PID, and waits for
// it to be gone.
func (p *process) kill() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// packets collects what a Gearman session delivers, copied, and its end.
type packets struct {
	ch     chan gearman.Packet
	closed chan error
	once   sync.Once
}

func newPackets() *packets {
	return &packets{ch: make(chan gearman.Packet, 100), closed: make(chan error, 1)}
}

func (c *packets) packet(p *gearman.Packet) { c.ch <- p.Clone() }

func (c *packets) lost(err error) {
	c.once.Do(func() { c.closed <- err })
}

// next returns the next packet, failing the test after the deadline.
func (c *packets) next(t *testing.T) gearman.Packet {
	t.Helper()
	select {
	case p := <-c.ch:
		return p
	case err := <-c.closed:
		t.Fatalf("session ended waiting for a packet: %v", err)
	case <-time.After(wait):
		t.Fatal("no packet")
	}
	return gearman.Packet{}
}

// expect returns the next packet, which must be of type want.
func (c *packets) expect(t *testing.T, want gearman.Type) gearman.Packet {
	t.Helper()
	p := c.next(t)
	if p.Type != want {
		t.Fatalf("got %v, want %v", &p, want)
	}
	return p
}

// end waits for the session to end and returns why.
func (c *packets) end(t *testing.T) error {
	t.Helper()
	select {
	case err := <-c.closed:
		return err
	case <-time.After(wait):
		t.Fatal("session did not end")
	}
	return nil
}

// eventsDiscard returns Gearman events that drop everything.
func eventsDiscard() routing.GearmanEvents {
	return routing.GearmanEvents{Packet: func(*gearman.Packet) {}}
}

// connSet holds connections a test server accepted, to close them all when
// the test ends (t.Cleanup may not be called once the test is over, which
// an accept loop cannot know).
type connSet struct {
	mu    sync.Mutex
	conns []net.Conn
	done  bool
}

func (s *connSet) add(c net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		c.Close()
		return
	}
	s.conns = append(s.conns, c)
}

func (s *connSet) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.done = true
	for _, c := range s.conns {
		c.Close()
	}
}
