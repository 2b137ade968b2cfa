package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/beanstalkd/go-beanstalk"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/internal/testutil"
)

// reloadYAML is a config file with max_reserved_per_conn n.
func reloadYAML(n string) string {
	return "beanstalk:\n  listen: \"127.0.0.1:0\"\ngearman:\n  listen: \"\"\nadmin:\n  listen: \"127.0.0.1:0\"\ndata:\n  dir: \"\"\nlimits:\n  max_reserved_per_conn: " + n + "\n"
}

// TestReloadWithLiveConnections runs the binary with a config file, holds
// a connection open across reloads and checks what each does: SIGHUP with
// a raised limit applies it to the open connection; POST /-/reload with an
// invalid file answers 422 with the error and the old limit stays; POST
// /-/reload with a valid one applies it.
func TestReloadWithLiveConnections(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jobgate.yaml")
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(reloadYAML("1"))
	p := startJobgate(t, 2, "-config", path)
	c, err := beanstalk.Dial("tcp", p.addrs["beanstalk"])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 4 {
		if _, err := c.Put([]byte("job"), 1, 0, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := c.Reserve(0); err != nil {
		t.Fatal(err)
	}
	// reserveOutcome is the answer to one more reserve: nil (a job),
	// ErrDeadline (over the cap).
	reserveOutcome := func() error {
		_, _, err := c.Reserve(0)
		return err
	}
	if err := reserveOutcome(); !errors.Is(err, beanstalk.ErrDeadline) {
		t.Fatalf("over the cap: %v, want DEADLINE_SOON", err)
	}

	write(reloadYAML("2"))
	p.cmd.Process.Signal(syscall.SIGHUP)
	deadline := time.Now().Add(10 * time.Second)
	for { // SIGHUP is handled asynchronously
		err := reserveOutcome()
		if err == nil {
			break
		}
		if !errors.Is(err, beanstalk.ErrDeadline) || time.Now().After(deadline) {
			t.Fatalf("after SIGHUP raised the cap: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}

	post := func() (int, string) {
		t.Helper()
		resp, err := http.Post("http://"+p.addrs["admin"]+"/-/reload", "text/plain", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	write(reloadYAML("-1"))
	if code, body := post(); code != http.StatusUnprocessableEntity || !strings.Contains(body, "limits.max_reserved_per_conn") {
		t.Fatalf("invalid reload: %d %q", code, body)
	}
	if err := reserveOutcome(); !errors.Is(err, beanstalk.ErrDeadline) {
		t.Fatalf("after the refused reload (cap 2, 2 held): %v, want DEADLINE_SOON", err)
	}
	write(reloadYAML("3"))
	if code, body := post(); code != http.StatusOK {
		t.Fatalf("valid reload: %d %q", code, body)
	}
	if err := reserveOutcome(); err != nil {
		t.Fatalf("after the reload raising the cap to 3: %v", err)
	}
	if _, err := c.ListTubes(); err != nil {
		t.Fatalf("the connection did not survive the reloads: %v", err)
	}
}

// TestReloadLogLevelAndRestartFields: a reload changes the log level at
// once, names the changed fields that need a restart, and an invalid file
// changes nothing.
func TestReloadLogLevelAndRestartFields(t *testing.T) {
	path := writeFile(t, "j.yaml", "log:\n  level: info\n")
	args := []string{"-config", path}
	cfg, code := parseCommandLine(args, io.Discard)
	if cfg == nil {
		t.Fatalf("exit %d", code)
	}
	var level slog.LevelVar
	var logged bytes.Buffer
	op := newOperator(args, cfg, &level, slog.New(slog.NewTextHandler(&logged, nil)))
	if err := os.WriteFile(path, []byte("log:\n  level: debug\ngearman:\n  listen: \":4999\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := op.reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if level.Level() != slog.LevelDebug {
		t.Errorf("level %v after reload, want debug", level.Level())
	}
	if !strings.Contains(logged.String(), "gearman.listen") {
		t.Errorf("the restart warning does not name gearman.listen: %s", logged.String())
	}
	if err := os.WriteFile(path, []byte("log:\n  level: loud\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := op.reload(context.Background())
	if err == nil || !strings.Contains(err.Error(), "log.level") {
		t.Fatalf("invalid reload: %v", err)
	}
	if level.Level() != slog.LevelDebug {
		t.Errorf("level %v after a refused reload, want debug still", level.Level())
	}
}

// gatewayYAML serves protocol (gearman, beanstalk) alone as a gateway in
// front of two servers, backends b1 at a1 and b2 at a2, and routes the
// names starting "moved." to target (b1 or b2), the rest to the local
// engine.
func gatewayYAML(protocol, a1, a2, target string) string {
	other := map[string]string{"gearman": "beanstalk", "beanstalk": "gearman"}[protocol]
	return protocol + ":\n  listen: \"127.0.0.1:0\"\n" + other + ":\n  listen: \"\"\nadmin:\n  listen: \"127.0.0.1:0\"\ndata:\n  dir: \"\"\n" +
		"backends:\n  - {name: b1, id: 1, type: " + protocol + ", address: \"" + a1 + "\"}\n  - {name: b2, id: 2, type: " + protocol + ", address: \"" + a2 + "\"}\n" +
		"routes:\n  " + protocol + ":\n    - {prefix: \"moved.\", backend: " + target + "}\n  " + protocol + "_default: local\n"
}

// TestReloadGearmanRoutes runs the binary as a gateway in front of two
// gearmand servers and moves a route with SIGHUP: the connection open
// across the reload submits to the new backend afterwards.
func TestReloadGearmanRoutes(t *testing.T) {
	g1, g2 := testutil.StartGearmand(t), testutil.StartGearmand(t)
	path := writeFile(t, "gw.yaml", gatewayYAML("gearman", g1, g2, "b1"))
	p := startJobgate(t, 2, "-config", path)
	c := gmDial(t, p.addrs["gearman"])
	if pk := c.ask(t, codec.SubmitJobBg, "moved.a", "", "x"); pk.Type != codec.JobCreated || !strings.HasPrefix(string(pk.Handle()), "@1:") {
		t.Fatalf("before the reload: %v %q", pk.Type, pk.Args)
	}
	if err := os.WriteFile(path, []byte(gatewayYAML("gearman", g1, g2, "b2")), 0o644); err != nil {
		t.Fatal(err)
	}
	p.cmd.Process.Signal(syscall.SIGHUP)
	deadline := time.Now().Add(10 * time.Second)
	for { // SIGHUP is handled asynchronously
		pk := c.ask(t, codec.SubmitJobBg, "moved.a", "", "y")
		if pk.Type != codec.JobCreated {
			t.Fatalf("submit during the reload: %v %q", pk.Type, pk.Args)
		}
		if strings.HasPrefix(string(pk.Handle()), "@2:") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still routed to %q after SIGHUP", pk.Handle())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if code, body := getAdmin(t, p.addrs["admin"], "/readyz?verbose"); code != http.StatusOK {
		t.Errorf("/readyz after the reload: %d %q", code, body)
	}
}
