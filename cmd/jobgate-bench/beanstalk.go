package main

import (
	"errors"
	"flag"
	"fmt"
	"github.com/jobgate/jobgate/internal/uring"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	wire "github.com/jobgate/jobgate/codec/beanstalk"
)

const beanstalkUsage = `Usage: jobgate-bench beanstalk [flags]

Workloads (each connection runs one request at a time unless pipelined):
  put             every connection puts jobs
  reserve-delete  the tube is filled first, then every connection reserves and deletes
  cycle           P producers put while C consumers reserve and delete
  pipelined-put   every connection sends puts in batches of -pipeline

Prints throughput in jobs/s and p50/p99 latency of one unit of work (a put,
a reserve+delete, or a pipelined batch), and the CPU the generator itself
spent per job (gen_cpu_us). On Linux one event loop (-loops for more)
drives every connection; -goroutines gives each its own goroutine, the
old and costlier way. With -compare, runs alternate between two
servers for -rounds each, the order flipping every round, and a summary
gives the median rates and their ratio (first / second).

Flags:
`

// beanstalkBenchConfig is what the flags set.
type beanstalkBenchConfig struct {
	addr       string
	compare    string
	rounds     int
	workload   string
	conns      int
	producers  int
	consumers  int
	duration   time.Duration
	n          int64
	bodySize   int
	pipeline   int
	prefill    int64
	tube       string
	keep       bool
	pid        int
	proxyPID   int
	comparePID int
	loops      int
	goroutines bool
}

// beanstalkBench is one run against one server.
type beanstalkBench struct {
	beanstalkBenchConfig
	stop       atomic.Bool
	claimed    atomic.Int64 // jobs claimed by producers (-n mode)
	done       atomic.Int64 // units of work done
	doneByStop atomic.Int64 // units done when the clock ran out
	endAt      atomic.Int64 // Unix ns when the -n'th job was done
	abort      atomic.Bool  // a connection failed: every driver stops
}

func runBeanstalk(args []string, stdout, stderr io.Writer) int {
	var cfg beanstalkBenchConfig
	fs := flag.NewFlagSet("jobgate-bench beanstalk", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, beanstalkUsage)
		fs.PrintDefaults()
	}
	fs.StringVar(&cfg.addr, "addr", "127.0.0.1:11300", "server `address`")
	fs.StringVar(&cfg.compare, "compare", "", "a second server `address` (e.g. a real beanstalkd): runs alternate between the two and the medians are compared")
	fs.IntVar(&cfg.rounds, "rounds", 1, "runs per server")
	fs.StringVar(&cfg.workload, "workload", "cycle", "put, reserve-delete, cycle or pipelined-put")
	fs.IntVar(&cfg.conns, "conns", 4, "connections (put, reserve-delete, pipelined-put)")
	fs.IntVar(&cfg.producers, "producers", 4, "producer connections (cycle)")
	fs.IntVar(&cfg.consumers, "consumers", 4, "consumer connections (cycle)")
	fs.DurationVar(&cfg.duration, "duration", 10*time.Second, "how long to run (ignored with -n)")
	fs.Int64Var(&cfg.n, "n", 0, "run until this many jobs are done instead of for -duration")
	fs.IntVar(&cfg.bodySize, "body-size", 100, "job body `bytes`")
	fs.IntVar(&cfg.pipeline, "pipeline", 100, "puts per batch (pipelined-put)")
	fs.Int64Var(&cfg.prefill, "prefill", 200000, "jobs put before reserve-delete runs (without -n)")
	fs.StringVar(&cfg.tube, "tube", "jobgate-bench", "tube to use")
	fs.BoolVar(&cfg.keep, "keep", false, "leave the jobs a run put in the server (to measure its memory) instead of deleting them")
	fs.IntVar(&cfg.pid, "pid", 0, "server process id: report its CPU time per job (Linux)")
	fs.IntVar(&cfg.comparePID, "compare-pid", 0, "process id of the -compare server: report its CPU time per job too (Linux)")
	fs.IntVar(&cfg.proxyPID, "proxy-pid", 0, "process id of a proxy between generator and server: report its CPU time per job too (Linux; without -compare)")
	fs.IntVar(&cfg.loops, "loops", 1, "event loops (goroutines on their own epoll, Linux) sharing the connections")
	fs.BoolVar(&cfg.goroutines, "goroutines", false, "drive each connection from its own goroutine instead of event loops")
	ioUring := fs.Bool("io-uring", true, "event loops read, and then write, their ready sockets with one io_uring_enter each (Linux, where the kernel allows); false: a system call per read and write")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	uring.Disable(!*ioUring)
	if cfg.conns < 1 || cfg.producers < 1 || cfg.consumers < 1 || cfg.bodySize < 0 || cfg.pipeline < 1 || cfg.rounds < 1 || cfg.loops < 1 || !wire.ValidName([]byte(cfg.tube)) {
		fmt.Fprintln(stderr, "jobgate-bench beanstalk: -conns, -producers, -consumers, -pipeline, -rounds, -loops must be positive, -body-size not negative, -tube a valid name")
		return 2
	}
	if cfg.compare != "" && cfg.proxyPID > 0 || cfg.compare == "" && cfg.comparePID > 0 {
		fmt.Fprintln(stderr, "jobgate-bench beanstalk: -proxy-pid does not go with -compare, -compare-pid needs it")
		return 2
	}
	addrs := []string{cfg.addr}
	if cfg.compare != "" {
		addrs = append(addrs, cfg.compare)
	}
	pids := []int{cfg.pid, cfg.comparePID}
	rates := make([][]float64, len(addrs))
	cpus := make([][]float64, len(addrs)) // server CPU µs per job
	p99s := make([][]float64, len(addrs)) // µs
	gens := make([][]float64, len(addrs)) // generator CPU µs per job
	for round := range cfg.rounds {
		for k := range addrs {
			// The two servers take turns going first: the run before
			// weighs on the next one (16 KiB puts: about 1.5x for
			// whichever runs first, docs/BENCHMARKS.md "Latest").
			i := k
			if round%2 == 1 {
				i = len(addrs) - 1 - k
			}
			addr := addrs[i]
			b := &beanstalkBench{beanstalkBenchConfig: cfg}
			b.addr, b.pid = addr, pids[i]
			res, err := b.run()
			if err == nil && !cfg.keep {
				err = b.cleanup()
			}
			if err != nil {
				fmt.Fprintf(stderr, "jobgate-bench beanstalk: %s: %v\n", addr, err)
				return 1
			}
			res.print(stdout, b)
			rates[i] = append(rates[i], float64(res.jobs)/res.elapsed.Seconds())
			cpus[i] = append(cpus[i], res.perJob(res.serverCPU))
			p99s[i] = append(p99s[i], float64(res.lat.quantile(0.99).Nanoseconds())/1e3)
			gens[i] = append(gens[i], res.perJob(res.genCPU))
		}
	}
	if len(addrs) == 2 {
		a, b := median(rates[0]), median(rates[1])
		fmt.Fprintf(stdout, "summary workload=%s median rate %s=%.0f %s=%.0f jobs/s ratio=%.2f (%d rounds)",
			cfg.workload, addrs[0], a, addrs[1], b, a/b, cfg.rounds)
		fmt.Fprintf(stdout, "; p99 %.0f/%.0f us", median(p99s[0]), median(p99s[1]))
		if cfg.pid > 0 && cfg.comparePID > 0 {
			ca, cb := median(cpus[0]), median(cpus[1])
			fmt.Fprintf(stdout, "; server cpu %.2f/%.2f us per job", ca, cb)
			if cb > 0 { // /proc counts in ticks of 10 ms: a short run may show none
				fmt.Fprintf(stdout, ", ratio=%.2f", ca/cb)
			}
		}
		fmt.Fprintf(stdout, "; generator cpu %.2f/%.2f us per job", median(gens[0]), median(gens[1]))
		fmt.Fprintln(stdout)
	}
	return 0
}

// median returns the middle value of xs (the mean of the two middle ones
// for an even count).
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// beanstalkResult is what a run measured.
type beanstalkResult struct {
	jobs    int64
	elapsed time.Duration
	lat     hdrHist // one per unit of work of the main workers
	putLat  hdrHist // one per put of the cycle's producers
	// CPU time the server and proxy (-pid, -proxy-pid) and this process
	// spent over the measured span, prefill and cleanup excluded.
	serverCPU, proxyCPU, genCPU time.Duration
}

func (r *beanstalkResult) print(w io.Writer, b *beanstalkBench) {
	who := fmt.Sprintf("conns=%d", b.conns)
	unit := map[string]string{"put": "put", "pipelined-put": "batch", "reserve-delete": "reserve+delete"}[b.workload]
	if b.workload == "cycle" {
		who = fmt.Sprintf("producers=%d consumers=%d", b.producers, b.consumers)
		unit = "reserve+delete"
	}
	fmt.Fprintf(w, "workload=%s addr=%s %s body=%dB\n", b.workload, b.addr, who, b.bodySize)
	fmt.Fprintf(w, "jobs=%d elapsed=%.2fs rate=%.0f jobs/s %s\n",
		r.jobs, r.elapsed.Seconds(), float64(r.jobs)/r.elapsed.Seconds(), percentiles(unit, &r.lat))
	if b.workload == "cycle" {
		fmt.Fprintf(w, "%s\n", percentiles("put", &r.putLat))
	}
	// One line for scripts: rate, latencies of the unit of work in µs, CPU
	// per job in µs.
	perJob := r.perJob
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	fmt.Fprintf(w, "result ops_per_s=%.0f p50_us=%.1f p99_us=%.1f server_cpu_us=%.2f proxy_cpu_us=%.2f gen_cpu_us=%.2f\n",
		float64(r.jobs)/r.elapsed.Seconds(), us(r.lat.quantile(0.50)), us(r.lat.quantile(0.99)), perJob(r.serverCPU), perJob(r.proxyCPU), perJob(r.genCPU))
}

// percentiles formats the p50 and p99 of lat, and how many it holds.
func percentiles(unit string, lat *hdrHist) string {
	return fmt.Sprintf("%s p50=%s p99=%s samples=%d", unit, fmtLatency(lat.quantile(0.50)), fmtLatency(lat.quantile(0.99)), lat.n)
}

func fmtLatency(d time.Duration) string {
	return fmt.Sprintf("%.3fms", float64(d)/float64(time.Millisecond))
}

func (b *beanstalkBench) run() (*beanstalkResult, error) {
	switch b.workload {
	case "put":
		return b.runWorkers(b.conns, rolePut, 0)
	case "pipelined-put":
		return b.runWorkers(b.conns, rolePipelined, 0)
	case "reserve-delete":
		fill := b.prefill
		if b.n > 0 {
			fill = b.n
		}
		if err := b.fill(fill); err != nil {
			return nil, err
		}
		return b.runWorkers(b.conns, roleConsume, 0)
	case "cycle":
		return b.runWorkers(b.consumers, roleConsume, b.producers)
	}
	return nil, fmt.Errorf("unknown workload %q", b.workload)
}

// bsRole is what one connection of a run does.
type bsRole uint8

const (
	rolePut       bsRole = iota // put, wait for INSERTED, again
	rolePipelined               // put a batch of -pipeline, wait for every INSERTED, again
	roleConsume                 // reserve, delete, again
)

// bsWorker is one connection of a run: its role and the latencies of its
// units of work (each worker owns its histogram).
type bsWorker struct {
	c        *beanstalkClient
	role     bsRole
	producer bool // a cycle's producer: its latencies are the put line's
	hist     hdrHist
}

// runWorkers runs n connections in role (and producers putting ones, for
// the cycle) with the event loops or the goroutines, and gathers their
// latencies. Units of work are counted in b.done.
func (b *beanstalkBench) runWorkers(n int, role bsRole, producers int) (*beanstalkResult, error) {
	ws := make([]*bsWorker, 0, n+producers)
	for range n {
		ws = append(ws, &bsWorker{role: role})
	}
	for range producers {
		ws = append(ws, &bsWorker{role: rolePut, producer: true})
	}
	for _, w := range ws {
		c, err := b.dial()
		if err != nil {
			return nil, err
		}
		defer c.nc.Close()
		w.c = c
	}
	server0, proxy0, self0 := cpuTime(b.pid), cpuTime(b.proxyPID), selfCPU()
	start := time.Now()
	var stopAt, serverAtStop, proxyAtStop, selfAtStop atomic.Int64
	stopped := make(chan struct{}) // closed once the figures at the stop are stored
	if b.n == 0 {
		timer := time.AfterFunc(b.duration, func() {
			defer close(stopped)
			serverAtStop.Store(int64(cpuTime(b.pid)))
			proxyAtStop.Store(int64(cpuTime(b.proxyPID)))
			selfAtStop.Store(int64(selfCPU()))
			stopAt.Store(int64(time.Since(start)))
			// Stop first, then count: what completes after the count was
			// in flight at the stop, at most one unit per connection
			// (a timed cycle's consumers go on draining the backlog,
			// neither counted nor timed: afterStop).
			b.stop.Store(true)
			b.doneByStop.Store(b.done.Load())
		})
		defer timer.Stop()
	}
	var err error
	if b.goroutines {
		err = b.runGoroutines(ws)
	} else {
		err = b.runLoops(ws, start)
	}
	if err != nil {
		b.stop.Store(true)
		return nil, err
	}
	res := &beanstalkResult{jobs: b.done.Load(), elapsed: time.Since(start),
		serverCPU: cpuTime(b.pid) - server0, proxyCPU: cpuTime(b.proxyPID) - proxy0, genCPU: selfCPU() - self0}
	timedOut := b.afterStop() // read once: the timer may fire meanwhile
	if timedOut {
		<-stopped
	}
	switch {
	case timedOut:
		res.jobs, res.elapsed = b.doneByStop.Load(), time.Duration(stopAt.Load())
		res.serverCPU = time.Duration(serverAtStop.Load()) - server0
		res.proxyCPU = time.Duration(proxyAtStop.Load()) - proxy0
		res.genCPU = time.Duration(selfAtStop.Load()) - self0
	case b.n > 0 && b.endAt.Load() > 0:
		res.elapsed = time.Duration(b.endAt.Load() - start.UnixNano())
	}
	for _, w := range ws {
		if w.producer {
			res.putLat.merge(&w.hist)
		} else {
			res.lat.merge(&w.hist)
		}
	}
	return res, nil
}

// afterStop reports whether a timed run (-duration) has reached its stop.
// Work begun after it, such as a cycle's consumers draining the backlog,
// is neither counted nor timed.
func (b *beanstalkBench) afterStop() bool { return b.n == 0 && b.stop.Load() }

// more claims the next job for a producer: false when the run is over.
func (b *beanstalkBench) more(k int64) bool {
	if b.abort.Load() {
		return false
	}
	if b.n > 0 {
		return b.claimed.Add(k) <= b.n
	}
	return !b.stop.Load()
}

// fill puts n jobs in the tube, pipelined over b.conns connections.
func (b *beanstalkBench) fill(n int64) error {
	var left atomic.Int64
	left.Store(n)
	var wg sync.WaitGroup
	errs := make(chan error, b.conns)
	for range b.conns {
		c, err := b.dial()
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.nc.Close()
			for {
				k := min(int64(b.pipeline), left.Add(-int64(b.pipeline))+int64(b.pipeline))
				if k <= 0 {
					return
				}
				for range k {
					c.cmd = wire.Command{Verb: wire.Put, Pri: 1024, TTR: 120, Body: c.body}
					c.w.WriteCommand(&c.cmd)
				}
				if err := c.w.Flush(); err != nil {
					errs <- err
					return
				}
				for range k {
					if err := c.expect(wire.Inserted); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// beanstalkClient is a minimal, allocation-free client connection, so the
// generator measures the server rather than itself.
type beanstalkClient struct {
	nc   net.Conn
	w    *wire.Writer
	r    *wire.ReplyReader
	cmd  wire.Command
	body []byte
}

func (b *beanstalkBench) dial() (*beanstalkClient, error) {
	nc, err := net.DialTimeout("tcp", b.addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	c := &beanstalkClient{nc: nc, w: wire.NewWriter(nc), r: wire.NewReplyReader(nc, wire.Limits{MaxJobSize: 1 << 30}), body: make([]byte, b.bodySize)}
	for i := range c.body {
		c.body[i] = 'a' + byte(i%26)
	}
	// The tube set-up must be answered, and as asked: a server (or a
	// gateway rule) that refuses it would have the run measure another
	// tube.
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	for _, step := range []struct {
		cmd  wire.Command
		want wire.ReplyKind
	}{
		{wire.Command{Verb: wire.Use, Tube: []byte(b.tube)}, wire.Using},
		{wire.Command{Verb: wire.Watch, Tube: []byte(b.tube)}, wire.Watching},
		{wire.Command{Verb: wire.Ignore, Tube: []byte("default")}, wire.Watching},
	} {
		c.cmd = step.cmd
		r, err := c.roundTrip()
		if err == nil && r.Kind != step.want {
			err = fmt.Errorf("%s %s: %s", step.cmd.Verb, step.cmd.Tube, r.Kind)
		}
		if err != nil {
			nc.Close()
			return nil, err
		}
	}
	_ = nc.SetDeadline(time.Time{})
	return c, nil
}

func (c *beanstalkClient) roundTrip() (*wire.Reply, error) {
	if err := c.w.WriteCommand(&c.cmd); err != nil {
		return nil, err
	}
	if err := c.w.Flush(); err != nil {
		return nil, err
	}
	return c.r.ReadReply()
}

func (c *beanstalkClient) put() (uint64, error) {
	c.cmd = wire.Command{Verb: wire.Put, Pri: 1024, TTR: 120, Body: c.body}
	r, err := c.roundTrip()
	if err != nil {
		return 0, err
	}
	if r.Kind != wire.Inserted {
		return 0, fmt.Errorf("put: %s", r.Kind)
	}
	return r.ID, nil
}

func (c *beanstalkClient) expect(kind wire.ReplyKind) error {
	r, err := c.r.ReadReply()
	if err != nil {
		return err
	}
	if r.Kind != kind {
		return fmt.Errorf("got %s, want %s", r.Kind, kind)
	}
	return nil
}

// cleanup deletes the jobs a run left in the tube, over -conns
// connections, so runs do not pile jobs up in the servers.
func (b *beanstalkBench) cleanup() error {
	errs := make(chan error, b.conns)
	for range b.conns {
		c, err := b.dial()
		if err != nil {
			return err
		}
		go func() {
			defer c.nc.Close()
			errs <- c.drain()
		}()
	}
	var first error
	for range b.conns {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// drain deletes what is left in the tube after a timed reserve-delete run,
// in pipelined batches, so the next run starts from an empty server.
func (c *beanstalkClient) drain() error {
	const batch = 100
	for {
		for range batch {
			c.cmd = wire.Command{Verb: wire.ReserveWithTimeout}
			c.w.WriteCommand(&c.cmd)
		}
		if err := c.w.Flush(); err != nil {
			return err
		}
		var ids []uint64
		for range batch {
			r, err := c.r.ReadReply()
			if err != nil {
				return err
			}
			if r.Kind == wire.Reserved {
				ids = append(ids, r.ID)
			}
		}
		for _, id := range ids {
			c.cmd = wire.Command{Verb: wire.Delete, ID: id}
			c.w.WriteCommand(&c.cmd)
		}
		if err := c.w.Flush(); err != nil {
			return err
		}
		for range ids {
			if err := c.expect(wire.Deleted); err != nil {
				return err
			}
		}
		if len(ids) < batch {
			return nil
		}
	}
}

// perJob returns d in µs per job done.
func (r *beanstalkResult) perJob(d time.Duration) float64 {
	if r.jobs == 0 {
		return 0
	}
	return float64(d.Nanoseconds()) / 1e3 / float64(r.jobs)
}
