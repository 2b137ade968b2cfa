package proxy

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"

	codec "github.com/jobgate/jobgate/codec/gearman"
)

// The request generator and the admin masks of TestGearmanDifferential.

// gdUnknownHandle starts the handles the test makes up: no server issued
// them, so they are sent as they are.
const gdUnknownHandle = "H:nowhere:"

// gdFatal are requests both servers close the connection for, without a
// reply: an unknown packet type, and SUBMIT_JOB with two arguments.
// gearmand reads past the end of the short packet before it gives up, so
// an ECHO follows it.
var gdFatal = []string{
	"\x00REQ\x00\x00\x00\x2b\x00\x00\x00\x00",
	"\x00REQ\x00\x00\x00\x07\x00\x00\x00\x03f\x00u\x00REQ\x00\x00\x00\x10\x00\x00\x00\x01x",
}

// gdFatalRaw tells the requests of gdFatal.
var gdFatalRaw = map[string]bool{gdFatal[0]: true, gdFatal[1]: true}

var (
	gdFunctions = []string{"f", "g", "h"}
	// The longest unique is 63 bytes. Skip: gearmand 1.1.20 accepts 64
	// but keeps 63 of them plus a NUL, which it then sends in
	// JOB_ASSIGN_UNIQ (a gearmand bug; jobgate keeps all 64).
	gdUniques = []string{"", "", "", "u1", "u2", "-", strings.Repeat("u", 63)}
	gdData    = []string{"a", "b", "", "u1"}
)

// gdGen makes the random requests. It keeps what it needs to aim them: the
// abilities each connection declared, the jobs each was assigned and the
// handles created, all as the test sees them (masked handles, which are the
// same on both servers or the test has already failed).
type gdGen struct {
	rng       *rand.Rand
	abilities [gdConns][]string
	assigned  [gdConns][]string
	created   []string
	waiting   [gdConns]map[string]bool   // foreground jobs each connection waits for
	woken     [gdConns]bool              // got a NOOP, has not grabbed since
	sleeping  [gdConns]bool              // sent PRE_SLEEP, has not grabbed since
	holding   [gdConns]map[string]string // handle -> function of the jobs each runs
	seen      map[string]bool            // functions both servers know (for maxqueue)
}

func newGdGen(rng *rand.Rand) *gdGen {
	return &gdGen{rng: rng, seen: map[string]bool{}}
}

func (g *gdGen) pick(s []string) string { return s[g.rng.IntN(len(s))] }

// handle picks a handle for a work result or GET_STATUS: mostly one the
// connection was assigned, else another job's, else one no server issued.
func (g *gdGen) handle(conn int) string {
	held := g.assigned[conn]
	switch r := g.rng.IntN(10); {
	case r < 7 && len(held) > 0:
		return held[max(0, len(held)-1-g.rng.IntN(3))]
	case r < 9 && len(g.created) > 0:
		return g.pick(g.created)
	}
	return gdUnknownHandle + strconv.Itoa(g.rng.IntN(3))
}

// next returns the next request.
func (g *gdGen) next() gdRequest {
	req := g.random()
	leaves := req.close || req.fatal || (req.raw == "" && (req.typ == codec.CantDo || req.typ == codec.ResetAbilities))
	if req.admin == "" && g.woken[req.conn] && leaves {
		// Skip: a woken worker that leaves a function (CANT_DO,
		// RESET_ABILITIES, closing) before it grabs passes its wakeup on
		// to another sleeping worker of the function in jobgate, which
		// wakes one worker per job; gearmand --worker-wakeup=1 loses
		// that wakeup (its default wakes every sleeper, so it never
		// needs one). Here a woken worker grabs first.
		return gdRequest{conn: req.conn, typ: codec.GrabJob}
	}
	if req.admin == "" && (g.woken[req.conn] || g.sleeping[req.conn]) && req.raw == "" && req.typ == codec.PreSleep {
		// Skip: gearmand clears a worker's "NOOP sent" mark only when it
		// grabs, so a woken worker that sleeps again without grabbing is
		// not woken again; jobgate clears it at PRE_SLEEP, as the protocol
		// document has it (a sleeping worker is woken when a job comes).
		// And a sleeping worker whose second PRE_SLEEP is answered with
		// NOOP at once stays asleep in gearmand, so the next job wakes it
		// again; jobgate counts it as woken, since it wakes one worker per
		// job and a wakeup spent on a worker already awake would leave a
		// sleeping one waiting. Here a woken or sleeping worker grabs
		// first, as workers do.
		return gdRequest{conn: req.conn, typ: codec.GrabJob}
	}
	if req.admin == "" && g.sleeping[req.conn] && leaves && !req.close && !req.fatal {
		for _, fn := range g.holding[req.conn] {
			if req.typ == codec.ResetAbilities || fn == req.args[0] {
				// Skip: gearmand requeues the jobs of a function a worker
				// gives up before it takes the worker off the function,
				// so a sleeping worker is woken by its own requeued job
				// (and with --worker-wakeup=1 nobody else is); jobgate
				// wakes another worker of the function. Here a sleeping
				// worker that runs jobs grabs instead.
				return gdRequest{conn: req.conn, typ: codec.GrabJob}
			}
		}
	}
	return req
}

// random returns a random request.
func (g *gdGen) random() gdRequest {
	conn := g.rng.IntN(gdConns)
	req := gdRequest{conn: conn}
	pkt := func(typ codec.Type, args ...string) gdRequest {
		req.typ, req.args = typ, args
		return req
	}
	fn := g.pick(gdFunctions)
	switch r := g.rng.IntN(40); {
	case r < 8:
		return g.submit(req)
	case r < 13 && slices.Contains(g.abilities[conn], fn):
		// Skip: gearmand adds a worker entry for each CAN_DO, so a
		// connection that declares a function twice counts as two workers
		// in "status" and shows it twice in "workers" (and takes two turns
		// in wakeups), until one CANT_DO removes both. That is a gearmand
		// bug clients do not rely on; jobgate keeps one ability per
		// function. A connection only declares functions it does not hold.
		return pkt(codec.CantDo, fn)
	case r < 11:
		return pkt(codec.CanDo, fn)
	case r < 12:
		return pkt(codec.CantDo, fn)
	case r < 13:
		// Far beyond the test's run: no timeout fires during it.
		return pkt(codec.CanDoTimeout, fn, "600000")
	case r < 14:
		if g.rng.IntN(2) == 0 {
			return pkt(codec.ResetAbilities)
		}
		return pkt(codec.SetClientID, g.pick([]string{"worker-1", "c2", "", strings.Repeat("i", 130)}))
	case r < 19:
		return pkt([]codec.Type{codec.GrabJob, codec.GrabJob, codec.GrabJobUniq, codec.GrabJobAll}[g.rng.IntN(4)])
	case r < 21:
		return pkt(codec.PreSleep)
	case r < 28:
		h := g.handle(conn)
		d := g.pick([]string{"out", "x", ""})
		switch g.rng.IntN(7) {
		case 0:
			return pkt(codec.WorkData, h, d)
		case 1:
			return pkt(codec.WorkWarning, h, d)
		case 2:
			// Skip: denominators of at most 11 bytes. gearmand copies it
			// into an 11-byte buffer and closes the connection when it is
			// longer; jobgate reads its first 10 bytes, as gearmand does
			// with 11.
			return pkt(codec.WorkStatus, h,
				g.pick([]string{"1", "50", "x", "-1", " 7x", "4294967296", "99999999999999999999", "-99999999999999999999"}),
				g.pick([]string{"2", "100", "", "-1", "12345678901", "+5"}))
		case 3:
			return pkt(codec.WorkFail, h)
		case 4:
			return pkt(codec.WorkException, h, d)
		default:
			return pkt(codec.WorkComplete, h, d)
		}
	case r < 30:
		if g.rng.IntN(2) == 0 {
			return pkt(codec.GetStatus, g.handle(conn))
		}
		return pkt(codec.GetStatusUnique, g.pick([]string{"u1", "u2", "nope", "a", "b", ""}))
	case r < 31:
		return pkt(codec.OptionReq, g.pick([]string{"exceptions", "EXCEPTIONS", "exceptions", "nonsense", ""}))
	case r < 32:
		return pkt(codec.EchoReq, g.pick([]string{"ping", ""}))
	case r < 34:
		return g.malformed(req)
	case r < 35 && len(g.waiting[conn]) > 0:
		// Skip: the connection waits for a foreground job. When its last
		// client leaves, jobgate drops the job at once (issue 4); gearmand
		// marks it "ignore", keeps counting it in "status" and "show
		// jobs", answers GET_STATUS for it as known and lets a later
		// submit with its unique attach to it (and then never runs it).
		// Clients see the same thing from both only in the common case,
		// that nobody asks, so connections close only when they wait for
		// nothing.
		return pkt(codec.EchoReq, "busy")
	case r < 35:
		if g.rng.IntN(2) == 0 {
			req.close = true
			return req
		}
		req.fatal = true
		req.raw = gdFatal[g.rng.IntN(len(gdFatal))]
		return req
	default:
		return gdRequest{admin: g.adminCommand()}
	}
}

// submit returns a submission of some kind.
func (g *gdGen) submit(req gdRequest) gdRequest {
	fn, uniq, data := g.pick(gdFunctions), g.pick(gdUniques), g.pick(gdData)
	tooLong := g.rng.IntN(10) == 0
	if tooLong {
		uniq = strings.Repeat("u", 65) // ARGUMENT_TOO_LARGE
	}
	kinds := []codec.Type{
		codec.SubmitJob, codec.SubmitJobBg, codec.SubmitJobHigh, codec.SubmitJobHighBg,
		codec.SubmitJobLow, codec.SubmitJobLowBg,
	}
	req.typ = kinds[g.rng.IntN(len(kinds))]
	req.args = []string{fn, uniq, data}
	switch g.rng.IntN(12) {
	case 0:
		// An epoch long past runs at once; one far ahead stays queued for
		// the whole run. Skip: the latter only for a function no worker
		// declares. gearmand 1.1.20 takes a job from the first priority
		// of a function that has any job, and when they are all in the
		// future it goes on to the next function, not the next priority:
		// a future normal-priority epoch job starves the function's
		// low-priority jobs (a gearmand bug; jobgate keeps future jobs
		// out of the queues).
		req.typ = codec.SubmitJobEpoch
		req.args = []string{fn, uniq, g.pick([]string{"1000", "-5", "abc", ""}), data}
		if g.rng.IntN(2) == 0 {
			// Skip: not past the int64 range, where gearmand closes the
			// connection (strtoll's ERANGE); jobgate takes it as never.
			req.args = []string{"later", uniq, g.pick([]string{"4000000000", "20000000000", "9223372036854775807"}), data}
		}
	case 1:
		if tooLong {
			// Skip: gearmand 1.1.20 does not check the unique of a reduce
			// job: it keeps 63 bytes, does not coalesce on them and
			// garbles the reducer ("red" is assigned as "rered"), a
			// gearmand bug.
			break
		}
		req.typ = g.pick2(codec.SubmitReduceJob, codec.SubmitReduceJobBackground)
		req.args = []string{fn, uniq, "red", "agg", data}
	}
	return req
}

func (g *gdGen) pick2(a, b codec.Type) codec.Type {
	if g.rng.IntN(2) == 0 {
		return a
	}
	return b
}

// malformed returns a request both servers answer with an ERROR and keep
// the connection for.
func (g *gdGen) malformed(req gdRequest) gdRequest {
	switch g.rng.IntN(4) {
	case 0:
		req.raw = "\x00RES\x00\x00\x00\x10\x00\x00\x00\x02hi" // INVALID_MAGIC
	case 1:
		req.raw = "\x00REQ\x00\x00\x00\x05\x00\x00\x00\x00" // unused type 5
	default:
		// Response types sent as requests: INVALID_COMMAND.
		types := []codec.Type{codec.Noop, codec.NoJob, codec.JobCreated, codec.EchoRes,
			codec.AllYours, codec.OptionRes, codec.StatusRes, codec.JobAssign}
		req.typ = types[g.rng.IntN(len(types))]
		req.args = make([]string, req.typ.NumArgs())
		for i := range req.args {
			req.args[i] = "x"
		}
	}
	return req
}

// adminCommand returns an admin line. maxqueue goes only to functions both
// servers know: gearmand ignores it for others, jobgate applies it (a
// deliberate difference, protocols/README.md). create function ends in
// CRLF: with a bare LF gearmand 1.1.20 drops the name's last byte (a bug,
// protocols/README.md).
func (g *gdGen) adminCommand() string {
	switch g.rng.IntN(16) {
	case 0:
		return "workers\n"
	case 1:
		return "prioritystatus\n"
	case 2:
		return "show jobs\n"
	case 3:
		return "show unique jobs\n"
	case 4, 5:
		var known []string
		for _, fn := range append(gdFunctions, "made") {
			if g.seen[fn] {
				known = append(known, fn)
			}
		}
		if len(known) == 0 || g.rng.IntN(6) == 0 {
			return "maxqueue\n"
		}
		return "maxqueue " + g.pick(known) + g.pick([]string{" 2", " 0", "", " 1 2 3", " 100"}) + "\n"
	case 6:
		return g.pick([]string{"version\n", "getpid\n", "verbose\n"})
	case 7:
		// Skip: only jobs no server has (ERR UNKNOWN_JOB). gearmand
		// cancels by marking the job "ignore": a queued one stays in
		// "status" and "show jobs" (and known to GET_STATUS) until a
		// worker's grab reaches it, and the clients of a running one get
		// WORK_FAIL and then its worker's WORK_COMPLETE too. jobgate
		// removes a queued job at once and detaches the clients.
		return "cancel job " + gdUnknownHandle + "1\n"
	case 8:
		return "create function " + g.pick([]string{"made", "f", "g"}) + "\r\n"
	case 9:
		return "drop function " + g.pick([]string{"made", "f", "g", "h", "nope"}) + "\n"
	case 10:
		return g.pick([]string{"bogus\n", "\n", "show\n", "show foo\n", "STATUS\r\n", "Workers\n", "cancel job\n", "create\n", "drop\n"})
	default:
		return "status\n"
	}
}

// precheck returns, for a request whose fate depends on the jobs queued,
// a function that tells from a "status" listing whether to leave it out;
// nil for other requests.
//   - Skip: gearmand 1.1.20 hands a worker the jobs of its functions in the
//     order it registered them, jobgate the highest priority across all
//     (as gearmand 2.0 does; see the transcript "priority is global across
//     a worker's functions"). So a grab by a worker with jobs waiting in
//     two or more of its functions is left out.
//   - Skip: gearmand's "drop function" leaves the function's jobs behind
//     (GET_STATUS still knows them; their memory points to a freed
//     function), jobgate fails and removes them. So a function is dropped
//     only when it has no jobs.
func (g *gdGen) precheck(req gdRequest) func(status string) bool {
	if fn, ok := strings.CutPrefix(req.admin, "drop function "); ok {
		fn = strings.TrimSpace(fn)
		return func(status string) bool {
			return strings.Contains("\n"+status, "\n"+fn+"\t") && !strings.Contains("\n"+status, "\n"+fn+"\t0\t")
		}
	}
	if req.admin != "" || req.raw != "" {
		return nil
	}
	switch req.typ {
	case codec.GrabJob, codec.GrabJobUniq, codec.GrabJobAll:
		if fns := g.abilities[req.conn]; len(fns) > 1 {
			return func(status string) bool { return gdWaiting(status, fns) > 1 }
		}
	}
	return nil
}

// gdWaiting counts the functions of fns that have jobs not running in a
// "status" listing.
func gdWaiting(status string, fns []string) int {
	n := 0
	for _, line := range strings.Split(status, "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 4 || !slices.Contains(fns, f[0]) {
			continue
		}
		total, _ := strconv.Atoi(f[1])
		running, _ := strconv.Atoi(f[2])
		if total > running {
			n++
		}
	}
	return n
}

// saw updates the generator with a step sent, its admin reply and its
// (masked) outputs.
func (g *gdGen) saw(req gdRequest, reply string, outs [][]gdPacket) {
	if fn, ok := strings.CutPrefix(req.admin, "create function "); ok && reply == "OK\r\n" {
		g.seen[strings.TrimSpace(fn)] = true
	}
	if fn, ok := strings.CutPrefix(req.admin, "drop function "); ok && reply == "OK\r\n" {
		delete(g.seen, strings.TrimSpace(fn))
	}
	if req.admin != "" {
		g.sawOutputs(outs)
		return
	}
	c := req.conn
	if req.close || req.fatal {
		g.abilities[c], g.assigned[c], g.waiting[c] = nil, nil, nil
	}
	switch {
	case req.close || req.fatal, req.raw != "":
	case req.typ == codec.GrabJob || req.typ == codec.GrabJobUniq || req.typ == codec.GrabJobAll:
		g.woken[c], g.sleeping[c] = false, false
	case req.typ == codec.PreSleep:
		g.sleeping[c] = true
	case req.typ == codec.WorkComplete || req.typ == codec.WorkFail || req.typ == codec.WorkException:
		if len(outs[c]) == 0 { // not JOB_NOT_FOUND
			delete(g.holding[c], req.args[0])
		}
	case req.typ == codec.CantDo || req.typ == codec.ResetAbilities:
		for h, fn := range g.holding[c] {
			if req.typ == codec.ResetAbilities || fn == req.args[0] {
				delete(g.holding[c], h)
			}
		}
	}
	if req.close || req.fatal {
		g.holding[c], g.sleeping[c], g.woken[c] = nil, false, false
	}
	switch req.typ {
	case codec.CanDo, codec.CanDoTimeout:
		if req.raw == "" && !slices.Contains(g.abilities[c], req.args[0]) {
			g.abilities[c] = append(g.abilities[c], req.args[0])
		}
		g.seen[req.args[0]] = true
	case codec.CantDo:
		g.abilities[c] = slices.DeleteFunc(g.abilities[c], func(f string) bool { return f == req.args[0] })
	case codec.ResetAbilities:
		g.abilities[c] = nil
	}
	for _, p := range outs[c] {
		switch p.typ {
		case codec.JobCreated:
			if !slices.Contains(g.created, p.args[0]) {
				g.created = append(g.created, p.args[0])
			}
			g.seen[req.args[0]] = true
			switch req.typ {
			case codec.SubmitJob, codec.SubmitJobHigh, codec.SubmitJobLow, codec.SubmitReduceJob:
				if g.waiting[c] == nil {
					g.waiting[c] = map[string]bool{}
				}
				g.waiting[c][p.args[0]] = true
			}
		case codec.JobAssign, codec.JobAssignUniq, codec.JobAssignAll:
			g.assigned[c] = append(g.assigned[c], p.args[0])
			if g.holding[c] == nil {
				g.holding[c] = map[string]string{}
			}
			g.holding[c][p.args[0]] = p.args[1]
		}
	}
	g.sawOutputs(outs)
}

// sawOutputs notes the foreground jobs finished and the workers woken.
func (g *gdGen) sawOutputs(outs [][]gdPacket) {
	for i, out := range outs {
		for _, p := range out {
			switch p.typ {
			case codec.WorkComplete, codec.WorkFail:
				delete(g.waiting[i], p.args[0])
			case codec.Noop:
				g.woken[i] = true
			}
		}
	}
}

var gdWorkersLine = regexp.MustCompile(`^\d+ (\S+ \S* :)(.*)$`)

// maskAdmin masks an admin reply. Masks:
//   - listings are compared as sets of lines: both servers print them in
//     the order of their internal tables, which clients do not rely on;
//   - "workers": the file descriptor differs by process; a worker's
//     functions are sorted for the same reason as the lines;
//   - "show jobs": handles as in maskPacket;
//   - "version" and "getpid": they differ by server and process.
func (s *gdServer) maskAdmin(line, got string) string {
	cmd := strings.ToLower(strings.TrimSpace(line)) // commands are case-insensitive
	if (cmd == "version" || cmd == "getpid") && strings.HasPrefix(got, "OK ") {
		return "OK *\n"
	}
	body, ok := strings.CutSuffix(got, ".\n")
	if !ok {
		return got
	}
	lines := strings.Split(body, "\n")
	lines = lines[:len(lines)-1] // the empty string after the last \n
	for i, l := range lines {
		switch cmd {
		case "workers":
			if m := gdWorkersLine.FindStringSubmatch(l); m != nil {
				fns := strings.Fields(m[2])
				slices.Sort(fns)
				lines[i] = "* " + m[1] + strings.Join(append([]string{""}, fns...), " ")
			}
		case "show jobs":
			if h, rest, ok := strings.Cut(l, "\t"); ok {
				lines[i] = s.token(h) + "\t" + rest
			}
		}
	}
	slices.Sort(lines)
	return fmt.Sprint(strings.Join(lines, "\n"), "\n.\n")
}
