package proxy_test

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// TestBeanstalkDifferential sends the same random command sequences, valid
// and not (each answered by exactly one reply, so the two stay in step),
// over several connections to jobgate and to beanstalkd, and
// requires the same replies byte for byte, except for the values that vary
// with time and process (masked). Commands never block: reserves use a
// timeout of 0 and TTRs are long, so no time passes that matters.
func TestBeanstalkDifferential(t *testing.T) {
	t.Parallel()
	for seed := range uint64(16) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			bsDiffRun(t, seed, bsStartJobgate(t, 1000), bsStartReal(t, 1000), bsDiff{name: "jobgate", steps: 600, mask: bsMask})
		})
	}
}

// bsDiff is how a differential run compares a server with beanstalkd.
type bsDiff struct {
	name  string                // the server's name in failures
	steps int                   // how many random commands
	mask  func(string) string   // hides what may differ in a reply
	skip  func(cmd string) bool // nil, or leaves out commands the two answer differently by design
}

// bsDiffRun sends seed's random commands over three connections each to
// subject and ref (a beanstalkd), and fails at the first step whose masked
// replies differ, with the commands that led there.
func bsDiffRun(t *testing.T, seed uint64, subject, ref bsServer, d bsDiff) {
	t.Helper()
	servers := []bsServer{subject, ref}
	const nconns = 3
	conns := make([][]*bsConn, len(servers))
	for i, srv := range servers {
		for range nconns {
			c := bsDial(t, srv.addr)
			defer c.nc.Close()
			conns[i] = append(conns[i], c)
		}
	}
	rng := rand.New(rand.NewPCG(seed, 7))
	var history []string
	for step := range d.steps {
		ci := rng.IntN(nconns)
		cmd := bsRandomCommand(rng)
		if d.skip != nil && d.skip(cmd) {
			continue
		}
		history = append(history, fmt.Sprintf("conn %d: %q", ci, cmd))
		var replies []string
		for i := range servers {
			c := conns[i][ci]
			c.send(t, cmd)
			replies = append(replies, d.mask(c.readReply(t)))
		}
		if replies[0] != replies[1] {
			if len(history) > 15 {
				history = history[len(history)-15:]
			}
			t.Fatalf("step %d, last commands:\n%s\n%-12s%q\nbeanstalkd: %q",
				step, strings.Join(history, "\n"), d.name+":", replies[0], replies[1])
		}
	}
}

var bsTubeNames = []string{"default", "a", "b", "c(1)", "-bad", "x y", strings.Repeat("n", 201)}

// bsRandomCommand returns one command line (with its body for put).
func bsRandomCommand(rng *rand.Rand) string {
	id := func() string { return fmt.Sprint(rng.IntN(25)) }
	tube := func() string { return bsTubeNames[rng.IntN(len(bsTubeNames))] }
	pri := func() string {
		return []string{"0", "1", "1023", "1024", "4294967295", "4294967296", "-1", "x"}[rng.IntN(8)]
	}
	switch rng.IntN(26) {
	case 0, 1, 2:
		body := strings.Repeat("b", rng.IntN(5))
		size := fmt.Sprint(len(body))
		switch rng.IntN(12) {
		case 0:
			size = "1001" // too big: the body is skipped
			body = strings.Repeat("z", 1001)
		case 1:
			return "put 0 0 100 3\r\nabcde" // EXPECTED_CRLF
		}
		if rng.IntN(8) == 0 {
			return "put " + pri() + " 0\r\n" // BAD_FORMAT, and no body to misread as commands
		}
		return fmt.Sprintf("put %d %d 100 %s\r\n%s\r\n", rng.IntN(2000), rng.IntN(3)*100, size, body)
	case 3:
		return "use " + tube() + "\r\n"
	case 4:
		return "watch " + tube() + "\r\n"
	case 5:
		return "ignore " + tube() + "\r\n"
	case 6, 7:
		return "reserve-with-timeout 0\r\n"
	case 8:
		return "reserve-job " + id() + "\r\n"
	case 9:
		return "delete " + id() + "\r\n"
	case 10:
		return fmt.Sprintf("release %s %s %d\r\n", id(), pri(), rng.IntN(2)*100)
	case 11:
		return fmt.Sprintf("bury %s %s\r\n", id(), pri())
	case 12:
		return "touch " + id() + "\r\n"
	case 13:
		return "peek " + id() + "\r\n"
	case 14:
		return []string{"peek-ready\r\n", "peek-delayed\r\n", "peek-buried\r\n"}[rng.IntN(3)]
	case 15:
		return fmt.Sprintf("kick %d\r\n", rng.IntN(4))
	case 16:
		return "kick-job " + id() + "\r\n"
	case 17:
		return "stats-job " + id() + "\r\n"
	case 18:
		return "stats-tube " + tube() + "\r\n"
	case 19:
		return "stats\r\n"
	case 20:
		return []string{"list-tubes\r\n", "list-tube-used\r\n", "list-tubes-watched\r\n"}[rng.IntN(3)]
	case 21:
		// Only valid names: beanstalkd counts a pause-tube whose name is
		// made of name bytes but invalid ("-x", 201 bytes) in cmd-pause-tube
		// before answering BAD_FORMAT; the codec does not tell the verb of
		// a BAD_FORMAT, so jobgate cannot.
		return fmt.Sprintf("pause-tube %s %d\r\n", bsTubeNames[rng.IntN(4)], rng.IntN(2)*100)
	case 22:
		return []string{"bogus\r\n", "\r\n", "reservex\r\n", "delete\r\n", "delete 1 2\r\n", "stats \r\n"}[rng.IntN(6)]
	case 23:
		return strings.Repeat("q", 230) + "\r\n"
	case 24:
		return "kick x\r\n"
	default:
		return "release " + id() + " 1\r\n"
	}
}

// bsMaskKeys are the YAML keys whose values vary between two servers doing
// the same work.
var bsMaskKeys = regexp.MustCompile(`(?m)^(pid|version|rusage-utime|rusage-stime|uptime|id|hostname|os|platform|total-connections|current-connections|age|time-left|pause-time-left): .*$`)

var bsOKLine = regexp.MustCompile(`^OK \d+\r\n`)

func bsMask(reply string) string {
	if !bsOKLine.MatchString(reply) {
		return reply
	}
	body := reply[strings.Index(reply, "\r\n")+2:]
	return "OK n\r\n" + bsMaskKeys.ReplaceAllString(body, "$1: *")
}
