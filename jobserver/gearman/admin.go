package gearman

import (
	"errors"
	"slices"
	"strconv"
	"strings"

	codec "github.com/jobgate/jobgate/codec/gearman"
)

// Admin replies, byte for byte as gearmand writes them.
const (
	textOK           = codec.AdminOK
	textUnknownError = codec.AdminErrUnknownError
	textUnknownShow  = codec.AdminErrUnknownShowArguments
	textUnknownJob   = codec.AdminErrUnknownJob
	textDropBusy     = "ERR there are still connected workers or executing clients\r\n"
	textDropMissing  = "ERR function not found\r\n"
)

// ErrTooManyFields is returned by Session.HandleText for an admin line of
// more than codec.MaxAdminFields words: gearmand closes such connections.
var ErrTooManyFields = errors.New("gearman: admin line has too many words")

// HandleText runs one admin protocol line (codec.Frame.Text: without its
// "\n" or "\r\n") and writes the reply to the session's Output. Commands
// are case-insensitive; words are split as gearmand splits them. A non-nil
// error means the connection must be closed.
func (s *Session) HandleText(line []byte) error {
	e := s.e
	var fields [codec.MaxAdminFields + 1][]byte
	args := codec.AppendAdminFields(fields[:0], line)
	if len(args) > codec.MaxAdminFields {
		return ErrTooManyFields
	}
	e.mu.Lock()
	if s.closed {
		e.mu.Unlock()
		return nil
	}
	shutdown, graceful := s.adminLocked(args)
	e.mu.Unlock()
	if shutdown {
		e.cfg.Shutdown(graceful)
	}
	return nil
}

func is(arg []byte, word string) bool { return strings.EqualFold(string(arg), word) }

// adminLocked builds the reply in e.text and writes it. It reports whether
// a shutdown was requested, for HandleText to run without the lock.
func (s *Session) adminLocked(args [][]byte) (shutdown, graceful bool) {
	e := s.e
	b := e.text[:0]
	argc := len(args)
	cmd := args[0]
	switch {
	case is(cmd, "workers"):
		for w := e.sessions; w != nil; w = w.nextS {
			b = strconv.AppendInt(b, int64(w.info.FD), 10)
			b = append(b, ' ')
			b = append(b, w.info.Host...)
			b = append(b, ' ')
			b = append(b, w.id...)
			b = append(b, " :"...)
			for _, a := range w.abilities {
				b = append(append(b, ' '), a.fn.name...)
			}
			b = append(b, '\n')
		}
		b = append(b, ".\n"...)
	case is(cmd, "status"):
		for _, f := range e.funcList {
			b = append(b, f.name...)
			b = formatUint(append(b, '\t'), f.total())
			b = formatUint(append(b, '\t'), f.running)
			b = formatUint(append(b, '\t'), len(f.workers))
			b = append(b, '\n')
		}
		b = append(b, ".\n"...)
	case is(cmd, "prioritystatus"):
		for _, f := range e.funcList {
			b = append(b, f.name...)
			b = formatUint(append(b, '\t'), f.queued[prioHigh])
			b = formatUint(append(b, '\t'), f.queued[prioNormal]+f.delayed)
			b = formatUint(append(b, '\t'), f.queued[prioLow])
			b = formatUint(append(b, '\t'), len(f.workers))
			b = append(b, '\n')
		}
		b = append(b, ".\n"...)
	case is(cmd, "maxqueue"):
		if argc == 1 {
			b = codec.AppendAdminInvalidArguments(b, cmd)
			break
		}
		var max [numPrio]int
		for p := 0; p < numPrio; p++ {
			if argc > p+2 {
				max[p] = max0(int(parseLeadingInt(args[p+2])))
			}
		}
		if argc <= 3 {
			max[prioNormal], max[prioLow] = max[prioHigh], max[prioHigh]
		}
		// gearmand ignores maxqueue for a function it has not seen yet;
		// create it so the limit holds for the jobs to come.
		e.function(args[1]).maxQueue = max
		b = append(b, textOK...)
	case argc >= 2 && is(cmd, "show"):
		switch {
		case argc == 3 && is(args[1], "unique") && is(args[2], "jobs"):
			for _, j := range e.sortedJobs() {
				b = append(append(b, j.unique()...), '\n')
			}
			b = append(b, ".\n"...)
		case argc == 2 && is(args[1], "jobs"):
			for _, j := range e.sortedJobs() {
				b = e.handle(b, j)
				b = formatUint(append(b, '\t'), int(j.retries))
				b = append(append(b, '\t'), boolArg(j.cancelled)...)
				b = append(append(b, '\t'), boolArg(j.bg)...) // gearmand: "queued" in its persistent store
				b = append(b, '\n')
			}
			b = append(b, ".\n"...)
		default:
			b = append(b, textUnknownShow...)
		}
	case argc >= 3 && is(cmd, "cancel"):
		switch {
		case argc == 3 && is(args[1], "job"):
			if ok, gate := e.cancel(args[2]); ok {
				s.wait(gate) // OK once the cancellation is durable
				b = append(b, textOK...)
			} else {
				b = append(b, textUnknownJob...)
			}
		default:
			b = append(b, textUnknownError...)
		}
	case is(cmd, "create"):
		if argc == 3 && is(args[1], "function") {
			e.function(args[2])
			b = append(b, textOK...)
		} else {
			b = codec.AppendAdminInvalidArguments(b, cmd)
		}
	case is(cmd, "drop"):
		if argc == 3 && is(args[1], "function") {
			b = append(b, e.dropFunction(args[2])...)
		} else {
			b = codec.AppendAdminInvalidArguments(b, cmd)
		}
	case is(cmd, "getpid"):
		b = append(strconv.AppendInt(append(b, "OK "...), int64(e.cfg.PID), 10), '\n')
	case is(cmd, "verbose"):
		b = append(append(append(b, "OK "...), e.cfg.Verbose...), '\n')
	case is(cmd, "version"):
		b = append(append(append(b, "OK "...), e.cfg.Version...), '\n')
	case is(cmd, "shutdown") && e.cfg.Shutdown != nil && (argc == 1 || (argc == 2 && is(args[1], "graceful"))):
		b = append(b, textOK...)
		shutdown, graceful = true, argc == 2
	default:
		b = codec.AppendAdminUnknownCommand(b, cmd)
	}
	e.writeText(s, b)
	e.text = b[:0]
	if cap(b) > 64<<10 {
		e.text = nil // do not keep a huge "show jobs" listing
	}
	return shutdown, graceful
}

func max0(n int) int {
	if n < 0 {
		return 0
	}
	return n
}

// sortedJobs returns every live job by handle counter.
func (e *Engine) sortedJobs() []*job {
	js := make([]*job, 0, len(e.jobs))
	for _, j := range e.jobs {
		js = append(js, j)
	}
	slices.SortFunc(js, func(a, b *job) int {
		switch {
		case a.id < b.id:
			return -1
		case a.id > b.id:
			return 1
		}
		return 0
	})
	return js
}

// cancel runs admin "cancel job": the clients get WORK_FAIL and stop
// waiting; a queued job is removed, a running one is dropped when its
// worker finishes or gives it back.
func (e *Engine) cancel(h []byte) (ok bool, gate uint64) {
	j := e.lookup(h)
	if j == nil {
		return false, 0
	}
	e.failClients(j)
	if j.state == stateRunning {
		j.cancelled = true
		gate = e.journalDelete(j) // the job is dead even if its worker completes it
		e.dropUnique(j)
		for j.clients != nil {
			a := j.clients
			j.clients = a.jnext
			a.s.unlinkAttach(a)
			e.freeAttach(a)
		}
		return true, gate
	}
	return true, e.finishJob(j)
}

// dropFunction runs admin "drop function": only a function with no workers
// and no running jobs goes; its queued jobs go with it (their clients get
// WORK_FAIL). The name matches case-insensitively, like gearmand.
func (e *Engine) dropFunction(name []byte) string {
	for i, f := range e.funcList {
		if !strings.EqualFold(f.name, string(name)) {
			continue
		}
		if len(f.workers) > 0 || f.running > 0 {
			return textDropBusy
		}
		for _, j := range e.sortedJobs() {
			if j.fn == f {
				e.failClients(j)
				e.finishJob(j)
			}
		}
		delete(e.funcs, f.name)
		e.funcList = slices.Delete(e.funcList, i, i+1)
		return textOK
	}
	return textDropMissing
}
