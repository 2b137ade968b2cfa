package gearman

import (
	"strings"
	"testing"
)

// TestAdminFields pins the splitting to what gearmand 1.1.20 was seen to do
// with each line (the comment says how it answered).
func TestAdminFields(t *testing.T) {
	for _, c := range []struct {
		line string
		want []string
	}{
		{"status", []string{"status"}},
		{"show jobs", []string{"show", "jobs"}},                          // listing
		{"show  jobs", []string{"show", "jobs"}},                         // listing: runs of spaces are one separator
		{"show jobs ", []string{"show", "jobs", ""}},                     // ERR UNKNOWN_SHOW_ARGUMENTS
		{"show jobs  ", []string{"show", "jobs", ""}},                    // ERR UNKNOWN_SHOW_ARGUMENTS
		{" status", []string{"", "status"}},                              // ERR UNKNOWN_COMMAND with an empty name
		{"", []string{""}},                                               // ERR UNKNOWN_COMMAND with an empty name
		{"show\tjobs", []string{"show\tjobs"}},                           // tabs do not separate
		{"maxqueue fn 1 2 3", []string{"maxqueue", "fn", "1", "2", "3"}}, // five words: the most gearmand takes
		{"a b c d e ", []string{"a", "b", "c", "d", "e", ""}},            // six: gearmand closes the connection
		{"cancel job H:lap:1", []string{"cancel", "job", "H:lap:1"}},     // OK or ERR UNKNOWN_JOB
		{"x  ", []string{"x", ""}},
	} {
		got := AppendAdminFields(nil, []byte(c.line))
		var gs []string
		for _, g := range got {
			gs = append(gs, string(g))
		}
		if !equalStrings(gs, c.want) {
			t.Errorf("%q: got %q, want %q", c.line, gs, c.want)
		}
	}
	// Appending to a word does not overwrite the line.
	line := []byte("ab cd")
	f := AppendAdminFields(nil, line)
	_ = append(f[0], 'X')
	if string(line) != "ab cd" {
		t.Errorf("line clobbered: %q", line)
	}
}

func TestAdminReplies(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{string(AppendAdminUnknownCommand(nil, []byte("foo"))), "ERR UNKNOWN_COMMAND Unknown+server+commandfoo\r\n"},
		{string(AppendAdminUnknownCommand(nil, nil)), "ERR UNKNOWN_COMMAND Unknown+server+command\r\n"},
		{string(AppendAdminInvalidArguments(nil, []byte("maxqueue"))),
			"ERR INVALID_ARGUMENTS An+incomplete+set+of+arguments+was+sent+to+this+command+maxqueue\r\n"},
		{string(AppendAdminInvalidArguments([]byte("x"), []byte("MaxQueue"))),
			"xERR INVALID_ARGUMENTS An+incomplete+set+of+arguments+was+sent+to+this+command+MaxQueue\r\n"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	if !strings.HasSuffix(AdminOK, "\r\n") || AdminEnd != ".\n" {
		t.Error("admin constants")
	}
}
