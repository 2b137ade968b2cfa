package beanstalk

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestYAMLBuilder(t *testing.T) {
	var b YAMLBuilder
	if got := string(b.Bytes()); got != "---\n" {
		t.Fatalf("empty: %q", got)
	}
	b.Item("default")
	b.ItemBytes([]byte("a;b"))
	if got := string(b.Bytes()); got != "---\n- default\n- a;b\n" {
		t.Fatalf("list: %q", got)
	}
	b.Reset()
	b.Uint("u", 1<<64-1)
	b.Int("i", -5)
	b.Bool("draining", false)
	b.Raw("state", "ready")
	b.Quoted("name", "default")
	b.Quoted("odd", "a\"b\\c\x01")
	b.Seconds("rusage-utime", 4476*time.Microsecond)
	b.Seconds("big", 12*time.Second+5*time.Microsecond+999*time.Nanosecond)
	b.Seconds("zero", 0)
	b.Seconds("neg", -1500*time.Millisecond)
	want := "---\n" +
		"u: 18446744073709551615\n" +
		"i: -5\n" +
		"draining: false\n" +
		"state: ready\n" +
		"name: \"default\"\n" +
		"odd: \"a\\\"b\\\\c\\x01\"\n" +
		"rusage-utime: 0.004476\n" +
		"big: 12.000005\n" +
		"zero: 0.000000\n" +
		"neg: -1.500000\n"
	if got := string(b.Bytes()); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	var keys, values []string
	if err := ParseDict(b.Bytes(), func(k, v []byte) {
		keys = append(keys, string(k))
		values = append(values, string(v))
	}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(values, "|"); got != "18446744073709551615|-5|false|ready|default|a\"b\\c\x01|0.004476|12.000005|0.000000|-1.500000" {
		t.Fatalf("values %q", got)
	}
	if got := strings.Join(keys, "|"); got != "u|i|draining|state|name|odd|rusage-utime|big|zero|neg" {
		t.Fatalf("keys %q", got)
	}
}

func TestParseYAMLErrors(t *testing.T) {
	nop := func([]byte) {}
	nop2 := func([]byte, []byte) {}
	for _, body := range []string{"", "--\n", "---", "---\nx\n", "---\n-x\n", "---\n\n- a\n"} {
		if ParseList([]byte(body), nop) == nil {
			t.Errorf("ParseList(%q) accepted", body)
		}
	}
	for _, body := range []string{"", "---\nx\n", "---\nx:y\n", "---\n: y\n", `---` + "\n" + `a: "\q"` + "\n", `---` + "\n" + `a: "\x4"` + "\n", `---` + "\n" + `a: "\"` + "\n"} {
		if ParseDict([]byte(body), nop2) == nil {
			t.Errorf("ParseDict(%q) accepted", body)
		}
	}
	// The last line may lack its "\n"; an empty list is "---\n".
	var items []string
	if err := ParseList([]byte("---\n- a\n- b"), func(i []byte) { items = append(items, string(i)) }); err != nil || strings.Join(items, ",") != "a,b" {
		t.Fatal(items, err)
	}
	if err := ParseList([]byte("---\n"), func([]byte) { t.Fatal("item in empty list") }); err != nil {
		t.Fatal(err)
	}
}

// The bodies a real beanstalkd 1.12 sent (stats trimmed of nothing), and
// the same in 1.13's form, which quotes names.
const (
	jobStats112 = "---\nid: 7\ntube: default\nstate: delayed\npri: 4294967295\nage: 63\ndelay: 4294967295\nttr: 4294967295\ntime-left: 4294967231\nfile: 0\nreserves: 0\ntimeouts: 0\nreleases: 0\nburies: 0\nkicks: 0\n"
	jobStats113 = "---\nid: 7\ntube: \"default\"\nstate: delayed\npri: 4294967295\nage: 63\ndelay: 4294967295\nttr: 4294967295\ntime-left: 4294967231\nfile: 0\nreserves: 0\ntimeouts: 0\nreleases: 0\nburies: 0\nkicks: 0\n"

	tubeStats112 = "---\nname: default\ncurrent-jobs-urgent: 0\ncurrent-jobs-ready: 0\ncurrent-jobs-reserved: 0\ncurrent-jobs-delayed: 0\ncurrent-jobs-buried: 0\ntotal-jobs: 0\ncurrent-using: 1\ncurrent-watching: 1\ncurrent-waiting: 0\ncmd-delete: 0\ncmd-pause-tube: 0\npause: 0\npause-time-left: 0\n"

	stats112 = "---\ncurrent-jobs-urgent: 9\ncurrent-jobs-ready: 9\ncurrent-jobs-reserved: 0\ncurrent-jobs-delayed: 1\ncurrent-jobs-buried: 0\ncmd-put: 24\ncmd-peek: 1\ncmd-peek-ready: 0\ncmd-peek-delayed: 1\ncmd-peek-buried: 1\ncmd-reserve: 5\ncmd-reserve-with-timeout: 9\ncmd-delete: 8\ncmd-release: 2\ncmd-use: 4\ncmd-watch: 2\ncmd-ignore: 3\ncmd-bury: 7\ncmd-kick: 13\ncmd-touch: 1\ncmd-stats: 1\ncmd-stats-job: 1\ncmd-stats-tube: 1\ncmd-list-tubes: 1\ncmd-list-tube-used: 12\ncmd-list-tubes-watched: 1\ncmd-pause-tube: 6\njob-timeouts: 0\ntotal-jobs: 15\nmax-job-size: 65535\ncurrent-tubes: 1\ncurrent-connections: 1\ncurrent-producers: 0\ncurrent-workers: 0\ncurrent-waiting: 0\ntotal-connections: 163\npid: 7317\nversion: \"1.12\"\nrusage-utime: 0.004476\nrusage-stime: 0.022353\nuptime: 120\nbinlog-oldest-index: 0\nbinlog-current-index: 0\nbinlog-records-migrated: 0\nbinlog-records-written: 0\nbinlog-max-size: 10485760\ndraining: false\nid: 6fa13a308b75805d\nhostname: vm\nos: #1 SMP PREEMPT_DYNAMIC @0\nplatform: x86_64\n"
)

func TestJobStats(t *testing.T) {
	var s JobStats
	if err := s.ParseYAML([]byte(jobStats112)); err != nil {
		t.Fatal(err)
	}
	want := JobStats{ID: 7, Tube: "default", State: "delayed", Pri: 1<<32 - 1, Age: 63, Delay: 1<<32 - 1, TTR: 1<<32 - 1, TimeLeft: 4294967231}
	if s != want {
		t.Fatalf("got %+v", s)
	}
	var b YAMLBuilder
	s.AppendYAML(&b)
	if got := string(b.Bytes()); got != jobStats113 {
		t.Fatalf("got\n%s", got)
	}
	if err := s.ParseYAML([]byte("---\npri: 4294967296\n")); err == nil {
		t.Fatal("pri overflow accepted")
	}
}

func TestTubeStats(t *testing.T) {
	var s TubeStats
	if err := s.ParseYAML([]byte(tubeStats112)); err != nil {
		t.Fatal(err)
	}
	if s.Name != "default" || s.CurrentUsing != 1 || s.CurrentWatching != 1 {
		t.Fatalf("got %+v", s)
	}
	var b YAMLBuilder
	s.AppendYAML(&b)
	if got, want := string(b.Bytes()), strings.Replace(tubeStats112, "name: default", `name: "default"`, 1); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestServerStats(t *testing.T) {
	var s ServerStats
	if err := s.ParseYAML([]byte(stats112)); err != nil {
		t.Fatal(err)
	}
	if s.CmdPut != 24 || s.PID != 7317 || s.Version != "1.12" || s.RusageUtime != 4476*time.Microsecond ||
		s.BinlogMaxSize != 10485760 || s.Draining || s.ID != "6fa13a308b75805d" || s.OS != "#1 SMP PREEMPT_DYNAMIC @0" {
		t.Fatalf("got %+v", s)
	}
	var b YAMLBuilder
	s.AppendYAML(&b)
	want := stats112
	for _, k := range []string{"hostname", "os", "platform"} { // 1.13 quotes these
		i := strings.Index(want, "\n"+k+": ") + len(k) + 3
		j := i + strings.IndexByte(want[i:], '\n')
		want = want[:i] + `"` + want[i:j] + `"` + want[j:]
	}
	if got := string(b.Bytes()); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	for _, bad := range []string{"---\npid: x\n", "---\ndraining: maybe\n", "---\nrusage-utime: 1.5\n", "---\nrusage-utime: x.000000\n", "---\nuptime: -1\n"} {
		if err := s.ParseYAML([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if err := s.ParseYAML([]byte("---\nnew-key: 1\nrusage-stime: -0.500000\n")); err != nil || s.RusageStime != -500*time.Millisecond {
		t.Fatal(err, s.RusageStime)
	}
}

// TestCmdCounter: every cmd-* line of stats has the verb of its name as
// counter, and the verbs beanstalkd does not count have none.
func TestCmdCounter(t *testing.T) {
	var st ServerStats
	counted := 0
	for v := Put; v.valid(); v++ {
		p := st.CmdCounter(v)
		if p == nil {
			continue
		}
		counted++
		*p = 1000 + uint64(v)
		var b YAMLBuilder
		st.AppendYAML(&b)
		if want := fmt.Sprintf("\ncmd-%s: %d\n", v, 1000+uint64(v)); !strings.Contains(string(b.Bytes()), want) {
			t.Errorf("%v: stats lack %q", v, want)
		}
	}
	if counted != 22 {
		t.Errorf("%d verbs have a cmd-* counter, want beanstalkd's 22", counted)
	}
	for _, v := range []Verb{ReserveJob, KickJob, Quit, Verb(0), Verb(200)} {
		if st.CmdCounter(v) != nil {
			t.Errorf("%v has a cmd-* counter", v)
		}
	}
}
