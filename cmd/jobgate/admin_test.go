package main

import (
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/beanstalkd/go-beanstalk"

	codec "github.com/jobgate/jobgate/codec/gearman"
)

// getAdmin fetches path from the admin server.
func getAdmin(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// sample returns the value of the series named exactly by key in a
// Prometheus text exposition, or -1.
func sample(body, key string) float64 {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(key) + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// TestAdminAfterWorkload runs a scripted workload through the binary with
// the journal fsyncing every change and checks /readyz and the journal
// series of both engines.
func TestAdminAfterWorkload(t *testing.T) {
	p := startJobgate(t, 3, "-gearman", "127.0.0.1:0", "-beanstalk", "127.0.0.1:0", "-admin", "127.0.0.1:0",
		"-data", t.TempDir(), "-data-fsync", "always")
	_, before := getAdmin(t, p.addrs["admin"], "/metrics")
	bs, err := beanstalk.Dial("tcp", p.addrs["beanstalk"])
	if err != nil {
		t.Fatal(err)
	}
	defer bs.Close()
	for range 3 {
		if _, err := bs.Put([]byte("job"), 1, 0, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	gm := gmDial(t, p.addrs["gearman"])
	for range 2 {
		if pk := gm.ask(t, codec.SubmitJobBg, "f", "", "x"); pk.Type != codec.JobCreated {
			t.Fatalf("submit: %v", pk.Type)
		}
	}

	code, body := getAdmin(t, p.addrs["admin"], "/readyz?verbose")
	for _, want := range []string{"listeners: ok", "beanstalk journal replayed and writable: ok",
		"gearman journal replayed and writable: ok", "gearman routes have a backend up: ok"} {
		if code != http.StatusOK || !regexp.MustCompile(regexp.QuoteMeta(want)).MatchString(body) {
			t.Errorf("/readyz: %d %q lacks %q", code, body, want)
		}
	}
	_, body = getAdmin(t, p.addrs["admin"], "/metrics")
	for _, proto := range []string{"beanstalk", "gearman"} {
		l := `{protocol="` + proto + `"}`
		if v := sample(body, "jobgate_journal_fsync_seconds_count"+l); v < 1 {
			t.Errorf("%s fsync histogram count %v, want at least one fsync", proto, v)
		}
		if v := sample(body, "jobgate_journal_bytes"+l); v <= 0 {
			t.Errorf("%s journal bytes %v", proto, v)
		}
		if v := sample(body, "jobgate_journal_failed"+l); v != 0 {
			t.Errorf("%s journal failed = %v", proto, v)
		}
	}
	// One record per acknowledged change.
	for proto, want := range map[string]float64{"beanstalk": 3, "gearman": 2} {
		key := `jobgate_journal_appends_total{protocol="` + proto + `"}`
		if got := sample(body, key) - sample(before, key); got != want {
			t.Errorf("%s: %v more, want %v", key, got, want)
		}
	}
}
