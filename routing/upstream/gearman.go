package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/routing"
)

// GearmanConfig configures a Gearman upstream.
type GearmanConfig struct {
	Config
	// Limits bounds what is read from the server (zero fields: the codec's
	// defaults). The handle and unique limits apply to requests only, so
	// they do not constrain the server's answers.
	Limits gearman.Limits
}

// Gearman is an upstream gearmand: a routing.GearmanBackend whose sessions
// are TCP connections to it. It is safe for concurrent use.
type Gearman struct {
	cfg   GearmanConfig
	admin chan struct{} // one slot: the admin or probe connection open (enterAdmin)
}

var _ routing.GearmanBackend = (*Gearman)(nil)

// NewGearman returns the backend for the server at cfg.Addr. It does not
// connect.
func NewGearman(cfg GearmanConfig) (*Gearman, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	return &Gearman{cfg: cfg, admin: make(chan struct{}, 1)}, nil
}

// Addr returns the server's address.
func (g *Gearman) Addr() string { return g.cfg.Addr }

// Open connects and starts a session whose packets go to ev (see
// routing.GearmanEvents). The reader goroutine lives until the connection
// ends.
func (g *Gearman) Open(ctx context.Context, ev routing.GearmanEvents) (routing.GearmanConn, error) {
	if ev.Packet == nil {
		return nil, errors.New("upstream: gearman session without a packet callback")
	}
	nc, err := g.cfg.dial(ctx)
	if err != nil {
		return nil, err
	}
	s := &gearmanSession{cfg: &g.cfg, nc: nc, ev: ev, w: gearman.NewWriter(nc)}
	go s.readLoop(gearman.NewReader(nc, g.cfg.Limits))
	return s, nil
}

// gearmanSession is one connection to gearmand.
//
// Lock order: wmu before mu. The reader goroutine takes only mu, and never
// while it calls the owner's callbacks.
type gearmanSession struct {
	cfg *GearmanConfig
	nc  net.Conn
	ev  routing.GearmanEvents

	wmu sync.Mutex      // serialises writers
	w   *gearman.Writer // guarded by wmu

	quiet atomic.Bool // Close was called: deliver nothing more

	mu          sync.Mutex
	outstanding int       // requests sent whose reply has not come; guarded by mu
	deadline    time.Time // when the replies outstanding are late; guarded by mu
	applied     time.Time // the read deadline set on the socket (none: zero); guarded by mu
	err         error     // why the session ended, first cause only; guarded by mu
}

// expectsReply marks the requests gearmand answers at once (JOB_CREATED,
// NO_JOB/JOB_ASSIGN*, STATUS_RES*, ECHO_RES, OPTION_RES, or an ERROR), and
// isReply the packets that answer them. Only these arm the I/O timeout:
// NOOP and WORK_* come whenever other connections make them happen.
var expectsReply, isReply [gearman.StatusResUnique + 1]bool

func init() {
	for _, t := range []gearman.Type{
		gearman.SubmitJob, gearman.SubmitJobBg, gearman.SubmitJobHigh, gearman.SubmitJobHighBg,
		gearman.SubmitJobLow, gearman.SubmitJobLowBg, gearman.SubmitJobSched, gearman.SubmitJobEpoch,
		gearman.SubmitReduceJob, gearman.SubmitReduceJobBackground,
		gearman.GrabJob, gearman.GrabJobUniq, gearman.GrabJobAll,
		gearman.GetStatus, gearman.GetStatusUnique, gearman.EchoReq, gearman.OptionReq,
	} {
		expectsReply[t] = true
	}
	for _, t := range []gearman.Type{
		gearman.JobCreated, gearman.NoJob, gearman.JobAssign, gearman.JobAssignUniq,
		gearman.JobAssignAll, gearman.StatusRes, gearman.StatusResUnique, gearman.EchoRes,
		gearman.Error, gearman.OptionRes,
	} {
		isReply[t] = true
	}
}

func (s *gearmanSession) Send(p *gearman.Packet) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.failed(); err != nil {
		return err
	}
	direct := wireSize(p) > s.w.Available()
	if s.cfg.IOTimeout > 0 && direct {
		// A packet the buffer cannot take goes (partly) straight to the
		// socket, so Send can block on a stalled server too; one that fits
		// is written by Flush, which sets its own deadline.
		_ = s.nc.SetWriteDeadline(s.cfg.ioDeadline(0))
	}
	counted := p.Type < gearman.Type(len(expectsReply)) && expectsReply[p.Type]
	// A packet that goes straight to the socket can be answered, and the
	// reply read, before WritePacket returns: count it first, or the
	// reply would find nothing to answer and the request would stay
	// outstanding for ever. Its deadline is still armed after the write,
	// which has its own.
	early, first := counted && direct, false
	if early {
		s.mu.Lock()
		s.outstanding++
		first = s.outstanding == 1
		s.mu.Unlock()
	}
	if err := s.w.WritePacket(p.Magic, p.Type, p.Args...); err != nil {
		if errors.Is(err, gearman.ErrInvalidPacket) {
			if early {
				s.mu.Lock()
				if s.outstanding > 0 { // clamped, as in readLoop
					s.outstanding--
				}
				s.mu.Unlock()
			}
			return err // the caller's mistake; nothing was written
		}
		return s.fail("write", err)
	}
	if counted && (!early || first) {
		s.mu.Lock()
		if !early {
			s.outstanding++
			first = s.outstanding == 1
		}
		if first && s.outstanding > 0 { // zero: answered already
			s.armLocked()
		}
		s.mu.Unlock()
	}
	return nil
}

func (s *gearmanSession) Flush() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.failed(); err != nil {
		return err
	}
	if s.w.Buffered() == 0 {
		return nil
	}
	if s.cfg.IOTimeout > 0 {
		_ = s.nc.SetWriteDeadline(s.cfg.ioDeadline(0))
	}
	if err := s.w.Flush(); err != nil {
		return s.fail("write", err)
	}
	return nil
}

func (s *gearmanSession) Close() {
	s.quiet.Store(true)
	s.mu.Lock()
	if s.err == nil {
		s.err = routing.ErrClosed
	}
	s.mu.Unlock()
	_ = s.nc.Close()
}

// failed returns why the session ended, or nil while it is alive.
func (s *gearmanSession) failed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// fail ends the session for cause (the first cause wins) and returns the
// error it ended with. Closing the connection wakes the reader, which
// reports to the owner.
func (s *gearmanSession) fail(op string, cause error) error {
	s.mu.Lock()
	if s.err == nil {
		s.err = &routing.TransportError{Backend: s.cfg.Addr, Op: op, Err: cause}
	}
	err := s.err
	s.mu.Unlock()
	_ = s.nc.Close()
	return err
}

// wireSize is p's encoded length.
func wireSize(p *gearman.Packet) int {
	n := gearman.HeaderSize
	for i, a := range p.Args {
		if i > 0 {
			n++ // the NUL between arguments
		}
		n += len(a)
	}
	return n
}

// armLocked moves the deadline for the replies outstanding now: one
// IOTimeout from now, or none. The socket's read deadline is set only when
// none is in force: an earlier one that fires finds the reply not late
// (late) and sets the current one then, which costs one wake-up per
// IOTimeout instead of a SetReadDeadline per reply. s.mu is held.
func (s *gearmanSession) armLocked() {
	if s.cfg.IOTimeout == 0 {
		return
	}
	if s.outstanding == 0 {
		s.deadline = time.Time{}
		return
	}
	s.deadline = s.cfg.ioDeadline(0)
	if s.applied.IsZero() {
		s.applied = s.deadline
		_ = s.nc.SetReadDeadline(s.deadline)
	}
}

// late decides what a read timeout means: true when a reply is overdue;
// false when the deadline that fired is stale (the replies came, or a newer
// deadline was set), in which case the current one is re-applied and the
// read resumes where it stopped.
func (s *gearmanSession) late() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.outstanding > 0 && !s.deadline.IsZero() && !time.Now().Before(s.deadline) {
		return true
	}
	if s.outstanding == 0 {
		s.deadline = time.Time{}
	}
	s.applied = s.deadline
	_ = s.nc.SetReadDeadline(s.deadline)
	return false
}

// readLoop delivers the server's packets until the connection ends, then
// tells the owner why (unless it closed the session itself).
func (s *gearmanSession) readLoop(r *gearman.Reader) {
	for {
		f, err := r.ReadFrame()
		if err != nil {
			if isTimeout(err) {
				if !s.late() {
					continue
				}
				err = routing.ErrTimeout
			}
			s.fail("read", err)
			break
		}
		if f.Kind != gearman.KindPacket {
			// Sessions never send admin commands, so text from the server
			// means the stream cannot be trusted.
			s.fail("read", fmt.Errorf("unexpected text from server: %q", f.Text))
			break
		}
		p := &f.Packet
		if p.Type < gearman.Type(len(isReply)) && isReply[p.Type] {
			s.mu.Lock()
			if s.outstanding > 0 {
				// An ERROR answering a WORK_* for an unknown job matches
				// no counted request; clamping keeps that harmless.
				s.outstanding--
			}
			s.armLocked()
			s.mu.Unlock()
		}
		if s.quiet.Load() {
			break
		}
		s.ev.Packet(p)
		if s.ev.Idle != nil && !r.FrameBuffered() {
			s.ev.Idle()
		}
	}
	if s.quiet.Load() || s.ev.Closed == nil {
		return
	}
	s.ev.Closed(s.failed())
}

// Probe checks the server on a fresh connection with an ECHO round trip,
// for routing.HealthConfig.Probe.
func (g *Gearman) Probe(ctx context.Context) error {
	leave, err := g.enterAdmin(ctx)
	if err != nil {
		return err
	}
	defer leave()
	nc, err := g.cfg.dial(ctx)
	if err != nil {
		return err
	}
	defer nc.Close()
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Now()) })
	defer stop()
	if d, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(d)
	} else if g.cfg.IOTimeout > 0 {
		_ = nc.SetDeadline(g.cfg.ioDeadline(0))
	}
	payload := []byte("jobgate-health")
	if _, err := nc.Write(gearman.AppendPacket(adminTag[:len(adminTag):len(adminTag)], gearman.Req, gearman.EchoReq, payload)); err != nil {
		return &routing.TransportError{Backend: g.cfg.Addr, Op: "write", Err: err}
	}
	f, err := gearman.NewReader(nc, g.cfg.Limits).ReadFrame()
	if err != nil {
		return &routing.TransportError{Backend: g.cfg.Addr, Op: "read", Err: err}
	}
	if f.Kind != gearman.KindPacket || f.Packet.Type != gearman.EchoRes || !bytes.Equal(f.Packet.Data(), payload) {
		return &routing.TransportError{Backend: g.cfg.Addr, Op: "read", Err: fmt.Errorf("echo answered with %v", &f)}
	}
	return nil
}

// listingCommands are the admin commands whose answer is a listing ended by
// a line holding ".", unless it is a one-line ERR.
var listingCommands = []string{"workers", "status", "prioritystatus", "show"}

// Admin runs one admin text command (e.g. "status") on a fresh connection,
// for aggregating the servers' views, and returns the answer's lines
// without their line endings: a listing without its final ".", or the one
// line of other commands ("OK ...", "ERR ..."). The line must not contain
// "\n". ctx bounds the whole exchange (else IOTimeout does).
func (g *Gearman) Admin(ctx context.Context, line string) ([]string, error) {
	if bytes.ContainsAny([]byte(line), "\r\n") {
		return nil, errors.New("upstream: admin command contains a line break")
	}
	leave, err := g.enterAdmin(ctx)
	if err != nil {
		return nil, err
	}
	defer leave()
	nc, err := g.cfg.dial(ctx)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Now()) })
	defer stop()
	if d, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(d)
	} else if g.cfg.IOTimeout > 0 {
		_ = nc.SetDeadline(g.cfg.ioDeadline(0))
	}
	if _, err := nc.Write(append(adminTag[:len(adminTag):len(adminTag)], line+"\n"...)); err != nil {
		return nil, &routing.TransportError{Backend: g.cfg.Addr, Op: "write", Err: err}
	}
	var words [][]byte
	words = gearman.AppendAdminFields(words, []byte(line))
	listing := false
	for _, c := range listingCommands {
		listing = listing || bytes.EqualFold(words[0], []byte(c))
	}
	r := gearman.NewReader(nc, g.cfg.Limits)
	var out []string
	for {
		f, err := r.ReadFrame()
		if err != nil {
			return nil, &routing.TransportError{Backend: g.cfg.Addr, Op: "read", Err: err}
		}
		if f.Kind != gearman.KindText {
			return nil, &routing.TransportError{Backend: g.cfg.Addr, Op: "read", Err: fmt.Errorf("binary answer %v to an admin command", &f)}
		}
		text := string(f.Text)
		// An error answer is one "ERR code text" line; a listing's line
		// for a function named "ERR ..." has its counts after a tab.
		if !listing || (len(out) == 0 && strings.HasPrefix(text, "ERR ") && !strings.Contains(text, "\t")) {
			return []string{text}, nil
		}
		if text == "." {
			return out, nil
		}
		out = append(out, text)
	}
}
