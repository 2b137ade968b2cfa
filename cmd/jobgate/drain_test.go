package main

import (
	"errors"
	"fmt"
	"net"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/beanstalkd/go-beanstalk"

	codec "github.com/jobgate/jobgate/codec/gearman"
)

// gmConn is a raw Gearman connection for the drain tests.
type gmConn struct {
	nc net.Conn
	r  *codec.Reader
	w  *codec.Writer
}

func gmDial(t *testing.T, addr string) *gmConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(60 * time.Second))
	return &gmConn{nc, codec.NewReader(nc, codec.Limits{}), codec.NewWriter(nc)}
}

// ask sends one packet and returns the next packet received.
func (c *gmConn) ask(t *testing.T, typ codec.Type, args ...string) codec.Packet {
	t.Helper()
	c.send(t, typ, args...)
	f, err := c.r.ReadFrame()
	if err != nil {
		t.Fatalf("%v: %v", typ, err)
	}
	return f.Packet
}

func (c *gmConn) send(t *testing.T, typ codec.Type, args ...string) {
	t.Helper()
	b := make([][]byte, len(args))
	for i, a := range args {
		b[i] = []byte(a)
	}
	if err := c.w.WritePacket(codec.Req, typ, b...); err != nil {
		t.Fatal(err)
	}
	if err := c.w.Flush(); err != nil {
		t.Fatal(err)
	}
}

// waitExit waits for the process and returns its exit status.
func waitExit(t *testing.T, p *jobgateProc, within time.Duration) error {
	t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(within):
		t.Fatalf("still running %v after the signal", within)
		return nil
	}
}

// TestDrainLosesNoAcknowledgedJob runs the real binary with both servers,
// leaves a Beanstalk job reserved and a Gearman job assigned, and sends
// SIGTERM. While draining, put answers DRAINING and SUBMIT_JOB_BG an ERROR
// QUEUE_ERROR, new connections are refused, and the workers holding jobs
// finish them; then the process exits 0 by itself. Restarted on the same
// data directory, every acknowledged job that was not finished is back,
// and none that was.
func TestDrainLosesNoAcknowledgedJob(t *testing.T) {
	dir := t.TempDir()
	args := []string{"-gearman", "127.0.0.1:0", "-beanstalk", "127.0.0.1:0", "-admin", "", "-data", dir, "-shutdown-timeout", "60s"}
	p := startJobgate(t, 2, args...)
	bsAddr, gmAddr := p.addrs["beanstalk"], p.addrs["gearman"]

	producer, err := beanstalk.Dial("tcp", bsAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	bsWant := map[uint64]string{}
	for i := range 20 {
		body := fmt.Sprintf("bs-%d", i)
		id, err := producer.Put([]byte(body), 1, 0, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		bsWant[id] = body
	}
	worker, err := beanstalk.Dial("tcp", bsAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer worker.Close()
	heldID, _, err := worker.Reserve(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}

	client := gmDial(t, gmAddr)
	gmWant := map[string]bool{}
	for i := range 10 {
		data := fmt.Sprintf("gm-%d", i)
		if pk := client.ask(t, codec.SubmitJobBg, "drainfn", "", data); pk.Type != codec.JobCreated {
			t.Fatalf("submit: %v %q", pk.Type, pk.Args)
		}
		gmWant[data] = true
	}
	gw := gmDial(t, gmAddr)
	gw.send(t, codec.CanDo, "drainfn")
	assigned := gw.ask(t, codec.GrabJob)
	if assigned.Type != codec.JobAssign {
		t.Fatalf("grab: %v", assigned.Type)
	}

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The drain starts asynchronously: poll for DRAINING.
	deadline := time.Now().Add(10 * time.Second)
	for {
		id, err := producer.Put([]byte("late"), 1, 0, time.Minute)
		if errors.Is(err, beanstalk.ErrDraining) {
			break
		}
		if err != nil {
			t.Fatalf("put while draining: %v", err)
		}
		bsWant[id] = "late" // acknowledged before the drain began
		if time.Now().After(deadline) {
			t.Fatal("put never answered DRAINING")
		}
		time.Sleep(10 * time.Millisecond) // the signal is handled on another goroutine
	}
	if pk := client.ask(t, codec.SubmitJobBg, "drainfn", "", "late"); pk.Type != codec.Error || string(pk.Args[0]) != "QUEUE_ERROR" {
		t.Fatalf("submit while draining: %v %q", pk.Type, pk.Args)
	}
	if c, err := net.DialTimeout("tcp", bsAddr, time.Second); err == nil {
		c.Close()
		t.Error("a new Beanstalk connection was accepted while draining")
	}
	if c, err := net.DialTimeout("tcp", gmAddr, time.Second); err == nil {
		c.Close()
		t.Error("a new Gearman connection was accepted while draining")
	}
	select {
	case <-p.done:
		t.Fatal("exited with jobs in hand")
	default:
	}

	// The workers finish what they hold.
	if err := worker.Delete(heldID); err != nil {
		t.Fatalf("delete while draining: %v", err)
	}
	delete(bsWant, heldID)
	gw.send(t, codec.WorkComplete, string(assigned.Handle()), "")
	delete(gmWant, string(assigned.Data()))
	if err := waitExit(t, p, 20*time.Second); err != nil {
		t.Fatalf("exit after the drain: %v", err)
	}

	// Restart: what was acknowledged and not finished is all there.
	p = startJobgate(t, 2, args...)
	again, err := beanstalk.Dial("tcp", p.addrs["beanstalk"])
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	for {
		id, body, err := again.Reserve(0)
		if errors.Is(err, beanstalk.ErrTimeout) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if bsWant[id] != string(body) {
			t.Errorf("job %d %q after restart: not acknowledged or finished", id, body)
		}
		delete(bsWant, id)
		again.Delete(id)
	}
	if len(bsWant) > 0 {
		t.Errorf("Beanstalk jobs lost in the drain: %v", bsWant)
	}
	gw = gmDial(t, p.addrs["gearman"])
	gw.send(t, codec.CanDo, "drainfn")
	for {
		pk := gw.ask(t, codec.GrabJob)
		if pk.Type == codec.NoJob {
			break
		}
		data := string(pk.Data())
		if !gmWant[data] {
			t.Errorf("Gearman job %q after restart: not acknowledged or finished", data)
		}
		delete(gmWant, data)
		gw.send(t, codec.WorkComplete, string(pk.Handle()), "")
	}
	if len(gmWant) > 0 {
		t.Errorf("Gearman jobs lost in the drain: %v", gmWant)
	}
}

// TestDrainSecondSignalExitsAtOnce: with a job in hand the drain would
// wait a minute; a second SIGTERM ends the process at once.
func TestDrainSecondSignalExitsAtOnce(t *testing.T) {
	p := startJobgate(t, 1, "-gearman", "", "-beanstalk", "127.0.0.1:0", "-admin", "", "-data", "", "-shutdown-timeout", "60s")
	c, err := beanstalk.Dial("tcp", p.addrs["beanstalk"])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Put([]byte("x"), 1, 0, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Reserve(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	deadline := time.Now().Add(10 * time.Second)
	for { // the first signal is taken once put answers DRAINING
		_, err := c.Put([]byte("y"), 1, 0, time.Hour)
		if errors.Is(err, beanstalk.ErrDraining) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never draining: %v", err)
		}
		time.Sleep(10 * time.Millisecond) // the signal is handled on another goroutine
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	err = waitExit(t, p, 10*time.Second)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("second signal: exit %v, want status 1", err)
	}
}
