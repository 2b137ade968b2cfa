package gearman

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
)

// TestRandomOperations drives the engine with a seeded random mix of
// requests, disconnects, cancels and clock moves, checking the engine's
// invariants after every step and that no client hears about a job's end
// more often than it submitted the job (gearmand tells a client that
// coalesced onto its own job once per submission, and so do we).
func TestRandomOperations(t *testing.T) {
	seeds := uint64(100)
	if testing.Short() {
		seeds = 20
	}
	for seed := uint64(1); seed <= seeds; seed++ {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			randomRun(t, seed, 1500)
		})
	}
}

func randomRun(t *testing.T, seed uint64, steps int) {
	h := newHarness(t, Config{JobRetries: int(seed % 3)})
	rng := rand.New(rand.NewPCG(seed, seed*7))
	fns := []string{"a", "b", "c"}
	uniques := []string{"", "", "u1", "u2", "-"}
	conns := make([]*conn, 6)
	for i := range conns {
		conns[i] = h.open()
	}
	held := map[*conn][]string{} // handles each worker was assigned
	created := map[string]int{}  // JOB_CREATED a client got, by handle@fd
	ended := map[string]int{}    // job ends a client was told, by handle@fd
	pick := func(xs []string) string { return xs[rng.IntN(len(xs))] }
	for step := 0; step < steps; step++ {
		i := rng.IntN(len(conns))
		c := conns[i]
		switch op := rng.IntN(14); op {
		case 0, 1:
			c.send([]codec.Type{codec.SubmitJob, codec.SubmitJobBg, codec.SubmitJobHigh, codec.SubmitJobLowBg}[rng.IntN(4)],
				pick(fns), pick(uniques), strconv.Itoa(rng.IntN(3)))
		case 2:
			c.send(codec.SubmitJobEpoch, pick(fns), pick(uniques), strconv.FormatInt(epoch0.Unix()+int64(rng.IntN(5)), 10), "e")
		case 3:
			if rng.IntN(2) == 0 {
				c.send(codec.CanDo, pick(fns))
			} else {
				c.send(codec.CanDoTimeout, pick(fns), strconv.Itoa(100+rng.IntN(2000)))
			}
		case 4:
			c.send(codec.CantDo, pick(fns))
		case 5:
			c.send(codec.PreSleep)
		case 6, 7:
			c.send([]codec.Type{codec.GrabJob, codec.GrabJobUniq, codec.GrabJobAll}[rng.IntN(3)])
		case 8, 9:
			if hs := held[c]; len(hs) > 0 {
				hd := hs[rng.IntN(len(hs))]
				switch rng.IntN(4) {
				case 0:
					c.send(codec.WorkFail, hd)
				case 1:
					c.send(codec.WorkException, hd, "x")
				case 2:
					c.send(codec.WorkStatus, hd, "1", "2")
				default:
					c.send(codec.WorkComplete, hd, "r")
				}
			}
		case 10:
			c.close()
			delete(held, c)
			conns[i] = h.open()
		case 11:
			h.clk.Advance(time.Duration(rng.IntN(1500)) * time.Millisecond)
		case 12:
			c.send(codec.ResetAbilities)
		case 13:
			if err := c.s.HandleText([]byte("cancel job H:t:" + strconv.Itoa(1+rng.IntN(int(h.e.lastID)+1)))); err != nil {
				t.Fatal(err)
			}
		}
		for _, cc := range conns {
			for _, g := range cc.rec.take() {
				f := strings.Fields(g)
				switch f[0] {
				case "JOB_CREATED":
					created[f[1]+"@"+strconv.Itoa(cc.s.info.FD)]++
				case "JOB_ASSIGN", "JOB_ASSIGN_UNIQ", "JOB_ASSIGN_ALL":
					held[cc] = append(held[cc], f[1])
				case "WORK_COMPLETE", "WORK_FAIL", "WORK_EXCEPTION":
					key := f[1] + "@" + strconv.Itoa(cc.s.info.FD)
					ended[key]++
					if ended[key] > created[key] {
						t.Fatalf("step %d: client %d told %d times that %s ended, submitted %d times",
							step, cc.s.info.FD, ended[key], f[1], created[key])
					}
				}
			}
		}
		checkInvariants(t, h.e)
	}
	for _, c := range conns {
		c.close()
	}
	h.e.mu.Lock()
	defer h.e.mu.Unlock()
	for _, j := range h.e.jobs {
		if !j.bg || j.state == stateRunning || j.clients != nil {
			t.Fatalf("after every session closed: job %d bg=%v state=%d", j.id, j.bg, j.state)
		}
	}
}

// FuzzHandle feeds arbitrary packets and admin lines to a session: the
// engine must not panic and must keep its invariants.
func FuzzHandle(f *testing.F) {
	f.Add(uint8(7), uint8(1), []byte("f\x00u\x00data"), "status")
	f.Add(uint8(36), uint8(1), []byte("f\x00\x0012\x00x"), "show jobs")
	f.Add(uint8(35), uint8(1), []byte("f\x00\x00*\x00*\x00*\x00*\x00*\x00x"), "maxqueue f 1")
	f.Add(uint8(13), uint8(2), []byte("H:t:1\x00r"), "cancel job H:t:1")
	f.Fuzz(func(t *testing.T, typ, magic uint8, body []byte, line string) {
		h := newHarness(t, Config{JobRetries: 2})
		c, w := h.open(), h.open()
		w.send(codec.CanDo, "f")
		w.send(codec.PreSleep)
		c.send(codec.SubmitJob, "f", "u", "x")
		p := codec.Packet{Magic: codec.Magic(magic%2 + 1), Type: codec.Type(typ%43 + 1)}
		for _, a := range strings.SplitN(string(body), "\x00", 8) {
			p.Args = append(p.Args, []byte(a))
		}
		_ = c.s.Handle(&p)
		_ = w.s.Handle(&p)
		w.send(codec.GrabJobAll)
		_ = w.s.Handle(&p)
		_ = c.s.HandleText([]byte(line))
		h.clk.Advance(time.Hour)
		c.close()
		w.close()
		checkInvariants(t, h.e)
	})
}
