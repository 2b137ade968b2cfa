package proxy_test

import (
	"strconv"
	"strings"
	"testing"
)

// Every command and error of beanstalkd 1.12, as transcripts run against
// jobgate and the real beanstalkd (see bsRunTranscripts).

func TestBeanstalkTranscriptsBasic(t *testing.T) {
	bsRunTranscripts(t, []bsTranscript{
		{name: "put-reserve-delete", steps: []bsStep{
			{send: "put 0 0 10 5\r\nhello\r\n", want: "INSERTED 1\r\n"},
			{send: "put 0 0 10 0\r\n\r\n", want: "INSERTED 2\r\n"},
			{send: "reserve\r\n", want: "RESERVED 1 5\r\nhello\r\n"},
			{send: "reserve\r\n", want: "RESERVED 2 0\r\n\r\n"},
			{send: "delete 1\r\n", want: "DELETED\r\n"},
			{send: "delete 1\r\n", want: "NOT_FOUND\r\n"},
			{send: "delete 2\r\ndelete 3\r\n", want: "DELETED\r\nNOT_FOUND\r\n"},
		}},
		{name: "binary-body", steps: []bsStep{
			{send: "put 0 0 10 8\r\na\r\nb\x00\r\nz\r\n", want: "INSERTED 1\r\n"},
			{send: "peek 1\r\n", want: "FOUND 1 8\r\na\r\nb\x00\r\nz\r\n"},
			{send: "reserve\r\n", want: "RESERVED 1 8\r\na\r\nb\x00\r\nz\r\n"},
		}},
		{name: "priority-order", steps: []bsStep{
			{send: "put 10 0 10 1\r\na\r\nput 5 0 10 1\r\nb\r\nput 10 0 10 1\r\nc\r\nput 4294967295 0 10 1\r\nd\r\nput 0 0 10 1\r\ne\r\n",
				want: "INSERTED 1\r\nINSERTED 2\r\nINSERTED 3\r\nINSERTED 4\r\nINSERTED 5\r\n"},
			{send: "reserve\r\nreserve\r\nreserve\r\nreserve\r\nreserve\r\n",
				want: "RESERVED 5 1\r\ne\r\nRESERVED 2 1\r\nb\r\nRESERVED 1 1\r\na\r\nRESERVED 3 1\r\nc\r\nRESERVED 4 1\r\nd\r\n"},
		}},
		{name: "put-errors", maxJobSize: 10, steps: []bsStep{
			{send: "put 0 0 10 11\r\n01234567890\r\n", want: "JOB_TOO_BIG\r\n"},
			{send: "put 0 0 10 10\r\n0123456789\r\n", want: "INSERTED 1\r\n"},
			{send: "put 0 0 10 3\r\nabcde", want: "EXPECTED_CRLF\r\n"},
			{send: "put 0 0 10\r\n", want: "BAD_FORMAT\r\n"},
			{send: "put -1 0 10 1\r\n", want: "BAD_FORMAT\r\n"},
			{send: "put 4294967296 0 10 1\r\n", want: "BAD_FORMAT\r\n"},
			{send: "put 0 0 10 1 x\r\n", want: "BAD_FORMAT\r\n"},
			{send: "put x\r\n", want: "BAD_FORMAT\r\n"},
			{send: "put\r\n", want: "UNKNOWN_COMMAND\r\n"},
			{send: "stats-job 1\r\n", want: "OK {n}\r\n---\nid: 1\ntube: default\nstate: ready\npri: 0\nage: {n}\ndelay: 0\nttr: 10\ntime-left: 0\nfile: 0\nreserves: 0\ntimeouts: 0\nreleases: 0\nburies: 0\nkicks: 0\n\r\n"},
		}},
		{name: "ttr-zero-is-one", steps: []bsStep{
			{send: "put 0 0 0 1\r\nx\r\n", want: "INSERTED 1\r\n"},
			{send: "stats-job 1\r\n", want: "OK {n}\r\n---\nid: 1\ntube: default\nstate: ready\npri: 0\nage: {n}\ndelay: 0\nttr: 1\ntime-left: 0\nfile: 0\nreserves: 0\ntimeouts: 0\nreleases: 0\nburies: 0\nkicks: 0\n\r\n"},
		}},
		{name: "bad-lines", steps: []bsStep{
			{send: "foo\r\n", want: "UNKNOWN_COMMAND\r\n"},
			{send: "\r\n", want: "UNKNOWN_COMMAND\r\n"},
			{send: "reservex\r\n", want: "BAD_FORMAT\r\n"},
			{send: "stats \r\n", want: "BAD_FORMAT\r\n"},
			{send: "delete\r\n", want: "UNKNOWN_COMMAND\r\n"},
			{send: "delete x\r\n", want: "BAD_FORMAT\r\n"},
			{send: "delete 1 2\r\n", want: "BAD_FORMAT\r\n"},
			{send: "release 1 2\r\n", want: "BAD_FORMAT\r\n"},
			{send: "bury 1\r\n", want: "BAD_FORMAT\r\n"},
			{send: "peek-ready x\r\n", want: "BAD_FORMAT\r\n"},
			{send: "list-tubes x\r\n", want: "BAD_FORMAT\r\n"},
			{send: strings.Repeat("x", 300) + "\r\n", want: "BAD_FORMAT\r\n"},
			{send: "use " + strings.Repeat("a", 201) + "\r\n", want: "BAD_FORMAT\r\n"},
			{send: "list-tube-used\r\n", want: "USING default\r\n"},
		}},
		{name: "largest-body", steps: []bsStep{
			{send: "put 0 0 10 65536\r\n" + strings.Repeat("z", 65536) + "\r\n", want: "JOB_TOO_BIG\r\n"},
			{send: "put 0 0 10 65535\r\n" + strings.Repeat("y", 65535) + "\r\n", want: "INSERTED 1\r\n"},
			{send: "reserve\r\n", want: "RESERVED 1 65535\r\n" + strings.Repeat("y", 65535) + "\r\n"},
		}},
		{name: "quit", steps: []bsStep{
			{send: "quit\r\n", eof: true},
		}},
	})
}

func TestBeanstalkTranscriptsTubes(t *testing.T) {
	long := strings.Repeat("a", 200)
	bsRunTranscripts(t, []bsTranscript{
		{name: "use-watch-ignore", steps: []bsStep{
			{send: "use foo\r\n", want: "USING foo\r\n"},
			{send: "list-tube-used\r\n", want: "USING foo\r\n"},
			{send: "watch bar\r\n", want: "WATCHING 2\r\n"},
			{send: "watch bar\r\n", want: "WATCHING 2\r\n"},
			{send: "watch baz\r\n", want: "WATCHING 3\r\n"},
			{send: "list-tubes\r\n", want: bsOK("---\n- default\n- foo\n- bar\n- baz\n")},
			{send: "ignore default\r\n", want: "WATCHING 2\r\n"},
			{send: "list-tubes-watched\r\n", want: bsOK("---\n- baz\n- bar\n")},
			{send: "ignore nothere\r\n", want: "WATCHING 2\r\n"},
			{send: "ignore bar\r\n", want: "WATCHING 1\r\n"},
			{send: "ignore baz\r\n", want: "NOT_IGNORED\r\n"},
			{send: "list-tubes\r\n", want: bsOK("---\n- default\n- foo\n- baz\n")},
			{send: "use " + long + "\r\n", want: "USING " + long + "\r\n"},
			{send: "use a-b+c/d;e.f$g_h(i)\r\n", want: "USING a-b+c/d;e.f$g_h(i)\r\n"},
			{send: "use -x\r\n", want: "BAD_FORMAT\r\n"},
			{send: "use a b\r\n", want: "BAD_FORMAT\r\n"},
			{send: "watch a*b\r\n", want: "BAD_FORMAT\r\n"},
			{send: "stats-tube foo\r\n", want: "NOT_FOUND\r\n"},
		}},
		{name: "tube-lifetime", steps: []bsStep{
			{conn: 1, send: "use t1\r\nput 0 0 10 1\r\nx\r\nuse default\r\n", want: "USING t1\r\nINSERTED 1\r\nUSING default\r\n"},
			{conn: 2, send: "watch t2\r\n", want: "WATCHING 2\r\n"},
			{conn: 1, send: "list-tubes\r\n", want: bsOK("---\n- default\n- t1\n- t2\n")},
			{conn: 2, close: true},
			{conn: 1, send: "delete 1\r\n", want: "DELETED\r\n"},
			{conn: 1, retry: true, send: "list-tubes\r\n", want: bsOK("---\n- default\n")},
		}},
		{name: "peek", steps: []bsStep{
			{send: "peek-ready\r\npeek-delayed\r\npeek-buried\r\npeek 1\r\n", want: "NOT_FOUND\r\nNOT_FOUND\r\nNOT_FOUND\r\nNOT_FOUND\r\n"},
			{send: "put 9 0 10 2\r\nr9\r\nput 3 0 10 2\r\nr3\r\nput 1 100 10 2\r\nd1\r\nput 1 50 10 2\r\nd2\r\n", want: "INSERTED 1\r\nINSERTED 2\r\nINSERTED 3\r\nINSERTED 4\r\n"},
			{send: "peek-ready\r\n", want: "FOUND 2 2\r\nr3\r\n"},
			{send: "peek-delayed\r\n", want: "FOUND 4 2\r\nd2\r\n"},
			{send: "peek 3\r\n", want: "FOUND 3 2\r\nd1\r\n"},
			{send: "reserve\r\nbury 2 7\r\nreserve\r\nbury 1 7\r\n", want: "RESERVED 2 2\r\nr3\r\nBURIED\r\nRESERVED 1 2\r\nr9\r\nBURIED\r\n"},
			{send: "peek-buried\r\n", want: "FOUND 2 2\r\nr3\r\n"},
			{conn: 1, send: "use other\r\npeek-ready\r\npeek-buried\r\npeek 2\r\n", want: "USING other\r\nNOT_FOUND\r\nNOT_FOUND\r\nFOUND 2 2\r\nr3\r\n"},
		}},
		{name: "pause-tube", steps: []bsStep{
			{send: "put 0 0 10 1\r\nx\r\n", want: "INSERTED 1\r\n"},
			{send: "pause-tube nothere 10\r\n", want: "NOT_FOUND\r\n"},
			{send: "pause-tube default 10\r\n", want: "PAUSED\r\n"},
			{send: "pause-tube default x\r\n", want: "BAD_FORMAT\r\n"},
			{send: "reserve-with-timeout 0\r\n", want: "TIMED_OUT\r\n"},
			{send: "peek-ready\r\n", want: "FOUND 1 1\r\nx\r\n"},
			{send: "stats-tube default\r\n", want: "OK {n}\r\n---\nname: default\ncurrent-jobs-urgent: 1\ncurrent-jobs-ready: 1\ncurrent-jobs-reserved: 0\ncurrent-jobs-delayed: 0\ncurrent-jobs-buried: 0\ntotal-jobs: 1\ncurrent-using: 1\ncurrent-watching: 1\ncurrent-waiting: 0\ncmd-delete: 0\ncmd-pause-tube: 1\npause: 10\npause-time-left: {n}\n\r\n"},
			{send: "reserve-job 1\r\n", want: "RESERVED 1 1\r\nx\r\n"},
			{send: "release 1 0 0\r\n", want: "RELEASED\r\n"},
			{send: "pause-tube default 0\r\n", want: "PAUSED\r\n"},
			{retry: true, send: "reserve-with-timeout 0\r\n", want: "RESERVED 1 1\r\nx\r\n"},
		}},
	})
}

// bsOK is the OK reply carrying body.
func bsOK(body string) string {
	return "OK " + strconv.Itoa(len(body)) + "\r\n" + body + "\r\n"
}
