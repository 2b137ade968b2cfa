package proxy_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/testutil"
	engine "github.com/jobgate/jobgate/jobserver/beanstalk"
	"github.com/jobgate/jobgate/proxy"
)

// A transcript is raw bytes sent on numbered connections and the raw bytes
// expected back. Every transcript runs against jobgate and against a real
// beanstalkd, each fresh (ids start at 1), so a transcript that fails on
// the real server describes the wrong behaviour.
type bsTranscript struct {
	name       string
	maxJobSize int // both servers' job size limit; 0 is the default
	steps      []bsStep
}

// bsStep sends bytes on a connection and checks what comes back.
//
// want is the exact reply bytes, one reply or several, except that "{*}"
// matches any run of bytes within a line, "{...}" any bytes at all, and
// "{n}" a decimal number. The
// step reads whole replies (a line, and the body of OK, RESERVED and
// FOUND) until they match want or bsReplyTimeout passes.
type bsStep struct {
	conn  int    // connection number; opened on first use
	send  string // bytes to send
	want  string // expected replies
	none  bool   // expect no reply for a moment (a reserve that waits)
	eof   bool   // expect the server to close the connection
	shut  bool   // half-close (CloseWrite) after sending
	close bool   // close the connection after sending
	retry bool   // resend until want matches (time-driven server state); send holds no put
	drain bool   // put the server in drain mode (no bytes sent)
}

const (
	bsReplyTimeout = 5 * time.Second
	bsQuietPeriod  = 150 * time.Millisecond
)

// bsServer is one server under test.
type bsServer struct {
	name  string
	addr  string
	drain func(t *testing.T)
}

func bsStartJobgate(t testing.TB, maxJobSize int) bsServer {
	t.Helper()
	addr, srv := bsServe(t, proxy.BeanstalkConfig{
		EngineConfig: engine.Config{MaxJobSize: maxJobSize},
	})
	return bsServer{
		name:  "jobgate",
		addr:  addr,
		drain: func(*testing.T) { srv.Engine().SetDraining(true) },
	}
}

func bsStartReal(t testing.TB, maxJobSize int) bsServer {
	t.Helper()
	var flags []string
	if maxJobSize != 0 {
		flags = append(flags, "-z", strconv.Itoa(maxJobSize))
	}
	addr := testutil.StartBeanstalkd(t, flags...)
	return bsServer{name: "beanstalkd", addr: addr, drain: func(t *testing.T) { bsSignalReal(t, addr) }}
}

// bsSignalReal sends SIGUSR1 to the beanstalkd at addr, whose pid its stats
// tell.
func bsSignalReal(t *testing.T, addr string) {
	t.Helper()
	c := bsDial(t, addr)
	defer c.nc.Close()
	c.send(t, "stats\r\n")
	stats := c.readReply(t)
	m := regexp.MustCompile(`\npid: (\d+)\n`).FindStringSubmatch(stats)
	if m == nil {
		t.Fatalf("no pid in stats %q", stats)
	}
	pid, _ := strconv.Atoi(m[1])
	testutil.SignalDrain(t, pid)
	// The signal is asynchronous: wait until stats says draining.
	deadline := time.Now().Add(bsReplyTimeout)
	for {
		c.send(t, "stats\r\n")
		if strings.Contains(c.readReply(t), "\ndraining: true\n") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("beanstalkd did not enter drain mode")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// bsRunTranscripts runs each transcript against both servers, in parallel.
func bsRunTranscripts(t *testing.T, ts []bsTranscript) {
	for _, tr := range ts {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			for _, start := range append([]func(testing.TB, int) bsServer{bsStartJobgate, bsStartJobgateGoroutines, bsStartReal}, bsGatewayStarts...) {
				srv := start(t, tr.maxJobSize)
				t.Run(srv.name, func(t *testing.T) {
					if why := bsGatewaySkip[srv.name+": "+tr.name]; why != "" {
						t.Skip(why)
					}
					bsRun(t, srv, tr.steps)
				})
			}
		})
	}
}

func bsRun(t *testing.T, srv bsServer, steps []bsStep) {
	conns := map[int]*bsConn{}
	defer func() {
		for _, c := range conns {
			c.nc.Close()
		}
	}()
	for i, st := range steps {
		if st.drain {
			srv.drain(t)
			continue
		}
		c := conns[st.conn]
		if c == nil {
			c = bsDial(t, srv.addr)
			conns[st.conn] = c
		}
		where := fmt.Sprintf("step %d (conn %d, send %q)", i, st.conn, st.send)
		if st.retry {
			bsRetry(t, c, st, where)
			continue
		}
		c.send(t, st.send)
		switch {
		case st.shut:
			c.nc.(*net.TCPConn).CloseWrite()
		case st.close:
			c.nc.Close()
			delete(conns, st.conn)
			continue
		}
		switch {
		case st.none:
			c.expectQuiet(t, where)
		case st.eof:
			c.expectEOF(t, where)
		default:
			c.expect(t, st.want, where)
		}
	}
}

// bsRetry resends a step until its reply matches, for state that changes
// with time (TTR, delays) on a real server that does not promise the
// millisecond.
func bsRetry(t *testing.T, c *bsConn, st bsStep, where string) {
	re := bsPattern(st.want)
	deadline := time.Now().Add(bsReplyTimeout)
	for {
		c.send(t, st.send)
		got := ""
		for range strings.Count(st.send, "\r\n") { // one reply per command line
			got += c.readReply(t)
		}
		if re.MatchString(got) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: got %q, want %q", where, got, st.want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// bsPattern turns a want string into an anchored regexp.
func bsPattern(want string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString(`\A`)
	for rest := want; rest != ""; {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			b.WriteString(regexp.QuoteMeta(rest))
			break
		}
		b.WriteString(regexp.QuoteMeta(rest[:i]))
		switch {
		case strings.HasPrefix(rest[i:], "{*}"):
			b.WriteString(`[^\n]*`)
			rest = rest[i+3:]
		case strings.HasPrefix(rest[i:], "{...}"):
			b.WriteString(`[\s\S]*`)
			rest = rest[i+5:]
		case strings.HasPrefix(rest[i:], "{n}"):
			b.WriteString(`\d+`)
			rest = rest[i+3:]
		default:
			b.WriteString(`\{`)
			rest = rest[i+1:]
		}
	}
	b.WriteString(`\z`)
	return regexp.MustCompile(b.String())
}

type bsConn struct {
	nc net.Conn
	br *bufio.Reader
}

func bsDial(t *testing.T, addr string) *bsConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, bsReplyTimeout)
	if err != nil {
		t.Fatal(err)
	}
	return &bsConn{nc: nc, br: bufio.NewReader(nc)}
}

func (c *bsConn) send(t *testing.T, s string) {
	t.Helper()
	if s == "" {
		return
	}
	c.nc.SetWriteDeadline(time.Now().Add(bsReplyTimeout))
	if _, err := io.WriteString(c.nc, s); err != nil {
		t.Fatalf("send %q: %v", s, err)
	}
}

// readReply reads one whole reply: its line and, for OK, RESERVED and
// FOUND, its body and CRLF. It returns "" at a timeout or EOF.
func (c *bsConn) readReply(t *testing.T) string {
	t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(bsReplyTimeout))
	line, err := c.br.ReadString('\n')
	if err != nil {
		return line
	}
	f := strings.Fields(line)
	if len(f) >= 2 && (f[0] == "OK" || f[0] == "RESERVED" || f[0] == "FOUND") {
		n, err := strconv.Atoi(f[len(f)-1])
		if err != nil {
			return line
		}
		body := make([]byte, n+2)
		k, _ := io.ReadFull(c.br, body)
		return line + string(body[:k])
	}
	return line
}

func (c *bsConn) expect(t *testing.T, want, where string) {
	t.Helper()
	re := bsPattern(want)
	got := ""
	for got == "" || !re.MatchString(got) {
		r := c.readReply(t)
		if r == "" || len(got) > len(want)+64<<10 {
			t.Fatalf("%s:\n got %q\nwant %q", where, got, want)
		}
		got += r
	}
}

func (c *bsConn) expectQuiet(t *testing.T, where string) {
	t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(bsQuietPeriod))
	if b, err := c.br.Peek(1); err == nil {
		t.Fatalf("%s: got %q, want no reply yet", where, b)
	}
	c.br = bufio.NewReader(c.nc) // a timed-out bufio.Reader keeps the error
}

func (c *bsConn) expectEOF(t *testing.T, where string) {
	t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(bsReplyTimeout))
	b, err := c.br.ReadByte()
	if err == nil {
		t.Fatalf("%s: got byte %q, want the connection closed", where, b)
	}
	if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("%s: got %v, want EOF", where, err)
	}
}
