package proxy_test

import (
	"slices"
	"strings"
	"testing"
)

// bsStatsVarying are the stats keys whose values differ between two servers
// that did the same work: process facts, and the connection counts (the
// real server also counts testutil's readiness probe).
var bsStatsVarying = map[string]bool{
	"pid": true, "version": true, "rusage-utime": true, "rusage-stime": true, "uptime": true,
	"id": true, "hostname": true, "os": true, "platform": true,
	"total-connections": true, "current-connections": true,
	"age": true, "time-left": true, "pause-time-left": true,
}

// TestBeanstalkStatsMatchReal does the same work on jobgate and on
// beanstalkd 1.12, then compares stats, stats-tube and stats-job: the same
// keys in the same order, and the same values except the varying ones.
func TestBeanstalkStatsMatchReal(t *testing.T) {
	t.Parallel()
	script := "use work\r\nwatch work\r\nput 1 0 60 3\r\nabc\r\nput 2000 0 60 1\r\nx\r\nput 5 100 60 1\r\ny\r\n" +
		"reserve\r\nrelease 1 3 0\r\nreserve\r\nbury 1 4\r\npeek-buried\r\npeek-ready\r\npeek-delayed\r\npeek 2\r\n" +
		"touch 9\r\nreserve-with-timeout 0\r\ntouch 2\r\nkick 1\r\nkick-job 3\r\nignore default\r\nlist-tubes\r\n" +
		"list-tube-used\r\nlist-tubes-watched\r\npause-tube work 60\r\nstats-tube work\r\nstats-job 1\r\n" +
		"delete 2\r\nreserve-job 1\r\n"
	queries := []string{"stats\r\n", "stats-tube work\r\n", "stats-tube default\r\n", "stats-job 1\r\n", "stats-job 3\r\n"}

	results := map[string][]string{}
	for _, srv := range []bsServer{bsStartJobgate(t, 0), bsStartReal(t, 0)} {
		c := bsDial(t, srv.addr)
		defer c.nc.Close()
		c.send(t, script)
		for range strings.Count(script, "\r\n") - 3 { // three of the lines are bodies
			if c.readReply(t) == "" {
				t.Fatalf("%s: script reply missing", srv.name)
			}
		}
		for _, q := range queries {
			c.send(t, q)
			results[srv.name] = append(results[srv.name], c.readReply(t))
		}
	}
	for i, q := range queries {
		got, want := bsYAML(t, results["jobgate"][i]), bsYAML(t, results["beanstalkd"][i])
		gotKeys, wantKeys := bsKeys(got), bsKeys(want)
		if !slices.Equal(gotKeys, wantKeys) {
			t.Errorf("%q keys:\n got %v\nwant %v", q, gotKeys, wantKeys)
			continue
		}
		for j := range got {
			if !bsStatsVarying[got[j][0]] && got[j][1] != want[j][1] {
				t.Errorf("%q %s: jobgate %q, beanstalkd %q", q, got[j][0], got[j][1], want[j][1])
			}
		}
	}
}

// bsYAML splits an OK reply's YAML dictionary into key/value pairs.
func bsYAML(t *testing.T, reply string) [][2]string {
	t.Helper()
	_, body, ok := strings.Cut(reply, "\r\n---\n")
	if !ok || !strings.HasPrefix(reply, "OK ") {
		t.Fatalf("not a YAML reply: %q", reply)
	}
	var kv [][2]string
	for _, line := range strings.Split(strings.TrimSuffix(body, "\n\r\n"), "\n") {
		k, v, ok := strings.Cut(line, ": ")
		if !ok {
			t.Fatalf("bad YAML line %q in %q", line, reply)
		}
		kv = append(kv, [2]string{k, v})
	}
	return kv
}

func bsKeys(kv [][2]string) []string {
	keys := make([]string, len(kv))
	for i, p := range kv {
		keys[i] = p[0]
	}
	return keys
}
