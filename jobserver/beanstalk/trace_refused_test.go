package beanstalk

import (
	"testing"

	wire "github.com/jobgate/jobgate/codec/beanstalk"
)

// TestTraceRefusedPut checks that a creation context given for a put that
// is refused, with DRAINING or JOB_TOO_BIG, is used up by it: the next put,
// given none, is untraced and does not take the refused put's time.
func TestTraceRefusedPut(t *testing.T) {
	e, _ := newTestEngine(t)
	h := &clockHook{now: testStart.UnixNano()}
	e.SetTraceHook(h)
	c := newConn(t, e)
	e.SetDraining(true)
	c.s.SetCreationAt(testCreation(1), h.now-1000)
	c.want(wire.Command{Verb: wire.Put, Pri: 1, TTR: 5, Body: []byte("refused")}, wire.Draining)
	e.SetDraining(false)
	if id := c.put(1, 0, 5, "plain"); countTraces(e) != 0 {
		t.Fatalf("put after a refused traced put is traced: %+v", readyOf(t, e, id))
	}
	c.s.SetCreation(testCreation(2))
	big := make([]byte, e.maxJobSize+1)
	c.want(wire.Command{Verb: wire.Put, Pri: 1, TTR: 5, Body: big}, wire.JobTooBig)
	if c.put(1, 0, 5, "plain"); countTraces(e) != 0 {
		t.Fatal("put after a traced put refused as too big is traced")
	}
}
