package config

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the testdata/*.err golden files")

// TestFullExample loads the commented example, which sets every field.
func TestFullExample(t *testing.T) {
	c, err := Load("testdata/full.yaml")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	// Every documented field appears in the example, so it documents them
	// all (a list's element fields in at least one element).
	for _, f := range Fields() {
		re := regexp.MustCompile("^" + strings.ReplaceAll(regexp.QuoteMeta(f), `\[\]`, `\[\d+\]`) + "$")
		found := false
		for p := range c.src.at {
			if re.MatchString(p) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("testdata/full.yaml does not set %s", f)
		}
	}
	// Spot-check values of each kind.
	if c.Gearman.TLSListen != ":4731" || c.Gearman.MaxPacketSize != 64*MiB || c.Gearman.JobRetries != 3 || !c.Gearman.Exceptions {
		t.Errorf("gearman = %+v", c.Gearman)
	}
	if c.Data.FsyncInterval != 50*time.Millisecond || c.Limits.IdleTimeout != 10*time.Minute {
		t.Errorf("durations: %v %v", c.Data.FsyncInterval, c.Limits.IdleTimeout)
	}
	if c.TLS.MinVersion != "1.2" || c.Tracing.SampleRatio != 0.25 || c.Tracing.ServiceName != "jobgate-gw1" {
		t.Errorf("tls/tracing: %q %v %q", c.TLS.MinVersion, c.Tracing.SampleRatio, c.Tracing.ServiceName)
	}
	b, ok := c.Backend("gm1")
	if !ok || b.Address != "10.0.0.5:4730" || !b.TLS.Enabled || b.Breaker.Failures != 5 {
		t.Errorf("gm1 = %+v", b)
	}
	// A backend entry that leaves out timeouts gets the backend defaults.
	if b, _ := c.Backend("gm2"); b.DialTimeout != 2*time.Second || b.Breaker != DefaultBackend().Breaker {
		t.Errorf("gm2 = %+v, want the backend defaults", b)
	}
	if got := c.Routes.Gearman[2].Glob; got != "img.*" {
		t.Errorf("routes.gearman[2].glob = %q", got)
	}
	w := c.Warnings()
	if len(w) != 1 || w[0].Error() != "testdata/full.yaml:70:14: auth.identities[1].token: a secret written in the config file; prefer tokens_file, readable only by jobgate" {
		t.Errorf("Warnings() = %v", w)
	}
}

// TestBroken loads each testdata/broken_*.yaml and compares the whole
// error, every line with its position, with testdata/broken_*.err. Run
// with -update to rewrite the golden files, then read the diff.
func TestBroken(t *testing.T) {
	files, _ := filepath.Glob("testdata/broken_*.yaml")
	if len(files) == 0 {
		t.Fatal("no testdata/broken_*.yaml")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			c, err := Load(f)
			if err == nil {
				t.Fatalf("Load succeeded: %+v", c)
			}
			var es Errors
			if !errors.As(err, &es) {
				t.Fatalf("error %T is not Errors: %v", err, err)
			}
			got := err.Error() + "\n"
			golden := strings.TrimSuffix(f, ".yaml") + ".err"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("errors differ from %s\ngot:\n%s\nwant:\n%s", golden, got, want)
			}
			// Sorted by position.
			for i := 1; i < len(es); i++ {
				a, b := es[i-1], es[i]
				if b.Line != 0 && (a.Line > b.Line || a.Line == b.Line && a.Col > b.Col) {
					t.Errorf("not sorted: %v before %v", a, b)
				}
			}
		})
	}
}
