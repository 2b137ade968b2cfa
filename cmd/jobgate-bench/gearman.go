package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"github.com/jobgate/jobgate/internal/uring"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
)

// gearmanBench is one Gearman load run. It is a closed-loop generator:
// each client keeps exactly -window requests outstanding (one, like a real
// client, by default) and sends the next only when one finishes; workers
// behave like real ones (GRAB_JOB, and PRE_SLEEP after NO_JOB until a
// NOOP). It is built to cost little per operation, because it shares the
// machine with the server it measures: no allocation or shared counter per
// packet, one read per batch of input, one write per batch of output, and
// latencies go into fixed-size histograms.
type gearmanBench struct {
	addr       string
	clients    int
	window     int
	workers    int
	duration   time.Duration
	n          int64
	workload   string
	bodySize   int
	function   string
	pid        int
	proxyPID   int
	loops      int
	goroutines bool

	request []byte       // the encoded request every client sends
	issued  atomic.Int64 // jobs or echoes started, to stop at n
	stop    atomic.Bool
	started time.Time
}

func runGearman(args []string, stdout, stderr io.Writer) int {
	b := &gearmanBench{}
	fs := flag.NewFlagSet("jobgate-bench gearman", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&b.addr, "addr", "127.0.0.1:4730", "server `address`")
	fs.IntVar(&b.clients, "clients", 16, "client connections")
	fs.IntVar(&b.window, "window", 1, "requests each client keeps in flight (1: wait for each reply, like a real client)")
	fs.IntVar(&b.workers, "workers", -1, "worker connections (default 4 for fg, 0 for bg and echo)")
	fs.DurationVar(&b.duration, "duration", 10*time.Second, "how long to run (ignored with -n)")
	fs.Int64Var(&b.n, "n", 0, "run this many jobs (or echoes) in total instead of -duration")
	fs.StringVar(&b.workload, "workload", "fg", "fg: submit, run and wait for completion; bg: background submits; echo: ECHO_REQ round trips")
	fs.IntVar(&b.bodySize, "body-size", 100, "workload (or echo) size in `bytes`")
	fs.StringVar(&b.function, "function", "", "function name (default jobgate-bench-WORKLOAD, so a bg run's queue does not feed a later fg run's workers)")
	fs.IntVar(&b.loops, "loops", 1, "event loops (goroutines on their own epoll) sharing the connections")
	fs.BoolVar(&b.goroutines, "goroutines", false, "drive each connection from its own goroutine instead of event loops")
	ioUring := fs.Bool("io-uring", true, "event loops read, and then write, their ready sockets with one io_uring_enter each (Linux, where the kernel allows); false: a system call per read and write")
	fs.IntVar(&b.pid, "pid", 0, "server process id: report its RSS growth and CPU time per operation (Linux)")
	fs.IntVar(&b.proxyPID, "proxy-pid", 0, "process id of a proxy between generator and server: report its CPU time per operation too (Linux)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	uring.Disable(!*ioUring)
	switch b.workload {
	case "fg", "bg", "echo":
	default:
		fmt.Fprintf(stderr, "jobgate-bench: unknown workload %q (fg, bg, echo)\n", b.workload)
		return 2
	}
	if b.workers < 0 {
		b.workers = 0
		if b.workload == "fg" {
			b.workers = 4
		}
	}
	if b.clients < 1 || b.window < 1 || b.loops < 1 || (b.workload == "fg" && b.workers < 1) {
		fmt.Fprintln(stderr, "jobgate-bench: need at least one client, a window of at least one (and one worker for fg)")
		return 2
	}
	if b.function == "" {
		b.function = "jobgate-bench-" + b.workload
	}
	body := make([]byte, b.bodySize)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
	switch b.workload {
	case "fg":
		b.request = codec.AppendPacket(nil, codec.Req, codec.SubmitJob, []byte(b.function), nil, body)
	case "bg":
		b.request = codec.AppendPacket(nil, codec.Req, codec.SubmitJobBg, []byte(b.function), nil, body)
	case "echo":
		b.request = codec.AppendPacket(nil, codec.Req, codec.EchoReq, body)
	}
	if err := b.run(stdout); err != nil {
		fmt.Fprintf(stderr, "jobgate-bench: %v\n", err)
		return 1
	}
	return 0
}

// workerStats counts what one worker got; each worker owns its own, so the
// hot path touches no shared cache line.
type workerStats struct {
	noops, noJobs int64
}

func (b *gearmanBench) run(stdout io.Writer) error {
	rss0, cpu0 := rssBytes(b.pid), cpuTime(b.pid)
	proxy0 := cpuTime(b.proxyPID)
	self0 := selfCPU()
	var all []net.Conn
	defer func() {
		for _, nc := range all {
			nc.Close()
		}
	}()
	dial := func() (net.Conn, error) {
		nc, err := net.Dial("tcp", b.addr)
		if err == nil {
			all = append(all, nc)
		}
		return nc, err
	}
	conns := make([]benchConn, 0, b.workers+b.clients)
	workers := make([]*benchWorker, b.workers)
	for i := range workers {
		nc, err := dial()
		if err != nil {
			return err
		}
		workers[i] = b.newWorker(nc)
		conns = append(conns, workers[i])
	}
	clients := make([]*benchClient, b.clients)
	for i := range clients {
		nc, err := dial()
		if err != nil {
			return err
		}
		clients[i] = b.newClient(nc)
		conns = append(conns, clients[i])
	}
	b.started = time.Now()
	if b.n == 0 {
		timer := time.AfterFunc(b.duration, func() { b.stop.Store(true) })
		defer timer.Stop()
	}
	var err error
	if b.goroutines {
		err = b.runGoroutines(workers, clients)
	} else {
		err = b.runLoops(conns)
	}
	elapsed := time.Since(b.started)
	b.stop.Store(true)
	self := selfCPU() - self0
	if err != nil {
		return err
	}
	var h hdrHist
	for _, c := range clients {
		h.merge(&c.hist)
	}
	ops := int64(h.n)
	unit := "jobs"
	if b.workload == "echo" {
		unit = "echoes"
	}
	rate := float64(ops) / elapsed.Seconds()
	fmt.Fprintf(stdout, "workload=%s clients=%d window=%d workers=%d body=%d %s=%d elapsed=%.2fs %s/s=%.0f p50=%v p99=%v max=%v\n",
		b.workload, b.clients, b.window, b.workers, b.bodySize, unit, ops, elapsed.Seconds(),
		unit, rate, h.quantile(0.50), h.quantile(0.99), h.quantile(1))
	if ops == 0 {
		return nil
	}
	if b.workers > 0 {
		var noJobs, noops int64
		for _, w := range workers {
			noJobs += w.stats.noJobs
			noops += w.stats.noops
		}
		fmt.Fprintf(stdout, "workers got %.2f NO_JOB and %.2f NOOP per job\n",
			float64(noJobs)/float64(ops), float64(noops)/float64(ops))
	}
	perOp := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 / float64(ops) }
	fmt.Fprintf(stdout, "generator cpu: %v, %.1fµs/op\n", self, perOp(self))
	serverCPU := 0.0
	if b.pid > 0 {
		rss1, cpu1 := rssBytes(b.pid), cpuTime(b.pid)
		serverCPU = perOp(cpu1 - cpu0)
		fmt.Fprintf(stdout, "server rss: %d -> %d bytes, %.0f bytes/op; server cpu: %v, %.1fµs/op\n",
			rss0, rss1, float64(rss1-rss0)/float64(ops), cpu1-cpu0, serverCPU)
	}
	proxyCPU := 0.0
	if b.proxyPID > 0 {
		d := cpuTime(b.proxyPID) - proxy0
		proxyCPU = perOp(d)
		fmt.Fprintf(stdout, "proxy cpu: %v, %.1fµs/op\n", d, proxyCPU)
	}
	// One line for scripts: rate, latencies in µs, CPU per operation in µs.
	fmt.Fprintf(stdout, "summary ops_per_s=%.0f p50_us=%.1f p99_us=%.1f server_cpu_us=%.2f gen_cpu_us=%.2f proxy_cpu_us=%.2f\n",
		rate, float64(h.quantile(0.50).Nanoseconds())/1e3, float64(h.quantile(0.99).Nanoseconds())/1e3,
		serverCPU, perOp(self), proxyCPU)
	return nil
}

// runGoroutines drives each connection from its own goroutine with
// blocking reads: the portable way, and the costlier one.
func (b *gearmanBench) runGoroutines(workers []*benchWorker, clients []*benchClient) error {
	errc := make(chan error, len(workers)+len(clients))
	var wg, cwg sync.WaitGroup
	drive := func(c benchConn, nc net.Conn) error {
		r := codec.NewReader(bufio.NewReaderSize(flushReader{nc, c}, 64<<10), codec.Limits{})
		for !c.done() {
			f, err := r.ReadFrame()
			if err != nil {
				return err
			}
			if err := c.handle(&f); err != nil {
				return err
			}
		}
		return nil
	}
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := drive(w, w.nc); err != nil && !b.stop.Load() {
				errc <- err
			}
		}()
	}
	for _, c := range clients {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			if err := drive(c, c.nc); err != nil {
				errc <- err
			}
		}()
	}
	cwg.Wait()
	b.stop.Store(true)
	for _, w := range workers {
		w.nc.Close()
	}
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
	}
	return nil
}

// next reports whether the client should start another operation.
func (b *gearmanBench) next() bool {
	if b.n > 0 {
		return b.issued.Add(1) <= b.n
	}
	return !b.stop.Load()
}

// flushReader is a connection as seen by a bufio.Reader: before it reads
// (that is, when everything received so far has been handled) it writes
// the requests queued meanwhile, so a batch of replies costs one read and
// the requests they trigger one write.
type flushReader struct {
	nc net.Conn
	c  benchConn
}

// Read writes what is queued, then reads.
func (f flushReader) Read(p []byte) (int, error) {
	if out := f.c.output(); len(out) > 0 {
		if _, err := f.nc.Write(out); err != nil {
			return 0, err
		}
	}
	return f.nc.Read(p)
}

// benchConn is one generator connection's protocol state, driven either
// by a goroutine (runGoroutines) or by an event loop (runLoops).
type benchConn interface {
	// handle takes one frame from the server and queues what answers it.
	handle(f *codec.Frame) error
	// output returns the requests queued so far, emptying the queue; the
	// slice is valid until the next handle.
	output() []byte
	// done reports whether the connection has nothing more to do.
	done() bool
	conn() net.Conn
}

// pending is one outstanding request of a client.
type pending struct {
	start  time.Duration // since b.started
	handle [codec.DefaultMaxHandleSize + 1]byte
	hlen   int // 0 until JOB_CREATED
}

// benchClient is one client connection's closed loop: it keeps b.window
// requests in flight and records each one's latency: submit to
// WORK_COMPLETE (fg), to JOB_CREATED (bg) or to ECHO_RES.
type benchClient struct {
	b        *gearmanBench
	nc       net.Conn
	out      []byte
	inflight []pending // oldest first; replies to own requests come in order
	created  int       // fg: inflight[:created] have their handle
	hist     hdrHist
}

func (b *gearmanBench) newClient(nc net.Conn) *benchClient {
	c := &benchClient{b: b, nc: nc, out: make([]byte, 0, len(b.request)*b.window), inflight: make([]pending, 0, b.window)}
	for len(c.inflight) < b.window && c.issue() {
	}
	return c
}

func (c *benchClient) conn() net.Conn { return c.nc }
func (c *benchClient) done() bool     { return len(c.inflight) == 0 }

func (c *benchClient) output() []byte {
	o := c.out
	c.out = c.out[:0]
	return o
}

// issue queues the next request unless the run is over.
func (c *benchClient) issue() bool {
	if !c.b.next() {
		return false
	}
	c.out = append(c.out, c.b.request...)
	c.inflight = append(c.inflight, pending{start: time.Since(c.b.started)})
	return true
}

// finish records request i and replaces it.
func (c *benchClient) finish(i int) {
	c.hist.record(time.Since(c.b.started) - c.inflight[i].start)
	c.inflight = append(c.inflight[:i], c.inflight[i+1:]...)
	c.issue()
}

func (c *benchClient) handle(f *codec.Frame) error {
	switch f.Packet.Type {
	case codec.JobCreated:
		if c.b.workload == "bg" {
			c.finish(0)
			return nil
		}
		if c.created == len(c.inflight) {
			return fmt.Errorf("client got an unexpected JOB_CREATED")
		}
		p := &c.inflight[c.created]
		p.hlen = copy(p.handle[:], f.Packet.Arg(0))
		c.created++
	case codec.EchoRes:
		c.finish(0)
	case codec.WorkComplete:
		hd := f.Packet.Arg(0)
		i := 0
		for i < c.created && !bytes.Equal(c.inflight[i].handle[:c.inflight[i].hlen], hd) {
			i++
		}
		if i == c.created {
			return fmt.Errorf("client got WORK_COMPLETE for unknown handle %q", hd)
		}
		c.created--
		c.finish(i)
	case codec.WorkFail, codec.WorkException, codec.Error:
		return fmt.Errorf("client got %s", f.String())
	}
	return nil
}

// benchWorker grabs jobs and completes them at once, like a real worker:
// the completion and the next GRAB_JOB go out in one write; after NO_JOB
// it sends PRE_SLEEP and grabs again when woken by NOOP.
type benchWorker struct {
	nc     net.Conn
	out    []byte
	result []byte
	stats  workerStats
}

func (b *gearmanBench) newWorker(nc net.Conn) *benchWorker {
	w := &benchWorker{nc: nc, result: []byte("ok")}
	w.out = codec.AppendPacket(w.out, codec.Req, codec.CanDo, []byte(b.function))
	w.out = codec.AppendPacket(w.out, codec.Req, codec.GrabJob)
	return w
}

func (w *benchWorker) conn() net.Conn { return w.nc }
func (w *benchWorker) done() bool     { return false }

func (w *benchWorker) output() []byte {
	o := w.out
	w.out = w.out[:0]
	return o
}

func (w *benchWorker) handle(f *codec.Frame) error {
	switch f.Packet.Type {
	case codec.JobAssign:
		w.out = codec.AppendPacket(w.out, codec.Req, codec.WorkComplete, f.Packet.Arg(0), w.result)
		w.out = codec.AppendPacket(w.out, codec.Req, codec.GrabJob)
	case codec.NoJob:
		w.stats.noJobs++
		w.out = codec.AppendPacket(w.out, codec.Req, codec.PreSleep)
	case codec.Noop:
		w.stats.noops++
		w.out = codec.AppendPacket(w.out, codec.Req, codec.GrabJob)
	default:
		return fmt.Errorf("worker got %s", f.String())
	}
	return nil
}
