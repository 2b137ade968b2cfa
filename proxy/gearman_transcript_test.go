package proxy

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/jobserver/gearman"
)

// Gearman transcripts: testdata/gearman/*.txt hold scripts of raw requests
// and the exact replies expected, run against jobgate and against a real
// gearmand in the same test, so each script is known to describe gearmand's
// behaviour. The format, one step per line:
//
//	=== name                   starts a script
//	gearmand: --flag ...       extra gearmand flags (--job-retries=N is
//	                           also applied to jobgate)
//	only: jobgate REASON       skip gearmand (a gearmand bug we don't copy)
//	C> TYPE arg ...            connection C sends a request packet
//	C> text "line\n"           connection C sends raw admin text
//	C> raw "\x00REQ..."        connection C sends raw bytes
//	C> poll "cmd\n" "reply"     C repeats an admin command until it gets
//	                           reply (within a deadline)
//	C< TYPE arg ...            C receives exactly this packet next
//	C< text "..."              C receives exactly this admin reply next
//	C< lines "..."             an admin listing with these lines, any order
//	C< match "regexp"          an admin listing matching the regexp
//	C< none                    nothing is pending for C (checked with an
//	                           ECHO round trip, so no waiting)
//	C< eof                     the server closed C
//	C close                    C closes its connection
//	wait DURATION              let time pass (time.ParseDuration), for
//	                           what must not happen within it
//
// Arguments are bare words or Go-quoted strings. $name in an expected
// packet binds to what arrives (a job handle must look like one); later
// uses must match or are substituted. "*" matches anything.

var transcriptTypes = func() map[string]codec.Type {
	m := make(map[string]codec.Type)
	for t := codec.Type(1); t <= codec.StatusResUnique; t++ {
		if t.Valid() {
			m[t.String()] = t
		}
	}
	return m
}()

type gtStep struct {
	line   int
	conn   string
	op     string // send, text, raw, poll, expect, etext, lines, match, none, eof, close, wait
	typ    codec.Type
	args   []string
	source string
	wait   time.Duration
}

type gtScript struct {
	name    string
	file    string
	flags   []string
	retries int
	only    string
	steps   []gtStep
}

func parseTranscripts(t *testing.T) []*gtScript {
	files, err := filepath.Glob("testdata/gearman/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts: %v", err)
	}
	var out []*gtScript
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var cur *gtScript
		for i, raw := range strings.Split(string(data), "\n") {
			line := strings.TrimSpace(raw)
			fail := func(format string, a ...any) {
				t.Fatalf("%s:%d: %s", file, i+1, fmt.Sprintf(format, a...))
			}
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			if name, ok := strings.CutPrefix(line, "=== "); ok {
				cur = &gtScript{name: name, file: file}
				out = append(out, cur)
				continue
			}
			if cur == nil {
				fail("step before the first === header")
			}
			if v, ok := strings.CutPrefix(line, "gearmand:"); ok {
				cur.flags = strings.Fields(v)
				for _, f := range cur.flags {
					if n, ok := strings.CutPrefix(f, "--job-retries="); ok {
						cur.retries, _ = strconv.Atoi(n)
					}
				}
				continue
			}
			if v, ok := strings.CutPrefix(line, "only:"); ok {
				cur.only = strings.TrimSpace(v)
				continue
			}
			words, err := splitWords(line)
			if err != nil {
				fail("%v", err)
			}
			st := gtStep{line: i + 1, source: line}
			switch {
			case len(words) == 2 && words[1] == "close":
				st.op, st.conn = "close", words[0]
			case len(words) == 2 && words[0] == "wait":
				d, err := time.ParseDuration(words[1])
				if err != nil {
					fail("%v", err)
				}
				st.op, st.wait = "wait", d
			case strings.HasSuffix(words[0], ">") || strings.HasSuffix(words[0], "<"):
				send := strings.HasSuffix(words[0], ">")
				st.conn = words[0][:len(words[0])-1]
				if len(words) < 2 {
					fail("missing packet type")
				}
				kind, rest := words[1], words[2:]
				switch {
				case send && (kind == "text" || kind == "raw"):
					st.op, st.args = kind, rest
				case send && kind == "poll":
					if len(rest) != 2 {
						fail("poll needs a command and the reply to wait for")
					}
					st.op, st.args = kind, rest
				case !send && (kind == "text" || kind == "lines" || kind == "match"):
					st.op, st.args = map[string]string{"text": "etext", "lines": "lines", "match": "match"}[kind], rest
				case !send && (kind == "none" || kind == "eof"):
					st.op = kind
				default:
					typ, ok := transcriptTypes[kind]
					if !ok {
						fail("unknown packet type %q", kind)
					}
					st.typ, st.args = typ, rest
					st.op = "expect"
					if send {
						st.op = "send"
					}
				}
			default:
				fail("cannot parse %q", line)
			}
			cur.steps = append(cur.steps, st)
		}
	}
	return out
}

// splitWords splits a line into bare words and Go-quoted strings.
func splitWords(line string) ([]string, error) {
	var words []string
	for line = strings.TrimSpace(line); line != ""; line = strings.TrimSpace(line) {
		if line[0] == '"' || line[0] == '`' {
			q, err := strconv.QuotedPrefix(line)
			if err != nil {
				return nil, err
			}
			s, _ := strconv.Unquote(q)
			words = append(words, s)
			line = line[len(q):]
			continue
		}
		i := strings.IndexAny(line, " \t")
		if i < 0 {
			i = len(line)
		}
		words = append(words, line[:i])
		line = line[i:]
	}
	return words, nil
}

func TestGearmanTranscripts(t *testing.T) {
	scripts := parseTranscripts(t)
	for _, sc := range scripts {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			t.Run("jobgate", func(t *testing.T) {
				addr := startJobgateGearman(t, gearman.Config{JobRetries: sc.retries, HandlePrefix: "H:jobgate"})
				runTranscript(t, sc, addr)
			})
			t.Run("jobgate-goroutines", func(t *testing.T) {
				addr := startJobgateGearmanServer(t, GearmanConfig{
					Engine:     gearman.Config{JobRetries: sc.retries, HandlePrefix: "H:jobgate"},
					Goroutines: true,
				})
				runTranscript(t, sc, addr)
			})
			t.Run("gearmand", func(t *testing.T) {
				if sc.only != "" {
					t.Skip(sc.only)
				}
				addr := testutil.StartGearmand(t, sc.flags...)
				runTranscript(t, sc, addr)
			})
		})
	}
}

// startJobgateGearman serves a fresh engine on 127.0.0.1:0 until the test
// ends.
func startJobgateGearman(t testing.TB, cfg gearman.Config) string {
	t.Helper()
	return startJobgateGearmanServer(t, GearmanConfig{Engine: cfg})
}

// startJobgateGearmanServer is startJobgateGearman with a server
// configuration.
func startJobgateGearmanServer(t testing.TB, cfg GearmanConfig) string {
	t.Helper()
	srv, err := NewGearmanServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return serveGearman(t, srv)
}

// serveGearman serves srv on 127.0.0.1:0 until the test ends, then shuts
// it down, and returns its address.
func serveGearman(t testing.TB, srv *GearmanServer) string {
	t.Helper()
	return testutil.Serve(t, srv)
}

// gtConn is one transcript connection.
type gtConn struct {
	nc net.Conn
	br *bufio.Reader
}

var handleRE = regexp.MustCompile(`^[!-~]+:[0-9]+$`)

func runTranscript(t *testing.T, sc *gtScript, addr string) {
	runTranscriptSynced(t, sc, addr, "")
}

// runTranscriptSynced is runTranscript with a handle whose GET_STATUS the
// "none" step also sends: through a gateway, the ECHO of "none" is answered
// by the gateway itself, so it says nothing of what the upstream has
// handled; a GET_STATUS for a handle of that upstream travels on the same
// upstream connection as the step's earlier packets, so its answer does.
func runTranscriptSynced(t *testing.T, sc *gtScript, addr, syncHandle string) {
	conns := map[string]*gtConn{}
	vars := map[string]string{}
	defer func() {
		for _, c := range conns {
			c.nc.Close()
		}
	}()
	get := func(name string) *gtConn {
		if c := conns[name]; c != nil {
			return c
		}
		nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c := &gtConn{nc: nc, br: bufio.NewReader(nc)}
		conns[name] = c
		return c
	}
	subst := func(s string) string {
		if d, ok := strings.CutPrefix(s, "@now+"); ok {
			n, _ := strconv.Atoi(d)
			return strconv.FormatInt(time.Now().Unix()+int64(n), 10)
		}
		if strings.HasPrefix(s, "$") {
			if v, ok := vars[s]; ok {
				return v
			}
		}
		return s
	}
	substText := func(s string) string {
		for k, v := range vars {
			s = strings.ReplaceAll(s, k, v)
		}
		return s
	}
	for _, st := range sc.steps {
		where := fmt.Sprintf("%s:%d: %s", filepath.Base(sc.file), st.line, st.source)
		if st.op == "wait" {
			time.Sleep(st.wait)
			continue
		}
		c := get(st.conn)
		_ = c.nc.SetDeadline(time.Now().Add(5 * time.Second))
		switch st.op {
		case "close":
			c.nc.Close()
			delete(conns, st.conn)
			waitConnections(t, addr, len(conns), where)
		case "send":
			args := make([][]byte, len(st.args))
			for i, a := range st.args {
				args[i] = []byte(subst(a))
			}
			writeAll(t, c, codec.AppendPacket(nil, codec.Req, st.typ, args...), where)
		case "text", "raw":
			writeAll(t, c, []byte(substText(strings.Join(st.args, ""))), where)
		case "expect":
			p, err := readPacket(c.br)
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			got := describe(p)
			if p.Type != st.typ || len(p.Args) != len(st.args) {
				t.Fatalf("%s:\n got  %s", where, got)
			}
			for i, want := range st.args {
				arg := string(p.Args[i])
				switch {
				case want == "*":
				case strings.HasPrefix(want, "$"):
					if v, ok := vars[want]; ok {
						if v != arg {
							t.Fatalf("%s: %s is %q, got\n %s", where, want, v, got)
						}
					} else {
						if i == 0 && !handleRE.MatchString(arg) && p.Type != codec.StatusResUnique {
							t.Fatalf("%s: %q does not look like a handle:\n %s", where, arg, got)
						}
						vars[want] = arg
					}
				case want != arg:
					t.Fatalf("%s:\n got  %s", where, got)
				}
			}
		case "poll":
			// Repeat an admin command until it answers as expected: a
			// deadline, not a sleep, for what real time drives (timeouts).
			want := substText(st.args[1])
			deadline := time.Now().Add(5 * time.Second)
			for {
				writeAll(t, c, []byte(substText(st.args[0])), where)
				got, err := readText(c.br)
				if err != nil {
					t.Fatalf("%s: %v", where, err)
				}
				if got == want {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: still %q", where, got)
				}
				time.Sleep(10 * time.Millisecond)
				_ = c.nc.SetDeadline(time.Now().Add(5 * time.Second))
			}
		case "etext", "lines", "match":
			got, err := readText(c.br)
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			want := substText(strings.Join(st.args, ""))
			switch st.op {
			case "etext":
				if got != want {
					t.Fatalf("%s:\n got  %q\n want %q", where, got, want)
				}
			case "lines":
				g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
				slices.Sort(g)
				slices.Sort(w)
				if !slices.Equal(g, w) {
					t.Fatalf("%s:\n got  %q\n want %q (any order)", where, got, want)
				}
			case "match":
				if !regexp.MustCompile("^(?:" + want + ")$").MatchString(got) {
					t.Fatalf("%s:\n got  %q\n want match %q", where, got, want)
				}
			}
		case "none":
			writeAll(t, c, codec.AppendPacket(nil, codec.Req, codec.EchoReq, []byte("sync")), where)
			p, err := readPacket(c.br)
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			if p.Type != codec.EchoRes || string(p.Args[0]) != "sync" {
				t.Fatalf("%s: expected nothing, got %s", where, describe(p))
			}
			if syncHandle != "" {
				writeAll(t, c, codec.AppendPacket(nil, codec.Req, codec.GetStatus, []byte(syncHandle)), where)
				if p, err = readPacket(c.br); err != nil {
					t.Fatalf("%s: %v", where, err)
				}
				if p.Type != codec.StatusRes || string(p.Args[0]) != syncHandle {
					t.Fatalf("%s: expected nothing, got %s", where, describe(p))
				}
			}
		case "eof":
			_ = c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
			b, err := c.br.ReadByte()
			if err == nil {
				t.Fatalf("%s: expected the server to close, got byte %q", where, b)
			}
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("%s: the server did not close the connection", where)
			}
		}
	}
}

// waitConnections polls the admin "workers" listing, which both servers
// print with one line per connection, until the server has dropped every
// closed connection: n open ones plus the poller.
func waitConnections(t *testing.T, addr string, n int, where string) {
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	defer nc.Close()
	br := bufio.NewReader(nc)
	deadline := time.Now().Add(5 * time.Second)
	for {
		_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := nc.Write([]byte("workers\n")); err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		got, err := readText(br)
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		if strings.Count(got, "\n")-1 == n+1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: server still lists closed connections:\n%s", where, got)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func writeAll(t *testing.T, c *gtConn, b []byte, where string) {
	if _, err := c.nc.Write(b); err != nil {
		t.Fatalf("%s: write: %v", where, err)
	}
}

// readPacket reads one binary packet.
func readPacket(br *bufio.Reader) (*codec.Packet, error) {
	var hdr [codec.HeaderSize]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return nil, err
	}
	if hdr[0] != 0 {
		rest, _ := br.Peek(br.Buffered())
		return nil, fmt.Errorf("expected a packet, got text %q", string(hdr[:])+string(rest))
	}
	n := binary.BigEndian.Uint32(hdr[8:])
	buf := make([]byte, codec.HeaderSize+int(n))
	copy(buf, hdr[:])
	if _, err := io.ReadFull(br, buf[codec.HeaderSize:]); err != nil {
		return nil, err
	}
	p := &codec.Packet{}
	if err := p.UnmarshalBinary(buf); err != nil {
		return nil, err
	}
	return p, nil
}

// readText reads one admin reply: an OK/ERR line or a listing ending in
// ".\n".
func readText(br *bufio.Reader) (string, error) {
	var sb strings.Builder
	for first := true; ; first = false {
		line, err := br.ReadString('\n')
		sb.WriteString(line)
		if err != nil {
			return sb.String(), err
		}
		if line == ".\n" || (first && (strings.HasPrefix(line, "OK") || strings.HasPrefix(line, "ERR"))) {
			return sb.String(), nil
		}
	}
}

func describe(p *codec.Packet) string {
	var sb strings.Builder
	sb.WriteString(p.Type.String())
	for _, a := range p.Args {
		sb.WriteByte(' ')
		sb.WriteString(strconv.Quote(string(a)))
	}
	return sb.String()
}
