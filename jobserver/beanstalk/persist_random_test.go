package beanstalk

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	wire "github.com/jobgate/jobgate/codec/beanstalk"
	"github.com/jobgate/jobgate/jobserver/journal"
)

// jobView is what a restart must give back of a job.
type jobView struct {
	tube, body              string
	state                   string
	pri, ttr                uint32
	at, created             int64 // wall deadline of a delayed job, burial sequence of a buried one
	releases, buries, kicks uint32
}

// viewJobs returns every job of e as a restart must restore it: reserved
// jobs ready, times on the wall clock.
func viewJobs(e *Engine) map[uint64]jobView {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := map[uint64]jobView{}
	add := func(j *job) {
		v := jobView{tube: j.tube.name, body: string(j.body), state: "ready", pri: j.pri, ttr: j.ttr,
			created: e.wall(j.created), releases: j.releases, buries: j.buries, kicks: j.kicks}
		switch j.state {
		case stateDelayed:
			v.state, v.at = "delayed", e.wall(j.deadline)
		case stateBuried:
			v.state, v.at = "buried", j.deadline
		}
		m[j.id] = v
	}
	for _, p := range e.jobs.pages {
		for _, j := range p.jobs {
			if j != nil {
				add(j)
			}
		}
	}
	for _, j := range e.jobs.overflow {
		add(j)
	}
	return m
}

// TestJournalRandomRestarts drives an engine with random commands and time
// steps on a journal with small segments (so compaction runs), restarts it
// now and then, and checks that the restart gives back exactly the jobs
// the engine held, and that ids are never reused.
func TestJournalRandomRestarts(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { randomRestarts(t, seed) })
	}
}

func randomRestarts(t *testing.T, seed uint64) {
	dir := t.TempDir()
	opts := journal.Options{Sync: journal.Never, SegmentSize: journal.MinSegmentSize}
	in := openDurable(t, dir, testStart, opts)
	rng := rand.New(rand.NewPCG(seed, 7))
	tubes := [][]byte{[]byte("default"), []byte("a"), []byte("b")}
	sessions := make([]*Session, 3)
	open := func() {
		for i := range sessions {
			sessions[i] = in.e.NewSession(nil)
		}
	}
	open()
	var maxID, compactions, restarts uint64
	randID := func() uint64 { return uint64(rng.IntN(int(maxID)+2)) + 1 }
	for step := range 3000 {
		s := sessions[rng.IntN(len(sessions))]
		var cmd wire.Command
		switch rng.IntN(13) {
		case 0, 1, 2:
			cmd = wire.Command{Verb: wire.Put, Pri: uint32(rng.IntN(2000)), Delay: uint32(rng.IntN(3) * rng.IntN(5)), TTR: uint32(rng.IntN(4)), Body: fmt.Appendf(nil, "job-%d", step)}
		case 3:
			cmd = wire.Command{Verb: wire.ReserveWithTimeout}
		case 4:
			cmd = wire.Command{Verb: wire.Delete, ID: randID()}
		case 5:
			cmd = wire.Command{Verb: wire.Release, ID: randID(), Pri: uint32(rng.IntN(2000)), Delay: uint32(rng.IntN(3))}
		case 6:
			cmd = wire.Command{Verb: wire.Bury, ID: randID(), Pri: uint32(rng.IntN(2000))}
		case 7:
			cmd = wire.Command{Verb: wire.Kick, Bound: uint32(rng.IntN(4))}
		case 8:
			cmd = wire.Command{Verb: wire.KickJob, ID: randID()}
		case 9:
			cmd = wire.Command{Verb: wire.Use, Tube: tubes[rng.IntN(len(tubes))]}
		case 10:
			cmd = wire.Command{Verb: wire.Watch, Tube: tubes[rng.IntN(len(tubes))]}
		case 11:
			cmd = wire.Command{Verb: wire.ReserveJob, ID: randID()}
		case 12:
			cmd = wire.Command{Verb: wire.Touch, ID: randID()}
		}
		var r wire.Reply
		if !s.Exec(&cmd, &r) {
			t.Fatalf("step %d: %s pending", step, verbName(cmd.Verb))
		}
		if r.Kind == wire.InternalError {
			t.Fatalf("step %d: %s: INTERNAL_ERROR", step, verbName(cmd.Verb))
		}
		if r.Kind == wire.Inserted {
			maxID = r.ID
		}
		if rng.IntN(8) == 0 {
			in.fc.Advance(time.Duration(rng.IntN(1500)) * time.Millisecond)
		}
		if rng.IntN(300) != 0 && step != 2999 {
			continue
		}
		// Restart: every reply was given, so everything is durable. Close
		// may stop the compactor before it takes its kick (it runs after
		// a later rotation instead), so every other restart, and the
		// last, waits for it: then compactions surely run, while the
		// other restarts may still cut one short, which must be safe too.
		restarts++
		if restarts%2 == 0 || step == 2999 {
			in.fj.Journal().SettleCompaction()
		}
		want := viewJobs(in.e)
		now := in.fc.Now()
		compactions += in.fj.Journal().Stats().Compactions
		in.stop()
		in = openDurable(t, dir, now, opts)
		open()
		got := viewJobs(in.e)
		for id, w := range want {
			if g, ok := got[id]; !ok {
				t.Fatalf("step %d: job %d lost: %+v", step, id, w)
			} else if g != w {
				t.Fatalf("step %d: job %d\n got %+v\nwant %+v", step, id, g, w)
			}
		}
		if len(got) != len(want) {
			t.Fatalf("step %d: restored %d jobs, want %d", step, len(got), len(want))
		}
		if err := checkInvariants(in.e, sessions); err != nil {
			t.Fatalf("step %d: after restart: %v", step, err)
		}
		var pr wire.Reply
		sessions[0].Exec(&wire.Command{Verb: wire.Put, TTR: 1, Body: []byte("probe")}, &pr)
		if pr.ID <= maxID {
			t.Fatalf("step %d: id %d reused (highest %d)", step, pr.ID, maxID)
		}
		maxID = pr.ID
	}
	if compactions == 0 {
		t.Errorf("no compaction ran")
	}
	t.Logf("%d compactions", compactions)
}
