package proxy_test

import "testing"

// bsJobStats is the stats-job YAML with the values that vary (age,
// time-left) left open.
func bsJobStats(id, tube, state, pri, delay, ttr, reserves, timeouts, releases, buries, kicks string) string {
	return "OK {n}\r\n---\nid: " + id + "\ntube: " + tube + "\nstate: " + state + "\npri: " + pri +
		"\nage: {n}\ndelay: " + delay + "\nttr: " + ttr + "\ntime-left: {n}\nfile: 0\nreserves: " + reserves +
		"\ntimeouts: " + timeouts + "\nreleases: " + releases + "\nburies: " + buries + "\nkicks: " + kicks + "\n\r\n"
}

func TestBeanstalkTranscriptsJobs(t *testing.T) {
	bsRunTranscripts(t, []bsTranscript{
		{name: "ownership", steps: []bsStep{
			{conn: 1, send: "put 5 0 100 1\r\nx\r\n", want: "INSERTED 1\r\n"},
			{conn: 1, send: "reserve\r\n", want: "RESERVED 1 1\r\nx\r\n"},
			{conn: 2, send: "release 1 0 0\r\nbury 1 0\r\ntouch 1\r\ndelete 1\r\nkick-job 1\r\nreserve-job 1\r\n",
				want: "NOT_FOUND\r\nNOT_FOUND\r\nNOT_FOUND\r\nNOT_FOUND\r\nNOT_FOUND\r\nNOT_FOUND\r\n"},
			{conn: 2, send: "peek 1\r\n", want: "FOUND 1 1\r\nx\r\n"},
			{conn: 1, send: "touch 1\r\n", want: "TOUCHED\r\n"},
			{conn: 1, send: "release 1 7 0\r\n", want: "RELEASED\r\n"},
			{conn: 1, send: "release 1 7 0\r\nbury 1 0\r\ntouch 1\r\n", want: "NOT_FOUND\r\nNOT_FOUND\r\nNOT_FOUND\r\n"},
			{conn: 2, send: "stats-job 1\r\n", want: bsJobStats("1", "default", "ready", "7", "0", "100", "1", "0", "1", "0", "0")},
			{conn: 2, send: "delete 1\r\n", want: "DELETED\r\n"},
			{conn: 2, send: "stats-job 1\r\n", want: "NOT_FOUND\r\n"},
		}},
		{name: "delete-any-state", steps: []bsStep{
			{send: "put 0 0 10 1\r\na\r\nput 0 100 10 1\r\nb\r\nput 0 0 10 1\r\nc\r\n", want: "INSERTED 1\r\nINSERTED 2\r\nINSERTED 3\r\n"},
			{send: "reserve-job 3\r\nbury 3 0\r\n", want: "RESERVED 3 1\r\nc\r\nBURIED\r\n"},
			{conn: 1, send: "delete 1\r\ndelete 2\r\ndelete 3\r\n", want: "DELETED\r\nDELETED\r\nDELETED\r\n"},
			{send: "stats-tube default\r\n", want: "OK {n}\r\n---\nname: default\ncurrent-jobs-urgent: 0\ncurrent-jobs-ready: 0\ncurrent-jobs-reserved: 0\ncurrent-jobs-delayed: 0\ncurrent-jobs-buried: 0\ntotal-jobs: 3\ncurrent-using: 2\ncurrent-watching: 2\ncurrent-waiting: 0\ncmd-delete: 3\ncmd-pause-tube: 0\npause: 0\npause-time-left: 0\n\r\n"},
		}},
		{name: "bury-kick", steps: []bsStep{
			{send: "put 1 0 10 1\r\na\r\nput 1 0 10 1\r\nb\r\nput 1 100 10 1\r\nc\r\nput 1 50 10 1\r\nd\r\n",
				want: "INSERTED 1\r\nINSERTED 2\r\nINSERTED 3\r\nINSERTED 4\r\n"},
			{send: "reserve\r\nreserve\r\nbury 2 9\r\nbury 1 8\r\n", want: "RESERVED 1 1\r\na\r\nRESERVED 2 1\r\nb\r\nBURIED\r\nBURIED\r\n"},
			{send: "stats-job 1\r\n", want: bsJobStats("1", "default", "buried", "8", "0", "10", "1", "0", "0", "1", "0")},
			{send: "kick 1\r\n", want: "KICKED 1\r\n"},
			{send: "peek-ready\r\n", want: "FOUND 2 1\r\nb\r\n"},
			{send: "kick 10\r\n", want: "KICKED 1\r\n"},
			{send: "stats-job 3\r\n", want: bsJobStats("3", "default", "delayed", "1", "100", "10", "0", "0", "0", "0", "0")},
			{send: "kick 1\r\n", want: "KICKED 1\r\n"},
			{send: "stats-job 4\r\n", want: bsJobStats("4", "default", "ready", "1", "50", "10", "0", "0", "0", "0", "1")},
			{send: "kick 5\r\nkick 5\r\n", want: "KICKED 1\r\nKICKED 0\r\n"},
			{send: "kick x\r\n", want: "BAD_FORMAT\r\n"},
			{send: "stats\r\n", want: "OK {n}\r\n---\ncurrent-jobs-urgent: 4\ncurrent-jobs-ready: 4\ncurrent-jobs-reserved: 0\ncurrent-jobs-delayed: 0\ncurrent-jobs-buried: 0\n{...}"},
		}},
		{name: "kick-job", steps: []bsStep{
			{send: "put 1 0 10 1\r\na\r\nput 1 60 10 1\r\nb\r\nput 1 0 10 1\r\nc\r\nput 1 0 10 1\r\nd\r\n",
				want: "INSERTED 1\r\nINSERTED 2\r\nINSERTED 3\r\nINSERTED 4\r\n"},
			{send: "reserve-job 3\r\nbury 3 1\r\nreserve-job 4\r\n", want: "RESERVED 3 1\r\nc\r\nBURIED\r\nRESERVED 4 1\r\nd\r\n"},
			{send: "kick-job 1\r\nkick-job 2\r\nkick-job 3\r\nkick-job 4\r\nkick-job 99\r\n",
				want: "NOT_FOUND\r\nKICKED\r\nKICKED\r\nNOT_FOUND\r\nNOT_FOUND\r\n"},
			{send: "stats-job 2\r\n", want: bsJobStats("2", "default", "ready", "1", "60", "10", "0", "0", "0", "0", "1")},
		}},
		{name: "reserve-job", steps: []bsStep{
			{send: "put 1 0 10 1\r\na\r\nput 1 100 10 1\r\nb\r\n", want: "INSERTED 1\r\nINSERTED 2\r\n"},
			{send: "reserve-job 2\r\n", want: "RESERVED 2 1\r\nb\r\n"},
			{send: "reserve-job 2\r\nreserve-job 3\r\nreserve-job x\r\n", want: "NOT_FOUND\r\nNOT_FOUND\r\nBAD_FORMAT\r\n"},
			{send: "stats-job 2\r\n", want: bsJobStats("2", "default", "reserved", "1", "100", "10", "1", "0", "0", "0", "0")},
		}},
		{name: "release-delay", steps: []bsStep{
			{send: "put 1 0 10 1\r\na\r\nreserve\r\n", want: "INSERTED 1\r\nRESERVED 1 1\r\na\r\n"},
			{send: "release 1 2 1\r\n", want: "RELEASED\r\n"},
			{send: "stats-job 1\r\n", want: bsJobStats("1", "default", "delayed", "2", "1", "10", "1", "0", "1", "0", "0")},
			{send: "peek-ready\r\n", want: "NOT_FOUND\r\n"},
			{retry: true, send: "peek-ready\r\n", want: "FOUND 1 1\r\na\r\n"},
		}},
		{name: "drain", steps: []bsStep{
			{send: "put 0 0 10 1\r\na\r\n", want: "INSERTED 1\r\n"},
			{drain: true},
			{send: "put 0 0 10 1\r\nb\r\n", want: "DRAINING\r\n"},
			{send: "reserve\r\ndelete 1\r\n", want: "RESERVED 1 1\r\na\r\nDELETED\r\n"},
		}},
	})
}

func TestBeanstalkTranscriptsReserve(t *testing.T) {
	bsRunTranscripts(t, []bsTranscript{
		{name: "timeouts", steps: []bsStep{
			{send: "reserve-with-timeout 0\r\n", want: "TIMED_OUT\r\n"},
			{send: "reserve-with-timeout 1\r\n", none: true},
			{want: "TIMED_OUT\r\n"},
			// Not "reserve-with-timeout x": 1.12 reads it as 0 (strtol), 1.13
			// and the codec answer BAD_FORMAT.
		}},
		{name: "blocking-reserve", steps: []bsStep{
			{conn: 1, send: "watch other\r\n", want: "WATCHING 2\r\n"},
			{conn: 1, send: "reserve\r\n", none: true},
			{conn: 2, send: "stats-tube other\r\n", want: "OK {n}\r\n---\nname: other\ncurrent-jobs-urgent: 0\ncurrent-jobs-ready: 0\ncurrent-jobs-reserved: 0\ncurrent-jobs-delayed: 0\ncurrent-jobs-buried: 0\ntotal-jobs: 0\ncurrent-using: 0\ncurrent-watching: 1\ncurrent-waiting: 1\ncmd-delete: 0\ncmd-pause-tube: 0\npause: 0\npause-time-left: 0\n\r\n"},
			{conn: 2, send: "use other\r\nput 0 0 10 3\r\nabc\r\n", want: "USING other\r\nINSERTED 1\r\n"},
			{conn: 1, want: "RESERVED 1 3\r\nabc\r\n"},
			{conn: 1, send: "delete 1\r\n", want: "DELETED\r\n"},
		}},
		{name: "pipelined-behind-reserve", steps: []bsStep{
			{conn: 1, send: "reserve\r\nlist-tube-used\r\n", none: true},
			{conn: 2, send: "put 0 0 10 1\r\nx\r\n", want: "INSERTED 1\r\n"},
			{conn: 1, want: "RESERVED 1 1\r\nx\r\nUSING default\r\n"},
		}},
		{name: "deadline-soon", steps: []bsStep{
			{send: "put 0 0 1 1\r\na\r\nreserve\r\n", want: "INSERTED 1\r\nRESERVED 1 1\r\na\r\n"},
			{send: "reserve\r\n", want: "DEADLINE_SOON\r\n"},
			{send: "reserve-with-timeout 5\r\n", want: "DEADLINE_SOON\r\n"},
			// Not waiting here for the TTR to run out: beanstalkd 1.12 often
			// misses it on an idle connection (TestBeanstalkServerTTRIdle
			// holds jobgate to it).
			{send: "delete 1\r\n", want: "DELETED\r\n"},
		}},
		{name: "deadline-soon-while-waiting", steps: []bsStep{
			{send: "put 0 0 2 1\r\na\r\nreserve\r\n", want: "INSERTED 1\r\nRESERVED 1 1\r\na\r\n"},
			{send: "reserve\r\n", want: "DEADLINE_SOON\r\n"},
			{send: "touch 1\r\n", want: "TOUCHED\r\n"},
		}},
		{name: "ttr-expiry", steps: []bsStep{
			{conn: 1, send: "put 0 0 1 1\r\na\r\nreserve\r\n", want: "INSERTED 1\r\nRESERVED 1 1\r\na\r\n"},
			// The owner polls: beanstalkd 1.12 can miss the TTR of an idle
			// connection's job (TestBeanstalkServerTTRIdle covers jobgate).
			{conn: 1, retry: true, send: "stats-job 1\r\n", want: bsJobStats("1", "default", "ready", "0", "0", "1", "1", "1", "0", "0", "0")},
			{conn: 2, send: "reserve-with-timeout 4\r\n", want: "RESERVED 1 1\r\na\r\n"},
			{conn: 1, send: "delete 1\r\n", want: "NOT_FOUND\r\n"},
			{conn: 2, send: "stats-job 1\r\n", want: bsJobStats("1", "default", "reserved", "0", "0", "1", "2", "1", "0", "0", "0")},
			{conn: 2, send: "stats\r\n", want: "OK {n}\r\n---\n{...}\njob-timeouts: 1\n{...}"},
		}},
		{name: "delayed-put", steps: []bsStep{
			{send: "put 0 1 10 1\r\na\r\n", want: "INSERTED 1\r\n"},
			{send: "peek-ready\r\npeek-delayed\r\n", want: "NOT_FOUND\r\nFOUND 1 1\r\na\r\n"},
			{send: "reserve-with-timeout 4\r\n", want: "RESERVED 1 1\r\na\r\n"},
		}},
		{name: "close-returns-reservation", steps: []bsStep{
			{conn: 1, send: "put 0 0 100 1\r\na\r\nreserve\r\n", want: "INSERTED 1\r\nRESERVED 1 1\r\na\r\n"},
			{conn: 2, send: "reserve\r\n", none: true},
			{conn: 1, close: true},
			{conn: 2, want: "RESERVED 1 1\r\na\r\n"},
			{conn: 2, send: "stats-job 1\r\n", want: bsJobStats("1", "default", "reserved", "0", "0", "100", "2", "0", "0", "0", "0")},
		}},
		{name: "half-close-while-waiting", steps: []bsStep{
			{conn: 1, send: "reserve\r\n", none: true},
			{conn: 1, shut: true, want: "TIMED_OUT\r\n"},
			{conn: 2, send: "put 0 0 10 1\r\na\r\n", want: "INSERTED 1\r\n"},
			// Through a gateway, the upstream reserve round the client
			// abandoned may still take the job before it ends; the
			// gateway then gives it back at once, so it is ready again
			// within a few round trips.
			{conn: 2, retry: true, send: "peek-ready\r\n", want: "FOUND 1 1\r\na\r\n"},
		}},
		{name: "quit-while-reserved", steps: []bsStep{
			{conn: 1, send: "put 0 0 100 1\r\na\r\nreserve\r\nquit\r\n", want: "INSERTED 1\r\nRESERVED 1 1\r\na\r\n"},
			{conn: 2, retry: true, send: "peek-ready\r\n", want: "FOUND 1 1\r\na\r\n"},
		}},
	})
}
