package main

import (
	"bytes"
	"flag"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/config"
)

// TestFlagSpecsMatchConfig: every flag sets a config field, and every
// config field with a flag name is a flag.
func TestFlagSpecsMatchConfig(t *testing.T) {
	paths := config.FlagFields()
	flagged := map[string]bool{}
	for _, spec := range flagSpecs {
		path, ok := paths[spec.name]
		if !ok {
			t.Errorf("flag -%s sets no config field", spec.name)
		}
		flagged[path] = true
	}
	for name, path := range paths {
		if !flagged[path] {
			t.Errorf("config flag field -%s (%s) is not a flag", name, path)
		}
	}
}

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestFlagsWinOverFile(t *testing.T) {
	file := writeFile(t, "j.yaml", "gearman:\n  listen: \"127.0.0.1:4999\"\n  job_retries: 2\nbeanstalk:\n  max_job_size: 100\n")
	var stderr bytes.Buffer
	cfg, code := parseCommandLine([]string{"-config", file, "-gearman-job-retries", "5", "-gearman-exceptions", "-beanstalk", ""}, &stderr)
	if cfg == nil {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if cfg.Gearman.Listen != "127.0.0.1:4999" || cfg.Gearman.JobRetries != 5 || !cfg.Gearman.Exceptions {
		t.Errorf("gearman config %+v", cfg.Gearman)
	}
	if cfg.Beanstalk.Listen != "" || cfg.Beanstalk.MaxJobSize != 100 {
		t.Errorf("beanstalk config %+v", cfg.Beanstalk)
	}
}

func TestCommandLineErrors(t *testing.T) {
	routed := writeFile(t, "routes.yaml", "routes:\n  beanstalk:\n    - {exact: resize, backend: local}\n")
	bsUpstream := writeFile(t, "bs.yaml", "backends:\n  - name: bs1\n    id: 1\n    type: beanstalk\n    address: 127.0.0.1:11399\nroutes:\n  beanstalk_default: bs1\n")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-gearman-job-retries", "x"}, `command line: gearman.job_retries: want an integer, got "x"`},
		{[]string{"-log-level", "loud"}, "log.level"},
		{[]string{"-config", routed, "-beanstalk-upstream", "127.0.0.1:11399"}, "-beanstalk-upstream: the config file already declares Beanstalk backends or routes"},
		{[]string{"-config", bsUpstream, "-beanstalk-upstream", "127.0.0.1:11399"}, "-beanstalk-upstream: the config file already declares"},
		{[]string{"-beanstalk-upstream", "127.0.0.1:11300,127.0.0.1:11300"}, "listed twice"},
		{[]string{"-gearman-upstream", "127.0.0.1:4730,127.0.0.1:4730"}, "listed twice"},
		{[]string{"stray"}, `unexpected argument "stray"`},
	} {
		var stderr bytes.Buffer
		cfg, code := parseCommandLine(tc.args, &stderr)
		if cfg != nil || code != 2 {
			t.Errorf("%q: got config, exit %d", tc.args, code)
		}
		if !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%q: stderr %q lacks %q", tc.args, stderr.String(), tc.want)
		}
	}
}

func TestCheckConfig(t *testing.T) {
	good := writeFile(t, "good.yaml", "gearman:\n  job_retries: 3\n")
	bad := writeFile(t, "bad.yaml", "gearman:\n  job_retries: -1\n  lisen: x\n")
	var out, errs bytes.Buffer
	if code := run([]string{"check-config", good}, &out, &errs); code != 0 || !strings.HasSuffix(out.String(), "good.yaml: ok\n") {
		t.Errorf("good file: exit %d, %q %q", code, out.String(), errs.String())
	}
	out.Reset()
	errs.Reset()
	code := run([]string{"check-config", bad}, &out, &errs)
	if code != 1 || !strings.Contains(errs.String(), "bad.yaml:2:16") || !strings.Contains(errs.String(), "bad.yaml:3:3") {
		t.Errorf("bad file: exit %d, stderr %q: want both errors with positions", code, errs.String())
	}
}

func TestHelpListsEveryFlag(t *testing.T) {
	var stderr bytes.Buffer
	if code := run([]string{"-h"}, io.Discard, &stderr); code != 0 {
		t.Fatalf("-h exit %d", code)
	}
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	if _, err := registerConfigFlags(fs); err != nil {
		t.Fatal(err)
	}
	fs.VisitAll(func(f *flag.Flag) {
		if !strings.Contains(stderr.String(), "-"+f.Name+" ") && !strings.Contains(stderr.String(), "-"+f.Name+"\n") {
			t.Errorf("help lacks -%s", f.Name)
		}
	})
	if !strings.Contains(stderr.String(), `(default "64MiB")`) && !strings.Contains(stderr.String(), "(default 64MiB)") {
		t.Errorf("help does not show the packet size default from config:\n%s", stderr.String())
	}
}

// TestBinaryServesAndStops runs the binary on free ports, talks both
// protocols and the admin endpoints, and stops it with SIGTERM.
func TestBinaryServesAndStops(t *testing.T) {
	p := startJobgate(t, 3, "-gearman", "127.0.0.1:0", "-beanstalk", "127.0.0.1:0", "-admin", "127.0.0.1:0", "-data", t.TempDir())
	addrs := p.addrs
	ask := func(addr, send string, wantLen int) string {
		t.Helper()
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte(send)); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, wantLen)
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Fatalf("%s: %v after %q", addr, err, buf)
		}
		return string(buf)
	}
	echo := "\x00REQ\x00\x00\x00\x10\x00\x00\x00\x02hi"
	if got := ask(addrs["gearman"], echo, 14); got != "\x00RES\x00\x00\x00\x11\x00\x00\x00\x02hi" {
		t.Errorf("gearman ECHO answered %q", got)
	}
	if got := ask(addrs["beanstalk"], "put 0 0 1 2\r\nhi\r\n", len("INSERTED 1\r\n")); got != "INSERTED 1\r\n" {
		t.Errorf("beanstalk put answered %q", got)
	}
	for path, want := range map[string]string{
		"/healthz": "ok",
		"/readyz":  "ok",
		"/metrics": `jobgate_commands_total{command="put",protocol="beanstalk",result="ok"} 1`,
	} {
		resp, err := http.Get("http://" + addrs["admin"] + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Errorf("GET %s: %d %q", path, resp.StatusCode, body)
		}
		if path == "/metrics" && !strings.Contains(string(body), `jobgate_commands_total{command="ECHO_REQ",protocol="gearman",result="ok"} 1`) {
			t.Errorf("/metrics does not count the Gearman ECHO")
		}
	}

	stopJobgate(t, p)
}
