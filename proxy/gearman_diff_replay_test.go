package proxy

import (
	"bufio"
	"flag"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/jobserver/gearman"
)

// gdReplayFile names a trace of TestGearmanDifferential (-v
// -gearman-diff-trace output, up to and including the step that failed) to
// shrink to the fewest requests that still make the last one differ.
var gdReplayFile = flag.String("gearman-diff-replay", "", "shrink this TestGearmanDifferential trace")

// TestGearmanDifferentialReplay shrinks a failing differential trace: it
// replays the requests against a fresh jobgate and gearmand, drops runs of
// them (halving the run length) while the last request still gets
// different replies, and logs what is left. A tool for reading a
// divergence, run by hand:
//
//	go test -run 'TestGearmanDifferential/^7$' ./proxy -v -gearman-diff-trace > /tmp/trace
//	go test -run TestGearmanDifferentialReplay ./proxy -v -gearman-diff-replay=/tmp/trace
func TestGearmanDifferentialReplay(t *testing.T) {
	if *gdReplayFile == "" {
		t.Skip("no -gearman-diff-replay trace")
	}
	reqs := gdParseTrace(t, *gdReplayFile)
	if !gdReplay(t, reqs, false) {
		t.Fatal("the trace's last request gets the same replies")
	}
	for n := len(reqs) / 2; n >= 1; n /= 2 {
		for i := 0; i+n < len(reqs); {
			try := slices.Concat(reqs[:i], reqs[i+n:])
			if gdReplay(t, try, false) {
				reqs = try
			} else {
				i += n
			}
		}
	}
	gdReplay(t, reqs, true)
}

var gdTraceLine = regexp.MustCompile(`(?:^|: )\d+ (?:conn (\d): (.*)|admin: (".*")) -> `)

// gdParseTrace reads the requests of a trace.
func gdParseTrace(t *testing.T, path string) []gdRequest {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []gdRequest
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := gdTraceLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		if m[3] != "" {
			line, err := strconv.Unquote(m[3])
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, gdRequest{admin: line})
			continue
		}
		c, _ := strconv.Atoi(m[1])
		r := gdRequest{conn: c}
		switch body := m[2]; {
		case body == "close and reconnect":
			r.close = true
		case strings.HasPrefix(body, "raw "):
			raw, err := strconv.Unquote(body[4:])
			if err != nil {
				t.Fatal(err)
			}
			r.raw = raw
			r.fatal = gdFatalRaw[raw]
		default:
			words, err := splitWords(body)
			if err != nil {
				t.Fatal(err)
			}
			typ, ok := transcriptTypes[words[0]]
			if !ok {
				t.Fatalf("unknown packet type in %q", body)
			}
			r.typ, r.args = typ, words[1:]
		}
		out = append(out, r)
	}
	return out
}

// gdReplay sends reqs to a fresh jobgate and gearmand and reports whether
// the last one, and only it, gets different replies; show logs each step.
func gdReplay(t *testing.T, reqs []gdRequest, show bool) bool {
	subject := startJobgateGearmanServer(t, GearmanConfig{Engine: gearman.Config{HandlePrefix: "H:jobgate"}})
	ref := testutil.StartGearmand(t, "--worker-wakeup=1")
	servers := gdOpen(t, subject, ref)
	for step, req := range reqs {
		outs := make([][][]gdPacket, len(servers))
		replies := make([]string, len(servers))
		for i, s := range servers {
			o, reply, err := s.do(req, step)
			if err != nil {
				return false
			}
			outs[i], replies[i] = o, reply
		}
		if show {
			t.Logf("%d %s\n  jobgate:  %q %v\n  gearmand: %q %v", step, req, replies[0], outs[0], replies[1], outs[1])
		}
		same := replies[0] == replies[1]
		for c := range gdConns {
			same = same && slices.EqualFunc(outs[0][c], outs[1][c], gdPacketEqual)
		}
		if !same {
			return step == len(reqs)-1
		}
	}
	return false
}
