package proxy

import (
	"bufio"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/jobserver/gearman"
)

// TestGearmanDifferential sends the same random sequences of binary
// requests (valid, for unknown jobs, and malformed) over four connections
// each to jobgate and to a real gearmand, and requires every connection to
// receive the same packets in the same order, with job handles masked.
//
// Many requests have no reply, and a request on one connection makes
// packets appear on others (NOOP, WORK_* forwarded to clients). So after
// each step every connection of both servers sends an ECHO_REQ with a
// payload unique to the step and is read up to its ECHO_RES: what came
// before is that connection's output for the step. The stepping connection
// goes first, so the step is fully handled before the others are asked.
// An admin connection interleaves admin commands (gdGen.adminCommand) with the
// binary steps. Nothing depends on time: CAN_DO_TIMEOUTs and future epochs
// are far beyond the test's run.
//
// gearmand runs with --worker-wakeup=1: jobgate wakes one sleeping worker
// per new job, round robin, not all of them (issue 4), which is that mode.
// Seeds alternate between the event loop and the goroutine-per-connection
// server, and every third one limits retries (gearmand --job-retries=2).
//
// Masks (gdServer.token, maskPacket, maskAdmin): job handles; the NUL
// gearmand puts after the handle of a WORK_EXCEPTION turned WORK_FAIL;
// the order of admin listings; file descriptors in "workers"; "version".
//
// Skips, where jobgate differs from gearmand 1.1.20 on purpose or gearmand
// has a bug clients do not rely on; each is explained where the generator
// avoids it (gearman_diff_gen_test.go, and gdRun for the first):
//   - a grab by a worker with jobs waiting in two of its functions
//     (jobgate: highest priority across them, as gearmand 2.0);
//   - CAN_DO for a function the connection already declared;
//   - a 64-byte unique, and an over-long unique in a reduce job;
//   - a future epoch job in a function a worker declares;
//   - closing a connection that waits for a foreground job;
//   - a woken worker leaving a function, or sleeping again, before it
//     grabs; a sleeping worker giving up a function whose jobs it runs;
//   - maxqueue for a function gearmand has not seen; SUBMIT_JOB_SCHED
//     (never sent).
func TestGearmanDifferential(t *testing.T) {
	t.Parallel()
	for seed := range uint64(*gdSeeds) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			retries := 0
			if seed%3 == 2 {
				retries = 2
			}
			subject := startJobgateGearmanServer(t, GearmanConfig{
				Engine:     gearman.Config{HandlePrefix: "H:jobgate", JobRetries: retries},
				Goroutines: seed%2 == 1,
			})
			ref := testutil.StartGearmand(t, "--worker-wakeup=1", fmt.Sprintf("--job-retries=%d", retries))
			gdRun(t, seed, *gdSteps, subject, ref)
		})
	}
}

// gdConns is the number of binary connections per server; any of them may
// act as client and worker.
const gdConns = 4

// gdConn is one connection to one server.
type gdConn struct {
	nc net.Conn
	br *bufio.Reader
}

// gdServer is one side of the comparison: its connections and its handle
// table.
type gdServer struct {
	name   string
	addr   string
	conns  []*gdConn
	admin  *gdConn
	tokens map[string]string // real handle -> H1, H2...
	real   map[string]string // H1, H2... -> real handle
}

func gdDial(t *testing.T, addr string) *gdConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &gdConn{nc: nc, br: bufio.NewReader(nc)}
}

// token returns the masked name of a handle this server issued, naming it
// on first sight. Handles the test made up itself (gdUnknownHandle) stay
// as they are, so they are the same on both sides.
//
// Mask: job handles are H:<host>:<n> on gearmand and H:jobgate:<n> here;
// clients treat them as opaque, so only the order in which they are first
// seen matters, and that must be the same on both servers.
func (s *gdServer) token(h string) string {
	if strings.HasPrefix(h, gdUnknownHandle) || h == "" {
		return h
	}
	if tok, ok := s.tokens[h]; ok {
		return tok
	}
	tok := fmt.Sprintf("H%d", len(s.tokens)+1)
	s.tokens[h] = tok
	s.real[tok] = h
	return tok
}

// unmask turns the test's view of an argument (a token) into what this
// server must be sent.
func (s *gdServer) unmask(arg string) string {
	if h, ok := s.real[arg]; ok {
		return h
	}
	return arg
}

// gdHandleArg reports whether the first argument of a reply of type typ is
// a job handle.
func gdHandleArg(typ codec.Type) bool {
	switch typ {
	case codec.JobCreated, codec.JobAssign, codec.JobAssignUniq, codec.JobAssignAll,
		codec.WorkStatus, codec.WorkComplete, codec.WorkFail, codec.WorkException,
		codec.WorkData, codec.WorkWarning, codec.StatusRes:
		return true
	}
	return false
}

// maskPacket describes a reply with its handle masked.
func (s *gdServer) maskPacket(p *codec.Packet) gdPacket {
	out := gdPacket{typ: p.Type}
	for i, a := range p.Args {
		arg := string(a)
		if i == 0 && gdHandleArg(p.Type) {
			// Mask: gearmand sends a WORK_EXCEPTION as WORK_FAIL to clients
			// without the exceptions option with a NUL after the handle,
			// a known bug jobgate does not copy (protocols/README.md).
			if p.Type == codec.WorkFail && s.name == "gearmand" {
				arg = strings.TrimSuffix(arg, "\x00")
			}
			arg = s.token(arg)
		}
		out.args = append(out.args, arg)
	}
	return out
}

// gdPacket is a reply as compared: its type and masked arguments, or eof.
type gdPacket struct {
	typ  codec.Type
	args []string
	eof  bool
}

func (p gdPacket) String() string {
	if p.eof {
		return "<closed>"
	}
	var sb strings.Builder
	sb.WriteString(p.typ.String())
	for _, a := range p.args {
		fmt.Fprintf(&sb, " %q", a)
	}
	return sb.String()
}

// gdRequest is one step: raw bytes (with tokens still to unmask) or a
// packet, sent on one connection.
type gdRequest struct {
	conn  int
	typ   codec.Type
	args  []string
	raw   string // sent as is when set
	fatal bool   // both servers close the connection on it
	close bool   // the test closes the connection and opens a new one
	admin string // an admin command line for the admin connection instead
}

func (r gdRequest) String() string {
	switch {
	case r.admin != "":
		return fmt.Sprintf("admin: %q", r.admin)
	case r.close:
		return fmt.Sprintf("conn %d: close and reconnect", r.conn)
	case r.raw != "":
		return fmt.Sprintf("conn %d: raw %q", r.conn, r.raw)
	}
	return fmt.Sprintf("conn %d: %s", r.conn, gdPacket{typ: r.typ, args: r.args})
}

// gdOpen connects to subject (jobgate) and ref (gearmand), gdConns
// connections and an admin one each, closed when the test ends (with
// those do opens again).
func gdOpen(t *testing.T, subject, ref string) []*gdServer {
	servers := []*gdServer{{name: "jobgate", addr: subject}, {name: "gearmand", addr: ref}}
	for _, s := range servers {
		s.tokens, s.real = map[string]string{}, map[string]string{}
		for range gdConns {
			s.conns = append(s.conns, gdDial(t, s.addr))
		}
		s.admin = gdDial(t, s.addr)
	}
	t.Cleanup(func() {
		for _, s := range servers {
			for _, c := range s.conns {
				c.nc.Close()
			}
			s.admin.nc.Close()
		}
	})
	return servers
}

// gdRun runs steps random requests of seed against subject (jobgate) and
// ref (gearmand) and fails at the first step where a connection's masked
// output differs, with the requests that led there.
func gdRun(t *testing.T, seed uint64, steps int, subject, ref string) {
	servers := gdOpen(t, subject, ref)
	g := newGdGen(rand.New(rand.NewPCG(seed, 4730)))
	var history []string
	fail := func(step int, format string, a ...any) {
		t.Helper()
		if len(history) > 25 {
			history = history[len(history)-25:]
		}
		t.Fatalf("seed %d step %d, last requests:\n%s\n%s", seed, step,
			strings.Join(history, "\n"), fmt.Sprintf(format, a...))
	}
	for step := range steps {
		req := g.next()
		if skip := g.precheck(req); skip != nil {
			// Some requests are left out depending on the jobs queued
			// (see gdGen.precheck); "status", compared too, tells.
			history = append(history, "admin: \"status\\n\" (a check)")
			var replies []string
			for _, s := range servers {
				got, err := s.adminDo("status\n")
				if err != nil {
					fail(step, "%s: %v", s.name, err)
				}
				replies = append(replies, got)
			}
			if replies[0] != replies[1] {
				fail(step, "admin reply differs:\njobgate:  %q\ngearmand: %q", replies[0], replies[1])
			}
			if skip(replies[0]) {
				continue
			}
		}
		history = append(history, req.String())
		outs := make([][][]gdPacket, len(servers)) // server, conn, packets
		var replies []string                       // admin replies
		for i, s := range servers {
			o, reply, err := s.do(req, step)
			if err != nil {
				fail(step, "%s: %v", s.name, err)
			}
			outs[i] = o
			replies = append(replies, reply)
		}
		if *gdTrace {
			if req.admin != "" {
				t.Logf("%d %s -> %q %v", step, req, replies[0], outs[0])
			} else {
				t.Logf("%d %s -> %v", step, req, outs[0])
			}
		}
		if replies[0] != replies[1] {
			fail(step, "admin reply differs:\njobgate:  %q\ngearmand: %q", replies[0], replies[1])
		}
		for c := range gdConns {
			if !slices.EqualFunc(outs[0][c], outs[1][c], gdPacketEqual) {
				fail(step, "conn %d output differs:\njobgate:  %v\ngearmand: %v\n(every connection, jobgate: %v; gearmand: %v)",
					c, outs[0][c], outs[1][c], outs[0], outs[1])
			}
		}
		g.saw(req, replies[0], outs[0])
	}
}

func gdPacketEqual(a, b gdPacket) bool {
	return a.typ == b.typ && a.eof == b.eof && slices.Equal(a.args, b.args)
}

// do sends req and collects every connection's output for the step, and
// the reply of an admin command.
func (s *gdServer) do(req gdRequest, step int) (outs [][]gdPacket, reply string, err error) {
	outs = make([][]gdPacket, gdConns)
	deadline := time.Now().Add(5 * time.Second)
	if req.admin != "" {
		// The reply tells the command was handled, so what it sent to the
		// binary connections (cancel job: WORK_FAIL) is queued ahead of
		// their ECHOs.
		if reply, err = s.adminDo(req.admin); err != nil {
			return nil, "", err
		}
		for i := range gdConns {
			out, err := s.sync(i, fmt.Sprintf("sync-%d-%d", step, i), deadline)
			if err != nil {
				return nil, "", err
			}
			outs[i] = out
		}
		return outs, reply, nil
	}
	c := s.conns[req.conn]
	_ = c.nc.SetDeadline(deadline)
	switch {
	case req.close:
		c.nc.Close()
		if err := s.waitConns(gdConns - 1); err != nil {
			return nil, "", err
		}
	case req.raw != "":
		if _, err := c.nc.Write([]byte(req.raw)); err != nil {
			return nil, "", err
		}
	default:
		args := make([][]byte, len(req.args))
		for i, a := range req.args {
			args[i] = []byte(s.unmask(a))
		}
		if _, err := c.nc.Write(codec.AppendPacket(nil, codec.Req, req.typ, args...)); err != nil {
			return nil, "", err
		}
	}
	if req.fatal {
		// Both servers close the connection: read to its end (with a
		// deadline), then open a new one once the server has let go of
		// the old one, so what the close causes is seen below.
		for {
			p, err := readPacket(c.br)
			if err != nil {
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					return nil, "", fmt.Errorf("conn %d: the server did not close the connection", req.conn)
				}
				outs[req.conn] = append(outs[req.conn], gdPacket{eof: true})
				break
			}
			outs[req.conn] = append(outs[req.conn], s.maskPacket(p))
		}
		c.nc.Close()
		if err := s.waitConns(gdConns - 1); err != nil {
			return nil, "", err
		}
	}
	if req.close || req.fatal {
		nc, err := net.DialTimeout("tcp", s.addr, 5*time.Second)
		if err != nil {
			return nil, "", err
		}
		s.conns[req.conn] = &gdConn{nc: nc, br: bufio.NewReader(nc)}
	}
	// The stepping connection first: once its ECHO comes back, the step
	// has been handled and whatever it sent elsewhere is queued ahead of
	// the other connections' ECHOs.
	order := []int{req.conn}
	for i := range gdConns {
		if i != req.conn {
			order = append(order, i)
		}
	}
	for _, i := range order {
		out, err := s.sync(i, fmt.Sprintf("sync-%d-%d", step, i), deadline)
		if err != nil {
			return nil, "", err
		}
		outs[i] = append(outs[i], out...)
	}
	return outs, "", nil
}

// sync sends an ECHO_REQ on connection i and returns what arrives before
// its ECHO_RES.
func (s *gdServer) sync(i int, payload string, deadline time.Time) ([]gdPacket, error) {
	c := s.conns[i]
	_ = c.nc.SetDeadline(deadline)
	if _, err := c.nc.Write(codec.AppendPacket(nil, codec.Req, codec.EchoReq, []byte(payload))); err != nil {
		return nil, fmt.Errorf("conn %d: %w", i, err)
	}
	var out []gdPacket
	for {
		p, err := readPacket(c.br)
		if err != nil {
			return nil, fmt.Errorf("conn %d: waiting for ECHO_RES %s after %v: %w", i, payload, out, err)
		}
		if p.Type == codec.EchoRes && string(p.Args[0]) == payload {
			return out, nil
		}
		out = append(out, s.maskPacket(p))
	}
}

// waitConns polls the admin "workers" listing, which both servers print
// with a line per connection, until it shows n binary connections plus the
// admin one: a closed connection has then been let go of, its jobs
// requeued.
func (s *gdServer) waitConns(n int) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := s.adminDo("workers\n")
		if err != nil {
			return err
		}
		if strings.Count(got, "\n")-1 == n+1 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the server still lists a closed connection:\n%s", got)
		}
		time.Sleep(time.Millisecond)
	}
}

// adminDo sends an admin line on the admin connection and returns the
// masked reply.
func (s *gdServer) adminDo(line string) (string, error) {
	c := s.admin
	_ = c.nc.SetDeadline(time.Now().Add(5 * time.Second))
	if h, ok := strings.CutPrefix(line, "cancel job "); ok {
		line = "cancel job " + s.unmask(strings.TrimRight(h, "\r\n")) + "\n"
	}
	if _, err := c.nc.Write([]byte(line)); err != nil {
		return "", err
	}
	got, err := readText(c.br)
	if err != nil {
		return got, err
	}
	return s.maskAdmin(line, got), nil
}

// Flags to search further than the default run, and to see each step
// (the trace is what gearman_diff_replay_test.go replays):
//
//	go test -race -run TestGearmanDifferential ./proxy -gearman-diff-seeds=200 -gearman-diff-steps=1500
//	go test -run 'TestGearmanDifferential/^7$' ./proxy -v -gearman-diff-trace
var (
	gdSeeds = flag.Int("gearman-diff-seeds", 16, "seeds of TestGearmanDifferential")
	gdSteps = flag.Int("gearman-diff-steps", 500, "requests per seed of TestGearmanDifferential")
	gdTrace = flag.Bool("gearman-diff-trace", false, "log every step of TestGearmanDifferential")
)
