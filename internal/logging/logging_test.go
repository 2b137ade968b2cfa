package logging

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/jobgate/jobgate/config"
)

func TestText(t *testing.T) {
	var buf bytes.Buffer
	l, _, err := New(&buf, "info", "text")
	if err != nil {
		t.Fatal(err)
	}
	l.Debug("hidden", "job", 1)
	l.Info("listening", "protocol", "beanstalk", "addr", "127.0.0.1:11300")
	got := stripTime(buf.String())
	want := `level=INFO msg=listening protocol=beanstalk addr=127.0.0.1:11300` + "\n"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// stripTime drops the leading time=... field of each text line.
func stripTime(s string) string {
	var out []string
	for _, line := range strings.SplitAfter(s, "\n") {
		if line == "" {
			continue
		}
		if !strings.HasPrefix(line, "time=") {
			out = append(out, line)
			continue
		}
		_, rest, _ := strings.Cut(line, " ")
		out = append(out, rest)
	}
	return strings.Join(out, "")
}

func TestJSONAndLevelChange(t *testing.T) {
	var buf bytes.Buffer
	l, lv, err := New(&buf, "WARN", "JSON")
	if err != nil {
		t.Fatal(err)
	}
	l.Info("hidden")
	l.Warn("breaker open", "backend", "gm1")
	lv.Set(slog.LevelDebug) // as a config reload would
	l.Debug("reserve", "tube", "emails")

	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines: %q", len(lines), buf.String())
	}
	for i, want := range []map[string]string{
		{"level": "WARN", "msg": "breaker open", "backend": "gm1"},
		{"level": "DEBUG", "msg": "reserve", "tube": "emails"},
	} {
		var got map[string]any
		if err := json.Unmarshal([]byte(lines[i]), &got); err != nil {
			t.Fatalf("line %d not JSON: %v: %q", i, err, lines[i])
		}
		if _, ok := got["time"]; !ok {
			t.Errorf("line %d has no time", i)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("line %d: %s = %v, want %q", i, k, got[k], v)
			}
		}
	}
}

func TestDefaults(t *testing.T) {
	var buf bytes.Buffer
	l, lv, err := New(&buf, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if lv.Level() != slog.LevelInfo {
		t.Errorf("default level %v", lv.Level())
	}
	l.Info("x")
	if !strings.Contains(buf.String(), "level=INFO msg=x") {
		t.Errorf("default format is not text: %q", buf.String())
	}
}

func TestErrors(t *testing.T) {
	for _, c := range []struct{ level, format, want string }{
		{"verbose", "text", `logging: log level "verbose" is not one of debug, info, warn, error`},
		{"info", "xml", `logging: log format "xml" is not one of text, json`},
		{"trace", "yaml", "logging: log level \"trace\" is not one of debug, info, warn, error\nlog format \"yaml\" is not one of text, json"},
	} {
		l, lv, err := New(&bytes.Buffer{}, c.level, c.format)
		if err == nil || err.Error() != c.want || l != nil || lv != nil {
			t.Errorf("New(%q, %q) = %v, %v, %v; want error %q", c.level, c.format, l, lv, err, c.want)
		}
	}
	for _, s := range Levels {
		if _, err := ParseLevel(s); err != nil {
			t.Errorf("ParseLevel(%q): %v", s, err)
		}
	}
}

// TestConfigSpellings keeps the accepted names in step with the config
// constants that document them.
func TestConfigSpellings(t *testing.T) {
	for _, l := range []string{config.LevelDebug, config.LevelInfo, config.LevelWarn, config.LevelError} {
		if _, err := ParseLevel(l); err != nil {
			t.Error(err)
		}
	}
	for _, f := range []string{config.FormatText, config.FormatJSON} {
		if _, err := ParseFormat(f); err != nil {
			t.Error(err)
		}
	}
	d := config.Default().Log
	if _, _, err := New(&bytes.Buffer{}, d.Level, d.Format); err != nil {
		t.Errorf("config defaults: %v", err)
	}
}
