package proxy

import (
	"time"

	"github.com/jobgate/jobgate/jobserver/gearman"
	"github.com/jobgate/jobgate/tracing"
)

// A gateway knows when an upstream server will take a job back from its
// worker: gearmand after the worker's CAN_DO_TIMEOUT for the function,
// beanstalkd after the job's TTR (reset by touch). It sees no packet when
// that happens, so without a timer of its own the process span would end
// late, as worker_lost, only at the job's next delivery or eviction. The
// gateways arm a timer on their clock at each traced delivery, kept in the
// job's Entry (Deadline), and end the span as the local engines do for the
// same event ("timeout", "ttr_expired").
//
// The timer counts from when the gateway saw the delivery, a little after
// the upstream started its own, so when it fires the upstream should have
// taken the job back. It may not have: beanstalkd was seen to hold an
// expired reservation for seconds while the reserving connection was idle
// (even without a gateway). A WORK_COMPLETE or delete in that window is
// still accepted upstream after the span ended as a timeout; the trace
// then says timeout for a job that completed. The span is never ended twice: an outcome that comes first
// stops the timer, and a timer that fires first clears Process so the late
// outcome finds nothing to end.

// expireProcess clears the open process span of the entry at key if it is
// still proc, the span the deadline was armed for, marks the job ready
// again and returns the span for the caller to end; it returns the zero
// Process when the job's outcome or another delivery came first.
func expireProcess[K comparable](table *tracing.Table[K], key K, proc tracing.Process) tracing.Process {
	var p tracing.Process
	table.Update(key, func(e *tracing.Entry) {
		if !e.Process.IsOpen() || e.Process != proc {
			return
		}
		p = e.Process
		e.Process = tracing.Process{}
		e.Deadline = nil
		e.Enqueued = time.Now()
	})
	return p
}

// canDoTimeout is a CAN_DO_TIMEOUT argument as gearmand (strtol) and the
// local engine read it: optional blanks and sign, then leading decimal
// digits, in milliseconds; zero (no timeout) when it is not positive, and
// at least gearman.MinCanDoTimeout otherwise, the second gearmand raises
// shorter timeouts to.
func canDoTimeout(arg []byte) time.Duration {
	d := canDoMillis(arg)
	if d <= 0 {
		return 0
	}
	return max(d, gearman.MinCanDoTimeout)
}

// canDoMillis reads the milliseconds of a CAN_DO_TIMEOUT argument.
func canDoMillis(arg []byte) time.Duration {
	i := 0
	for i < len(arg) && (arg[i] == ' ' || arg[i] == '\t') {
		i++
	}
	if i < len(arg) && (arg[i] == '-' || arg[i] == '+') {
		if arg[i] == '-' {
			return 0
		}
		i++
	}
	var ms int64
	for ; i < len(arg) && arg[i] >= '0' && arg[i] <= '9'; i++ {
		if ms > int64(time.Duration(1<<62)/time.Millisecond)/10 {
			break // as good as no timeout, and no overflow
		}
		ms = ms*10 + int64(arg[i]-'0')
	}
	return time.Duration(ms) * time.Millisecond
}

// beanstalkTTR is the time-to-run beanstalkd gives a job put with ttr
// seconds: it raises 0 to 1.
func beanstalkTTR(ttr uint32) time.Duration {
	return time.Duration(max(ttr, 1)) * time.Second
}
