package gearman

import (
	"testing"

	codec "github.com/jobgate/jobgate/codec/gearman"
)

func TestAdminCommands(t *testing.T) {
	var shut []bool
	h := newHarness(t, Config{Version: "1.2.3", Shutdown: func(g bool) { shut = append(shut, g) }})
	adm := h.open()
	c := h.open()
	fg := c.submit(codec.SubmitJob, "f", "u1", "x")
	bg := c.submit(codec.SubmitJobBg, "f", "", "y")
	c.submit(codec.SubmitJobHighBg, "g", "u2", "z")
	w := h.open()
	w.send(codec.CanDo, "g")
	for _, tc := range []struct{ line, want string }{
		{"status", "f\t2\t0\t0\ng\t1\t0\t1\n.\n"},
		{"STATUS", "f\t2\t0\t0\ng\t1\t0\t1\n.\n"},
		{"prioritystatus", "f\t0\t2\t0\t0\ng\t1\t0\t0\t1\n.\n"},
		{"workers", "3 127.0.0.1 - : g\n2 127.0.0.1 - :\n1 127.0.0.1 - :\n.\n"},
		{"show jobs", fg + "\t0\t0\t0\n" + bg + "\t0\t0\t1\nH:t:3\t0\t0\t1\n.\n"},
		{"show unique jobs", "u1\n\nu2\n.\n"},
		{"show", "ERR UNKNOWN_COMMAND Unknown+server+commandshow\r\n"},
		{"show foo", "ERR UNKNOWN_SHOW_ARGUMENTS\r\n"},
		{"show jobs ", "ERR UNKNOWN_SHOW_ARGUMENTS\r\n"},
		{"getpid", "OK 4242\n"},
		{"version", "OK 1.2.3\n"},
		{"verbose", "OK ERROR\n"},
		{"cancel job H:t:99", "ERR UNKNOWN_JOB\r\n"},
		{"cancel job", "ERR UNKNOWN_COMMAND Unknown+server+commandcancel\r\n"},
		{"cancel job a b", "ERR UNKNOWN_ERROR\r\n"},
		{"create function new", "OK\r\n"},
		{"create", "ERR INVALID_ARGUMENTS An+incomplete+set+of+arguments+was+sent+to+this+command+create\r\n"},
		{"drop function g", "ERR there are still connected workers or executing clients\r\n"},
		{"drop function NEW", "OK\r\n"},
		{"drop function nope", "ERR function not found\r\n"},
		{"drop", "ERR INVALID_ARGUMENTS An+incomplete+set+of+arguments+was+sent+to+this+command+drop\r\n"},
		{"bogus", "ERR UNKNOWN_COMMAND Unknown+server+commandbogus\r\n"},
		{"", "ERR UNKNOWN_COMMAND Unknown+server+command\r\n"},
		{"shutdown now", "ERR UNKNOWN_COMMAND Unknown+server+commandshutdown\r\n"},
	} {
		if got := adm.admin(tc.line); got != tc.want {
			t.Errorf("%q:\n got  %q\n want %q", tc.line, got, tc.want)
		}
	}
	if got := adm.admin("cancel job " + fg); got != "OK\r\n" {
		t.Fatalf("cancel: %q", got)
	}
	c.expect("WORK_FAIL " + fg)
	if got := adm.admin("status"); got != "f\t1\t0\t0\ng\t1\t0\t1\n.\n" {
		t.Fatalf("status after cancel: %q", got)
	}
	if err := adm.s.HandleText([]byte("a b c d e f")); err == nil {
		t.Fatal("six words accepted")
	}
	if got := adm.admin("shutdown"); got != "OK\r\n" {
		t.Fatalf("shutdown: %q", got)
	}
	if got := adm.admin("Shutdown graceful"); got != "OK\r\n" {
		t.Fatalf("shutdown graceful: %q", got)
	}
	if len(shut) != 2 || shut[0] || !shut[1] {
		t.Fatalf("shutdown callbacks %v", shut)
	}
}

func TestAdminShutdownDisabled(t *testing.T) {
	h := newHarness(t, Config{})
	if got := h.open().admin("shutdown"); got != "ERR UNKNOWN_COMMAND Unknown+server+commandshutdown\r\n" {
		t.Fatalf("shutdown without callback: %q", got)
	}
}

func TestCancelRunningJob(t *testing.T) {
	h := newHarness(t, Config{})
	c, adm := h.open(), h.open()
	hd := c.submit(codec.SubmitJob, "f", "u", "x")
	w := h.open()
	w.send(codec.CanDo, "f")
	w.send(codec.GrabJob)
	w.rec.take()
	adm.admin("cancel job " + hd)
	c.expect("WORK_FAIL " + hd)
	if got := adm.admin("show jobs"); got != hd+"\t0\t1\t0\n.\n" {
		t.Fatalf("show jobs %q", got)
	}
	w.send(codec.WorkComplete, hd, "r")
	c.expect()
	w.expect()
	if got := adm.admin("status"); got != "f\t0\t0\t1\n.\n" {
		t.Fatalf("status %q", got)
	}
}
