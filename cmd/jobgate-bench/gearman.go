package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
)

// gearmanBench is one Gearman load run.
type gearmanBench struct {
	addr     string
	clients  int
	workers  int
	duration time.Duration
	n        int64
	workload string
	bodySize int
	function string
	pid      int

	body    []byte
	issued  atomic.Int64 // jobs or echoes started, to stop at n
	noops   atomic.Int64 // NOOPs the workers got
	noJobs  atomic.Int64 // NO_JOBs the workers got
	stop    atomic.Bool
	started time.Time
}

func runGearman(args []string, stdout, stderr io.Writer) int {
	b := &gearmanBench{}
	fs := flag.NewFlagSet("jobgate-bench gearman", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&b.addr, "addr", "127.0.0.1:4730", "server `address`")
	fs.IntVar(&b.clients, "clients", 16, "client connections, each with one request in flight")
	fs.IntVar(&b.workers, "workers", -1, "worker connections (default 4 for fg, 0 for bg and echo)")
	fs.DurationVar(&b.duration, "duration", 10*time.Second, "how long to run (ignored with -n)")
	fs.Int64Var(&b.n, "n", 0, "run this many jobs (or echoes) in total instead of -duration")
	fs.StringVar(&b.workload, "workload", "fg", "fg: submit, run and wait for completion; bg: background submits; echo: ECHO_REQ round trips")
	fs.IntVar(&b.bodySize, "body-size", 100, "workload (or echo) size in `bytes`")
	fs.StringVar(&b.function, "function", "", "function name (default jobgate-bench-WORKLOAD, so a bg run's queue does not feed a later fg run's workers)")
	fs.IntVar(&b.pid, "pid", 0, "server process id: report its RSS growth and CPU time per operation (Linux)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
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
	if b.clients < 1 || (b.workload == "fg" && b.workers < 1) {
		fmt.Fprintln(stderr, "jobgate-bench: need at least one client (and one worker for fg)")
		return 2
	}
	if b.function == "" {
		b.function = "jobgate-bench-" + b.workload
	}
	b.body = make([]byte, b.bodySize)
	for i := range b.body {
		b.body[i] = 'a' + byte(i%26)
	}
	if err := b.run(stdout); err != nil {
		fmt.Fprintf(stderr, "jobgate-bench: %v\n", err)
		return 1
	}
	return 0
}

func (b *gearmanBench) run(stdout io.Writer) error {
	rss0, cpu0 := rssBytes(b.pid), cpuTime(b.pid)
	var workerConns []net.Conn
	var wg sync.WaitGroup
	errc := make(chan error, b.clients+b.workers)
	for i := 0; i < b.workers; i++ {
		nc, err := net.Dial("tcp", b.addr)
		if err != nil {
			return err
		}
		workerConns = append(workerConns, nc)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := b.worker(nc); err != nil && !b.stop.Load() {
				errc <- err
			}
		}()
	}
	lat := make([][]time.Duration, b.clients)
	clientConns := make([]net.Conn, b.clients)
	for i := range clientConns {
		nc, err := net.Dial("tcp", b.addr)
		if err != nil {
			return err
		}
		clientConns[i] = nc
	}
	var cwg sync.WaitGroup
	b.started = time.Now()
	for i, nc := range clientConns {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			var err error
			lat[i], err = b.client(nc)
			if err != nil {
				errc <- err
			}
		}()
	}
	if b.n == 0 {
		timer := time.AfterFunc(b.duration, func() { b.stop.Store(true) })
		defer timer.Stop()
	}
	cwg.Wait()
	elapsed := time.Since(b.started)
	b.stop.Store(true)
	for _, nc := range append(workerConns, clientConns...) {
		nc.Close()
	}
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	pct := func(p float64) time.Duration {
		if len(all) == 0 {
			return 0
		}
		return all[min(len(all)-1, int(p*float64(len(all))))]
	}
	unit := "jobs"
	if b.workload == "echo" {
		unit = "echoes"
	}
	fmt.Fprintf(stdout, "workload=%s clients=%d workers=%d body=%d %s=%d elapsed=%.2fs %s/s=%.0f p50=%v p99=%v max=%v\n",
		b.workload, b.clients, b.workers, b.bodySize, unit, len(all), elapsed.Seconds(),
		unit, float64(len(all))/elapsed.Seconds(), pct(0.50), pct(0.99), pct(1))
	if b.workers > 0 && len(all) > 0 {
		fmt.Fprintf(stdout, "workers got %.2f NO_JOB and %.2f NOOP per job\n",
			float64(b.noJobs.Load())/float64(len(all)), float64(b.noops.Load())/float64(len(all)))
	}
	if b.pid > 0 && len(all) > 0 {
		rss1, cpu1 := rssBytes(b.pid), cpuTime(b.pid)
		fmt.Fprintf(stdout, "server rss: %d -> %d bytes, %.0f bytes/op; server cpu: %v, %.1fµs/op\n",
			rss0, rss1, float64(rss1-rss0)/float64(len(all)), cpu1-cpu0,
			float64((cpu1-cpu0).Microseconds())/float64(len(all)))
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

// client runs one connection's closed loop and returns its latencies.
func (b *gearmanBench) client(nc net.Conn) ([]time.Duration, error) {
	r := codec.NewReader(nc, codec.Limits{})
	var out []byte
	fn := []byte(b.function)
	lat := make([]time.Duration, 0, 1<<16)
	for b.next() {
		out = out[:0]
		switch b.workload {
		case "fg":
			out = codec.AppendPacket(out, codec.Req, codec.SubmitJob, fn, nil, b.body)
		case "bg":
			out = codec.AppendPacket(out, codec.Req, codec.SubmitJobBg, fn, nil, b.body)
		case "echo":
			out = codec.AppendPacket(out, codec.Req, codec.EchoReq, b.body)
		}
		t0 := time.Now()
		if _, err := nc.Write(out); err != nil {
			return lat, err
		}
		for done := false; !done; {
			f, err := r.ReadFrame()
			if err != nil {
				return lat, err
			}
			switch f.Packet.Type {
			case codec.JobCreated:
				done = b.workload == "bg"
			case codec.EchoRes, codec.WorkComplete:
				done = true
			case codec.WorkFail, codec.WorkException, codec.Error:
				return lat, fmt.Errorf("client got %s", f.String())
			}
		}
		lat = append(lat, time.Since(t0))
	}
	return lat, nil
}

// worker grabs jobs and completes them at once; the completion and the
// next GRAB_JOB go out in one write.
func (b *gearmanBench) worker(nc net.Conn) error {
	r := codec.NewReader(nc, codec.Limits{})
	w := bufio.NewWriter(nc)
	result := []byte("ok")
	var buf []byte
	buf = codec.AppendPacket(buf, codec.Req, codec.CanDo, []byte(b.function))
	buf = codec.AppendPacket(buf, codec.Req, codec.GrabJob)
	w.Write(buf)
	if err := w.Flush(); err != nil {
		return err
	}
	for {
		f, err := r.ReadFrame()
		if err != nil {
			return err
		}
		buf = buf[:0]
		switch f.Packet.Type {
		case codec.JobAssign:
			buf = codec.AppendPacket(buf, codec.Req, codec.WorkComplete, f.Packet.Args[0], result)
			buf = codec.AppendPacket(buf, codec.Req, codec.GrabJob)
		case codec.NoJob:
			b.noJobs.Add(1)
			buf = codec.AppendPacket(buf, codec.Req, codec.PreSleep)
		case codec.Noop:
			b.noops.Add(1)
			buf = codec.AppendPacket(buf, codec.Req, codec.GrabJob)
		default:
			return fmt.Errorf("worker got %s", f.String())
		}
		w.Write(buf)
		if r.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return err
			}
		}
	}
}

// cpuTime reads a process's user+system CPU time from /proc, or 0.
func cpuTime(pid int) time.Duration {
	if pid <= 0 {
		return 0
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// Fields after the parenthesised command name; utime and stime are the
	// 14th and 15th fields of the whole line, in clock ticks (100/s).
	s := string(data)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		s = s[i+1:]
	}
	f := strings.Fields(s)
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// rssBytes reads a process's resident set size from /proc, or 0.
func rssBytes(pid int) int64 {
	if pid <= 0 {
		return 0
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}
