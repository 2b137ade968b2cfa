package proxy

import (
	"sync/atomic"

	wire "github.com/jobgate/jobgate/codec/beanstalk"
)

// bgwClients counts a gateway's client connections and their commands as
// beanstalkd counts its own for stats: current-connections,
// total-connections, the current-producers, current-workers and
// current-waiting among them, and the cmd-* counters. Behind a gateway of
// several backends, a client has a session on each backend it touched, a
// waiting reserve waits on all of them, and a watch, a reserve, a peek or
// stats itself goes to several backends (with commands of the gateway's
// own, such as the use and watch that set up a session), so the backends'
// sums count one client, or one command, once per backend: stats reports
// these instead (bgwSession.stats). With one backend the backend's answer
// is passed on as it is.
type bgwClients struct {
	current, total, producers, workers, waiting atomic.Int64
	cmds                                        [int(wire.Quit) + 1]atomic.Uint64 // by verb
}

// bgwClientState is what bgwClients counts of one session; owned by the
// goroutine that runs the session's commands (the loop's, or its own).
type bgwClientState struct {
	producer, worker, gone bool
}

// clientOpened counts a new client connection.
func (s *bgwSession) clientOpened() {
	s.gw.clients.current.Add(1)
	s.gw.clients.total.Add(1)
}

// clientClosed takes a client connection out of the counts, once.
func (s *bgwSession) clientClosed() {
	if s.client.gone {
		return
	}
	s.client.gone = true
	c := &s.gw.clients
	c.current.Add(-1)
	if s.client.producer {
		c.producers.Add(-1)
	}
	if s.client.worker {
		c.workers.Add(-1)
	}
	s.setWaiting(false)
}

// countCommand counts a command of the client, as beanstalkd counts one
// it reads, and marks the client a producer at its first put and a worker
// at its first reserve or reserve-with-timeout (a reserve-job makes it one
// once it reserves: writeSlot).
func (s *bgwSession) countCommand(v wire.Verb) {
	if int(v) < len(s.gw.clients.cmds) {
		s.gw.clients.cmds[v].Add(1)
	}
	switch v {
	case wire.Put:
		if !s.client.producer {
			s.client.producer = true
			s.gw.clients.producers.Add(1)
		}
	case wire.Reserve, wire.ReserveWithTimeout:
		s.countWorker()
	}
}

// countWorker marks the client a worker.
func (s *bgwSession) countWorker() {
	if !s.client.worker {
		s.client.worker = true
		s.gw.clients.workers.Add(1)
	}
}

// setWaiting records whether a reserve of the client waits on the
// backends.
func (s *bgwSession) setWaiting(on bool) {
	if s.waiting.Swap(on) != on {
		if on {
			s.gw.clients.waiting.Add(1)
		} else {
			s.gw.clients.waiting.Add(-1)
		}
	}
}

// countRejectedPut counts a put the decoder refused after its line:
// beanstalkd counts JOB_TOO_BIG and EXPECTED_CRLF in cmd-put, and the
// latter, whose job it made before reading the body, makes the client a
// producer.
func (s *bgwSession) countRejectedPut(kind wire.ReplyKind) {
	switch kind {
	case wire.JobTooBig:
		s.gw.clients.cmds[wire.Put].Add(1)
	case wire.ExpectedCRLF:
		s.countCommand(wire.Put)
	}
}

// ownClientCounts puts the gateway's own client and command counts in st.
func (gw *beanstalkGateway) ownClientCounts(st *wire.ServerStats) {
	c := &gw.clients
	st.CurrentConnections = uint64(max(c.current.Load(), 0))
	st.TotalConnections = uint64(max(c.total.Load(), 0))
	st.CurrentProducers = uint64(max(c.producers.Load(), 0))
	st.CurrentWorkers = uint64(max(c.workers.Load(), 0))
	st.CurrentWaiting = uint64(max(c.waiting.Load(), 0))
	for v := range c.cmds {
		if p := st.CmdCounter(wire.Verb(v)); p != nil {
			*p = c.cmds[v].Load()
		}
	}
}
