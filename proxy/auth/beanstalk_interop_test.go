package auth

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	gobeanstalk "github.com/beanstalkd/go-beanstalk"

	bscodec "github.com/jobgate/jobgate/codec/beanstalk"
)

// gatekeeper is the Beanstalk side of the proxy reduced to what this
// package's documentation prescribes: the token `use`, soft watch denials,
// and the denial replies, in front of an empty server. It lets a real,
// unmodified client library prove the wire forms.
func gatekeeper(t *testing.T, p *Policy, conn net.Conn) {
	defer conn.Close()
	r := bscodec.NewReader(conn, bscodec.Limits{})
	w := bufio.NewWriter(conn)
	id := p.Identify(Peer{Addr: netip.MustParseAddr("203.0.113.1")})
	used, watched := "default", []string{"default"}
	for {
		cmd, err := r.ReadCommand()
		if err != nil {
			if !errors.Is(err, io.EOF) && !strings.Contains(err.Error(), "closed") {
				t.Errorf("gatekeeper: %v", err)
			}
			return
		}
		need := BeanstalkNeed(cmd.Verb)
		var name []byte
		switch need.Name {
		case ArgName:
			name = cmd.Tube
		case UsedTube:
			name = []byte(used)
		}
		denied := p.Decide(id, need.Action, name) != Allow
		switch {
		case cmd.Verb == bscodec.Use:
			if tok, reserved := ParseBeanstalkToken(cmd.Tube); reserved {
				if tok != nil && p.CheckToken(tok) {
					id = p.Identify(Peer{Addr: netip.MustParseAddr("203.0.113.1"), Token: tok})
				}
			} else {
				used = string(cmd.Tube)
			}
			w.WriteString("USING " + string(cmd.Tube) + "\r\n")
		case cmd.Verb == bscodec.Watch:
			if !slices.Contains(watched, string(cmd.Tube)) {
				watched = append(watched, string(cmd.Tube))
			}
			w.WriteString("WATCHING " + strconv.Itoa(len(watched)) + "\r\n")
		case cmd.Verb == bscodec.Ignore:
			watched = slices.DeleteFunc(watched, func(s string) bool { return s == string(cmd.Tube) })
			w.WriteString("WATCHING " + strconv.Itoa(len(watched)) + "\r\n")
		case cmd.Verb == bscodec.ListTubesWatched:
			yaml := "---\n"
			for _, tube := range watched {
				yaml += "- " + tube + "\n"
			}
			w.WriteString("OK " + strconv.Itoa(len(yaml)) + "\r\n" + yaml + "\r\n")
		case need.Name == WatchedTubes:
			n := 0
			for _, tube := range watched {
				if p.DecideString(id, Consume, tube) == Allow {
					n++
				}
			}
			if n == 0 {
				w.WriteString(BeanstalkDenial(cmd.Verb))
			} else {
				w.WriteString("TIMED_OUT\r\n")
			}
		case denied:
			w.WriteString(BeanstalkDenial(cmd.Verb))
		case cmd.Verb == bscodec.Put:
			w.WriteString("INSERTED 1\r\n")
		default:
			w.WriteString("NOT_FOUND\r\n")
		}
		if r.Buffered() == 0 {
			w.Flush()
		}
	}
}

// TestGoBeanstalkClient drives the gatekeeper with go-beanstalk, which
// pipelines use/watch/ignore in front of the next command and skips their
// replies: the token is accepted, denials surface as ErrNotFound, and the
// connection stays in sync throughout.
func TestGoBeanstalkClient(t *testing.T) {
	p := mustNew(t, testConfig(t))
	dial := func() *gobeanstalk.Conn {
		client, server := net.Pipe()
		go gatekeeper(t, p, server)
		c := gobeanstalk.NewConn(client)
		t.Cleanup(func() { c.Close() })
		return c
	}
	isDenied := func(err error) bool { return errors.Is(err, gobeanstalk.ErrNotFound) }

	c := dial()
	invoices := gobeanstalk.NewTube(c, "invoice.x")
	if _, err := invoices.Put([]byte("a"), 0, 0, time.Minute); !isDenied(err) {
		t.Fatalf("anonymous put: %v", err)
	}
	// The token, sent the go-beanstalk way: any Tube operation `use`s the
	// tube first. The peek itself runs on the real used tube.
	_, _, err := gobeanstalk.NewTube(c, TokenPrefix+tokBilling).PeekReady()
	if !errors.Is(err, gobeanstalk.ErrNotFound) {
		t.Fatalf("token use + peek-ready: %v", err)
	}
	if id, err := invoices.Put([]byte("a"), 0, 0, time.Minute); err != nil || id != 1 {
		t.Fatalf("put after token: %v, %v", id, err)
	}
	payroll := gobeanstalk.NewTube(c, "payroll")
	if _, err := payroll.Put([]byte("a"), 0, 0, time.Minute); !isDenied(err) {
		t.Fatalf("forbidden put: %v", err)
	}
	if _, err := invoices.Put([]byte("a"), 0, 0, time.Minute); err != nil {
		t.Fatalf("put after a denial (out of sync?): %v", err)
	}
	// A forbidden watch is soft; the reserve reports it.
	if _, _, err := gobeanstalk.NewTubeSet(c, "payroll").Reserve(0); !isDenied(err) {
		t.Fatalf("reserve watching only a forbidden tube: %v", err)
	}
	if _, _, err := gobeanstalk.NewTubeSet(c, "invoice.render").Reserve(0); !errors.Is(err, gobeanstalk.ErrTimeout) {
		t.Fatalf("reserve on a consumable tube (out of sync?): %v", err)
	}
	if _, err := c.Stats(); !isDenied(err) {
		t.Fatalf("stats without admin: %v", err)
	}
	if _, err := invoices.Put([]byte("a"), 0, 0, time.Minute); err != nil {
		t.Fatalf("final put (out of sync?): %v", err)
	}

	// An unknown token changes nothing; the next request says so.
	c = dial()
	if _, _, err := gobeanstalk.NewTube(c, TokenPrefix+"wrong-token-0123456789").PeekReady(); !errors.Is(err, gobeanstalk.ErrNotFound) {
		t.Fatalf("bad token use: %v", err)
	}
	if _, err := gobeanstalk.NewTube(c, "invoice.x").Put([]byte("a"), 0, 0, time.Minute); !isDenied(err) {
		t.Fatalf("put after a bad token: %v", err)
	}
}

// TestBeaneater drives the Beanstalk gatekeeper with Ruby's beaneater,
// unmodified: the token `use`, a denied put raising NotFoundError, a
// soft-denied watch whose reserve is refused, and the connection in sync
// after each. (With a custom PERMISSION_DENIED token beaneater raised
// nothing: put returned it as its status and reserve fabricated a Job.)
func TestBeaneater(t *testing.T) {
	if out, err := exec.Command("ruby", "-e", `require "beaneater"`).CombinedOutput(); err != nil {
		t.Skipf("ruby beaneater not installed: %s", out)
	}
	p := mustNew(t, testConfig(t))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go gatekeeper(t, p, c)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ruby", "-e", `
require "beaneater"
def try(label)
  r = yield
  puts "#{label}: #{r}"
rescue => e
  puts "#{label}: #{e.class}: #{e.message}"
end
b = Beaneater.new(ARGV[0])
try("anonymous put") { b.tubes["invoice.x"].put("a")[:status] }
try("token use") { b.tubes.use("jobgate-auth." + ARGV[1]); "ok" }
try("put") { b.tubes["invoice.x"].put("a")[:status] }
try("denied put") { b.tubes["payroll"].put("a")[:status] }
try("put again") { b.tubes["invoice.x"].put("a")[:status] }
try("watch payroll") { b.tubes.watch!("payroll"); "ok" }
try("reserve") { b.tubes.reserve(0) }
try("watch invoice.render") { b.tubes.watch!("invoice.render"); "ok" }
try("reserve again") { b.tubes.reserve(0) }
`, ln.Addr().String(), tokBilling).CombinedOutput()
	t.Logf("beaneater:\n%s", out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"anonymous put: Beaneater::NotFoundError",
		"token use: ok", "put: INSERTED",
		"denied put: Beaneater::NotFoundError",
		"put again: INSERTED",
		"watch payroll: ok", "reserve: Beaneater::NotFoundError",
		"watch invoice.render: ok", "reserve again: Beaneater::TimedOutError",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}
