package proxy_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// bwConns is the number of connections per server in
// TestBeanstalkDifferentialWait.
const bwConns = 4

// bwStep is one step of TestBeanstalkDifferentialWait on one connection.
type bwStep struct {
	conn  int
	cmd   string // the bytes sent (none for close)
	wait  bool   // a reserve that may block: the connection gets no sync
	close bool   // the test closes the connection and opens a new one
	quit  bool   // the connection sends quit, is read to its end, and is replaced
	shut  bool   // the test half-closes the connection, reads it to its end, and replaces it
}

func (s bwStep) String() string {
	switch {
	case s.close:
		return fmt.Sprintf("conn %d: close and reconnect", s.conn)
	case s.quit:
		return fmt.Sprintf("conn %d: quit and reconnect", s.conn)
	case s.shut:
		return fmt.Sprintf("conn %d: half-close and reconnect", s.conn)
	}
	return fmt.Sprintf("conn %d: %q", s.conn, s.cmd)
}

// bwGen makes the random steps. It knows which connections wait in a
// reserve (from the replies seen, saw), so it never sends them a command
// and always keeps one connection free to synchronise on.
type bwGen struct {
	rng     *rand.Rand
	waiting [bwConns]bool
	ids     []uint64 // ids seen in replies, latest last, for commands to aim at
}

// id returns a job id to aim at: mostly one seen lately, sometimes any.
func (g *bwGen) id() uint64 {
	if len(g.ids) == 0 || g.rng.IntN(4) == 0 {
		return uint64(g.rng.IntN(25))
	}
	return g.ids[len(g.ids)-1-g.rng.IntN(min(len(g.ids), 8))]
}

func (g *bwGen) free() []int {
	var f []int
	for i, w := range g.waiting {
		if !w {
			f = append(f, i)
		}
	}
	return f
}

// next returns the next step. Waiting reserves, closes and quits are
// common, and so are the commands that hand a job to a waiting connection
// (put, release, kick, kick-job, bury then kick) on the tubes the
// connections watch, so that several waiters often compete.
func (g *bwGen) next() bwStep {
	free := g.free()
	c := free[g.rng.IntN(len(free))]
	r := g.rng.IntN(100)
	switch {
	case r < 14 && len(free) >= 2:
		return bwStep{conn: c, wait: true, cmd: []string{"reserve\r\n", "reserve-with-timeout 1000\r\n"}[g.rng.IntN(2)]}
	case r < 16:
		return bwStep{conn: g.rng.IntN(bwConns), close: true}
	case r < 17:
		return bwStep{conn: g.rng.IntN(bwConns), shut: true}
	case r < 19:
		return bwStep{conn: c, quit: true, cmd: "quit\r\n"}
	case r < 33:
		body := strings.Repeat("w", g.rng.IntN(4))
		// TTRs differ (and never run out here), so that TTR order and
		// reservation order differ.
		return bwStep{conn: c, cmd: fmt.Sprintf("put %d 0 %d %d\r\n%s\r\n", g.rng.IntN(3)*512, 100*(1+g.rng.IntN(3)), len(body), body)}
	case r < 40:
		return bwStep{conn: c, cmd: "use " + bsTubeNames[g.rng.IntN(4)] + "\r\n"}
	case r < 46:
		verb := []string{"watch ", "ignore "}[g.rng.IntN(2)]
		return bwStep{conn: c, cmd: verb + bsTubeNames[g.rng.IntN(4)] + "\r\n"}
	case r < 52:
		return bwStep{conn: c, cmd: fmt.Sprintf("release %d %d 0\r\n", g.id(), g.rng.IntN(3)*512)}
	case r < 55:
		return bwStep{conn: c, cmd: fmt.Sprintf("kick %d\r\n", 1+g.rng.IntN(3))}
	case r < 58:
		return bwStep{conn: c, cmd: fmt.Sprintf("kick-job %d\r\n", g.id())}
	case r < 61:
		return bwStep{conn: c, cmd: fmt.Sprintf("bury %d 0\r\n", g.id())}
	case r < 62:
		return bwStep{conn: c, cmd: fmt.Sprintf("touch %d\r\n", g.id())}
	case r < 63:
		return bwStep{conn: c, cmd: fmt.Sprintf("delete %d\r\n", g.id())}
	case r < 64:
		return bwStep{conn: c, cmd: fmt.Sprintf("reserve-job %d\r\n", g.id())}
	case r < 67:
		// Pauses end only by a new pause-tube (delay 0): a pause running
		// out would depend on time.
		return bwStep{conn: c, cmd: fmt.Sprintf("pause-tube %s %d\r\n", bsTubeNames[g.rng.IntN(4)], g.rng.IntN(2)*1000)}
	case r < 72:
		return bwStep{conn: c, cmd: []string{"stats\r\n", "stats-tube default\r\n", "stats-tube a\r\n", "stats-tube b\r\n"}[g.rng.IntN(4)]}
	}
	return bwStep{conn: c, cmd: bsRandomCommand(g.rng)}
}

// saw updates which connections wait, from the step and what every
// connection received in it (on either server: they are the same).
func (g *bwGen) saw(s bwStep, outs [][]string) {
	switch {
	case s.close || s.quit || s.shut:
		g.waiting[s.conn] = false
	case s.wait:
		g.waiting[s.conn] = true
	}
	for i, out := range outs {
		if g.waiting[i] && len(out) > 0 {
			g.waiting[i] = false
		}
		for _, r := range out {
			var id uint64
			if _, err := fmt.Sscanf(r, "INSERTED %d", &id); err == nil {
				g.ids = append(g.ids, id)
			} else if _, err := fmt.Sscanf(r, "RESERVED %d", &id); err == nil {
				g.ids = append(g.ids, id)
			}
		}
	}
	if len(g.ids) > 64 {
		g.ids = append(g.ids[:0], g.ids[len(g.ids)-16:]...)
	}
}
