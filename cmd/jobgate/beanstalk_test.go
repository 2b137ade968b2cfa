package main

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/testutil"
)

// TestBeanstalkServerFromFlags wires the server from the command line: the
// job size limit applies, and SIGUSR1 puts it in drain mode as it does
// beanstalkd.
func TestBeanstalkServerFromFlags(t *testing.T) {
	cfg, code := parseCommandLine([]string{"-beanstalk-max-job-size=4", "-data", ""}, io.Discard)
	if cfg == nil {
		t.Fatalf("parse: exit %d", code)
	}
	srv, err := newBeanstalkServer(cfg, slog.New(slog.DiscardHandler), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	defer srv.Shutdown(context.Background())

	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	say := func(send, want string) {
		t.Helper()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, send)
		got, err := br.ReadString('\n')
		if err != nil || got != want {
			t.Fatalf("%q: got %q %v, want %q", send, got, err, want)
		}
	}
	say("put 0 0 1 5\r\nabcde\r\n", "JOB_TOO_BIG\r\n")
	say("put 0 0 1 4\r\nabcd\r\n", "INSERTED 1\r\n")
	testutil.SignalDrain(t, os.Getpid())
	deadline := time.Now().Add(5 * time.Second)
	for {
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, "put 0 0 1 1\r\nx\r\n")
		got, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if got == "DRAINING\r\n" {
			break
		}
		if !strings.HasPrefix(got, "INSERTED") || time.Now().After(deadline) {
			t.Fatalf("after SIGUSR1: %q, want DRAINING", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestBeanstalkMaxJobSizeZeroRefused(t *testing.T) {
	var stderr strings.Builder
	if cfg, code := parseCommandLine([]string{"-beanstalk-max-job-size=0"}, &stderr); cfg != nil || code != 2 {
		t.Fatalf("max job size 0 accepted (exit %d)", code)
	}
	if !strings.Contains(stderr.String(), "beanstalk.max_job_size") {
		t.Errorf("error does not name the field: %q", stderr.String())
	}
}
