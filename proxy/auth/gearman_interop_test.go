package auth

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	gmcodec "github.com/jobgate/jobgate/codec/gearman"
)

// gearmanGatekeeper is the Gearman side of the proxy reduced to what this
// package prescribes (token forms, CAN_DO dropped silently, ERROR for a
// denied submit) in front of a server that completes every job at once.
// It records what it decided, for the test to check.
type gearmanGatekeeper struct {
	p   *Policy
	mu  sync.Mutex
	log []string
}

func (g *gearmanGatekeeper) record(s string) {
	g.mu.Lock()
	g.log = append(g.log, s)
	g.mu.Unlock()
}

func (g *gearmanGatekeeper) events() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.log...)
}

func (g *gearmanGatekeeper) serve(t *testing.T, ln net.Listener) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		go g.conn(t, conn)
	}
}

func (g *gearmanGatekeeper) conn(t *testing.T, conn net.Conn) {
	defer conn.Close()
	p := g.p
	peer := PeerOf(conn.RemoteAddr(), nil)
	id := p.Identify(peer)
	r := gmcodec.NewReader(conn, gmcodec.Limits{})
	w := gmcodec.NewWriter(conn)
	for {
		f, err := r.ReadFrame()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				g.record("read error: " + err.Error())
			}
			return
		}
		if f.Kind != gmcodec.KindPacket {
			w.WriteString(GearmanAdminDenied)
			w.Flush()
			continue
		}
		pk := &f.Packet
		switch pk.Type {
		case gmcodec.SetClientID:
			if tok, isAuth := ParseGearmanClientID(pk.Arg(0)); isAuth {
				if tok != nil && p.CheckToken(tok) {
					peer.Token = bytes.Clone(tok)
					id = p.Identify(peer)
				}
				g.record("identity " + id.String() + " via " + id.Method().String())
			}
			continue // no reply in the protocol
		case gmcodec.OptionReq:
			if tok, isAuth := ParseGearmanOption(pk.Arg(0)); isAuth {
				if tok == nil || !p.CheckToken(tok) {
					w.WriteError(GearmanDeniedCode, GearmanBadTokenText)
					w.Flush()
					continue
				}
				peer.Token = bytes.Clone(tok)
				id = p.Identify(peer)
				g.record("identity " + id.String() + " via " + id.Method().String())
			}
			w.WritePacket(gmcodec.Res, gmcodec.OptionRes, pk.Arg(0))
		}
		need := GearmanNeed(pk.Type)
		fn := pk.Function()
		d := p.Decide(id, need.Action, fn)
		switch need.Action {
		case Consume:
			g.record("can_do " + string(fn) + " " + d.String())
		case Produce:
			g.record("submit " + string(fn) + " " + d.String())
			if !d.Allowed() {
				w.WriteError(GearmanDeniedCode, GearmanDeniedText)
			} else {
				w.WritePacket(gmcodec.Res, gmcodec.JobCreated, []byte("H:1"))
				w.WritePacket(gmcodec.Res, gmcodec.WorkComplete, []byte("H:1"), []byte("done"))
			}
		}
		switch pk.Type {
		case gmcodec.GrabJob, gmcodec.GrabJobUniq, gmcodec.GrabJobAll:
			w.WritePacket(gmcodec.Res, gmcodec.NoJob)
		case gmcodec.EchoReq:
			w.WritePacket(gmcodec.Res, gmcodec.EchoRes, pk.Data())
		}
		if r.Buffered() == 0 {
			w.Flush()
		}
	}
}

func perl(t *testing.T, script string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "perl", append([]string{"-e", script}, args...)...).CombinedOutput()
	return string(out), err
}

// TestPerlGearman drives the Gearman token forms and denials with the
// Perl Gearman library (Debian's libgearman-client-perl), unmodified: a
// worker whose client_id carries the token (SET_CLIENT_ID), and a client
// whose own option-request code sends OPTION_REQ "auth=<token>" and reads
// the OPTION_RES or ERROR reply. The denied submit makes Gearman::Client
// die with "Unimplemented packet type: error [PERMISSION_DENIED <text>]":
// it handles no ERROR packet at all (gearmand's own QUEUE_ERROR fares the
// same), but the message carries the code and text.
func TestPerlGearman(t *testing.T) {
	if out, err := perl(t, "use Gearman::Worker; use Gearman::Client; 1"); err != nil {
		t.Skipf("Perl Gearman library not installed: %s", out)
	}
	g := &gearmanGatekeeper{p: mustNew(t, testConfig(t))}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go g.serve(t, ln)
	addr := ln.Addr().String()

	// Worker: the token in client_id. register_function connects, sends
	// SET_CLIENT_ID then CAN_DO; an ECHO round trip at the end proves the
	// gatekeeper sent nothing in reply to the CAN_DOs.
	out, err := perl(t, `
use Gearman::Worker; use Gearman::Util;
my $w = Gearman::Worker->new(job_servers => [$ARGV[0]], client_id => $ARGV[1]);
$w->register_function("invoice.render" => sub { "r" });
$w->register_function("payroll" => sub { "p" });
my $sock = $w->_get_js_sock($w->{job_servers}[0]);
my $req = Gearman::Util::pack_req_command("echo_req", "ping");
$sock->write($req, length $req);
my $err; my $res = Gearman::Util::read_res_packet($sock, \$err);
print "echo: $res->{type} ${$res->{blobref}}\n";
`, addr, TokenPrefix+tokBilling)
	if err != nil || !strings.Contains(out, "echo: echo_res ping") {
		t.Fatalf("worker: %v\n%s", err, out)
	}

	// Client: OPTION_REQ through the library's option request, a good then
	// a bad token; then submits, allowed and denied.
	out, err = perl(t, `
use Gearman::Client;
my $c = Gearman::Client->new(job_servers => [$ARGV[0]]);
my $js = $c->{job_servers}[0];
my $sock = $c->_get_js_sock($js);
print "bad token: ", $c->_option_request($sock, "auth=" . $ARGV[2]), "\n";
print "good token: ", $c->_option_request($sock, "auth=" . $ARGV[1]), "\n";
$c->_sock_cache($js, $sock);
my $r = $c->do_task("invoice.monthly", "x");
print "allowed: ", (ref $r ? $$r : "undef"), "\n";
my $denied = eval { $c->do_task("payroll", "x") };
print "denied: ", ($@ ? "died: $@" : (defined $denied ? "got a result" : "undef")), "\n";
`, addr, tokBilling, "wrong-token-0123456789")
	t.Logf("client output:\n%s", out)
	if err != nil || !strings.Contains(out, "bad token: 0\n") || !strings.Contains(out, "good token: 1\n") ||
		!strings.Contains(out, "allowed: done\n") || !strings.Contains(out, "PERMISSION_DENIED\x00"+GearmanDeniedText) {
		t.Fatalf("client: %v\n%s", err, out)
	}

	// The Perl worker sends SET_CLIENT_ID before each CAN_DO.
	want := []string{
		"identity billing via token",
		"can_do invoice.render allowed",
		"identity billing via token",
		"can_do payroll denied",
		"identity billing via token",
		"submit invoice.monthly allowed",
		"submit payroll denied",
	}
	got := g.events()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("gatekeeper saw:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestGearadmin sends the text admin commands with gearadmin, the admin
// client from gearmand's own tools: a denied command's ERR line ends the
// command with the code and text shown, like any gearmand ERR reply.
func TestGearadmin(t *testing.T) {
	gearadmin, err := exec.LookPath("gearadmin")
	if err != nil {
		t.Skip("gearadmin not installed")
	}
	g := &gearmanGatekeeper{p: mustNew(t, testConfig(t))}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go g.serve(t, ln)
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	for _, cmd := range []string{"--status", "--workers", "--server-version"} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		out, err := exec.CommandContext(ctx, gearadmin, "-h", "127.0.0.1", "-p", port, cmd).CombinedOutput()
		hung := ctx.Err() != nil
		cancel()
		t.Logf("gearadmin %s: %v\n%s", cmd, err, out)
		if hung {
			t.Fatalf("gearadmin %s hung", cmd)
		}
		if !strings.Contains(string(out), "PERMISSION_DENIED") {
			t.Errorf("gearadmin %s: no PERMISSION_DENIED in %q", cmd, out)
		}
	}
}
