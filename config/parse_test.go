package config

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseEmptyIsDefault(t *testing.T) {
	for _, in := range []string{"", "# nothing\n", "~\n", "gearman:\nbeanstalk: ~\ntls:\n"} {
		c, err := Parse("", []byte(in))
		if err != nil {
			t.Fatalf("Parse(%q): %v", in, err)
		}
		c.src = nil
		if !reflect.DeepEqual(c, Default()) {
			t.Errorf("Parse(%q) = %+v, want Default()", in, c)
		}
	}
}

func TestParseOverlay(t *testing.T) {
	c, err := Parse("o.yaml", []byte(`
gearman:
  listen: ""            # disabled; the rest of gearman keeps its defaults
data:
  dir:                  # null: empty, persistence off
tls:
  acme:
    domains: [a.example]
`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Gearman.Listen != "" || c.Gearman.MaxPacketSize != Default().Gearman.MaxPacketSize || c.Data.Dir != "" {
		t.Errorf("overlay: %+v %+v", c.Gearman, c.Data)
	}
	if c.TLS.ACME.ChallengeListen != ":80" {
		t.Errorf("acme.challenge_listen = %q, want the default", c.TLS.ACME.ChallengeListen)
	}
	if !c.IsSet("gearman.listen") || !c.IsSet("gearman") || c.IsSet("gearman.max_packet_size") || c.IsSet("beanstalk") || !c.IsSet("tls.acme") || c.IsSet("tls.acme.email") {
		t.Error("IsSet disagrees with the file")
	}
	if Default().IsSet("gearman.listen") {
		t.Error("IsSet true on a Config built in code")
	}
}

func TestParseAnchorsAndMerge(t *testing.T) {
	_, err := Parse("m.yaml", []byte(`
x-upstream: &up
  type: gearman
  dial_timeout: 1s
  tls: &tls { enabled: true, server_name: gm.internal }
backends:
  - { <<: *up, name: gm1, id: 1, address: "gm1:4730" }
  - <<: *up
    name: gm2
    id: 2
    address: "gm2:4730"
    dial_timeout: 3s
`))
	// The extension key is an unknown field: jobgate has no x- escape.
	var es Errors
	if !errors.As(err, &es) || len(es) != 1 || es[0].Error() != `m.yaml:2:1: x-upstream: unknown field` {
		t.Fatalf("Parse: %v", err)
	}
	c, err := Parse("m.yaml", []byte(`
backends:
  - &gm1 { name: gm1, id: 1, type: gearman, address: "gm1:4730", dial_timeout: 1s, tls: { enabled: true } }
  - <<: *gm1
    name: gm2
    id: 2
    address: "gm2:4730"
    dial_timeout: 3s
`))
	if err != nil {
		t.Fatal(err)
	}
	b := c.Backends[1]
	if b.Name != "gm2" || b.Type != TypeGearman || !b.TLS.Enabled || b.DialTimeout != 3*time.Second || b.IOTimeout != 30*time.Second {
		t.Errorf("merged backend = %+v", b)
	}
}

func TestParseAliasBomb(t *testing.T) {
	// Each level merges the previous one ten times: 10^9 mappings.
	var b strings.Builder
	b.WriteString("log:\n  level: info\nbackends:\n  - &m0 {name: x}\n")
	for i := 1; i < 10; i++ {
		fmt.Fprintf(&b, "  - &m%d {<<: [", i)
		for j := range 10 {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "*m%d", i-1)
		}
		b.WriteString("]}\n")
	}
	start := time.Now()
	_, err := Parse("bomb.yaml", []byte(b.String()))
	if err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("Parse of an alias bomb: %v after %v", err, time.Since(start))
	}
	if !strings.Contains(err.Error(), "expands to more than 100000 values through aliases") {
		t.Errorf("error = %v", err)
	}
}

// Decoding and validation errors are reported together, but a value that
// did not decode is not validated again.
func TestParseDecodeAndValidateErrors(t *testing.T) {
	_, err := Parse("e.yaml", []byte("gearman:\n  listen: [a]\nlog:\n  level: loud\n"))
	want := "e.yaml:2:11: gearman.listen: want a string, got a list\ne.yaml:4:10: log.level: \"loud\" is not debug, info, warn or error"
	if err == nil || err.Error() != want {
		t.Errorf("Parse error =\n%v\nwant\n%s", err, want)
	}
	_, err = Parse("", []byte("log: {level: loud}"))
	if err == nil || err.Error() != `config:1:14: log.level: "loud" is not debug, info, warn or error` {
		t.Errorf("unnamed Parse error = %v", err)
	}
	_, err = Parse("s.yaml", []byte("just text"))
	if err == nil || err.Error() != `s.yaml:1:1: want a mapping of fields, got "just text"` {
		t.Errorf("scalar document error = %v", err)
	}
	_, err = Parse("m.yaml", []byte("backends:\n  - &a {name: x, <<: *a}\n"))
	if err == nil || err.Error() != `m.yaml:2:22: backends[0]: << merges a mapping into itself` {
		t.Errorf("self-merge error = %v", err)
	}
	_, err = Parse("k.yaml", []byte("? [a]\n: 1\n"))
	if err == nil || err.Error() != `k.yaml:1:3: a field name must be a plain string, got a list` {
		t.Errorf("complex key error = %v", err)
	}
}

func TestLoadMissingFile(t *testing.T) {
	if _, err := Load("testdata/does-not-exist.yaml"); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("Load = %v", err)
	}
}

func TestSet(t *testing.T) {
	c, err := Load("testdata/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	orig := *c
	for path, value := range map[string]string{
		"gearman.listen":          ":5730",
		"gearman.max_packet_size": "1MiB",
		"data.fsync_interval":     "10ms",
		"gearman.exceptions":      "false",
		"limits.max_connections":  "7",
		"tracing.sample_ratio":    "0.5",
		"tls.acme.domains":        "a.example, b.example",
		"backends[1].address":     "10.9.9.9:4730",
	} {
		if err := c.Set(path, value); err != nil {
			t.Errorf("Set(%q, %q): %v", path, value, err)
		}
	}
	if c.Gearman.Listen != ":5730" || c.Gearman.MaxPacketSize != MiB || c.Data.FsyncInterval != 10*time.Millisecond ||
		c.Gearman.Exceptions || c.Limits.MaxConnections != 7 || c.Tracing.SampleRatio != 0.5 ||
		!reflect.DeepEqual(c.TLS.ACME.Domains, []string{"a.example", "b.example"}) || c.Backends[1].Address != "10.9.9.9:4730" {
		t.Errorf("after Set: %+v", c)
	}
	if !c.IsSet("gearman.listen") {
		t.Error("IsSet false after Set")
	}
	// Errors about a field set by Set say so; others keep their position.
	if err := c.Set("beanstalk.listen", ":5730"); err != nil {
		t.Fatal(err)
	}
	if err := c.Set("log.level", "loud"); err != nil {
		t.Fatal(err)
	}
	c.Pools[0].Name = "renamed" // a change made in code is reported at the file's value
	want := strings.Join([]string{
		`testdata/full.yaml:137:32: routes.gearman[0].pool: "gm-shard" is not a pool`,
		`testdata/full.yaml:139:30: routes.gearman[2].pool: "gm-shard" is not a pool`,
		`command line: log.level: "loud" is not debug, info, warn or error`,
		`command line: beanstalk.listen: ":5730" collides with gearman.listen (":5730")`,
	}, "\n")
	if err := c.Validate(); err == nil || err.Error() != want {
		t.Errorf("Validate =\n%v\nwant\n%s", err, want)
	}
	// The copy made before the Sets keeps its positions.
	if orig.src.cli["gearman.listen"] {
		t.Error("Set changed a copy's source")
	}
	for path, value := range map[string]string{
		"gearman.nope":            "x",
		"gearman":                 "x",
		"backends[9].address":     "x",
		"backends":                "x",
		"gearman.max_packet_size": "big",
		"limits.max_connections":  "many",
		"gearman.exceptions":      "maybe",
		"data.fsync_interval":     "5",
	} {
		if err := c.Set(path, value); err == nil || !strings.HasPrefix(err.Error(), "command line: "+path+": ") {
			t.Errorf("Set(%q, %q) = %v", path, value, err)
		}
	}
}

func TestFieldErrorFormat(t *testing.T) {
	for _, tt := range []struct {
		e    FieldError
		want string
	}{
		{FieldError{File: "f.yaml", Line: 3, Col: 7, Path: "a.b", Msg: "bad"}, "f.yaml:3:7: a.b: bad"},
		{FieldError{File: "f.yaml", Line: 3, Msg: "syntax"}, "f.yaml:3: syntax"},
		{FieldError{File: "f.yaml", Path: "a", Msg: "bad"}, "f.yaml: a: bad"},
		{FieldError{Path: "a", Msg: "bad"}, "a: bad"},
		{FieldError{Line: 2, Col: 1, Path: "a", Msg: "bad"}, "line 2:1: a: bad"},
	} {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("%+v.Error() = %q, want %q", tt.e, got, tt.want)
		}
	}
}
