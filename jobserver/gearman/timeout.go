package gearman

import (
	"math"
	"time"
)

// MinCanDoTimeout is the shortest CAN_DO_TIMEOUT gearmand applies: it
// raises any positive timeout below a second to one second when it arms a
// job's timer (libgearman-server, gearman_server_con_add_job_timeout), so
// a worker asking for 30 ms still has a second to finish. The engine and
// the gateway's trace deadline follow it, so a job is taken back, and its
// process span ended, when gearmand would do it.
const MinCanDoTimeout = time.Second

// canDoTimeout is the timeout a CAN_DO_TIMEOUT of ms milliseconds sets:
// none when not positive, else at least MinCanDoTimeout.
func canDoTimeout(ms int64) time.Duration {
	if ms <= 0 {
		return 0
	}
	if ms > int64(math.MaxInt64/time.Millisecond) {
		return math.MaxInt64 // as good as none, and no overflow
	}
	return max(time.Duration(ms)*time.Millisecond, MinCanDoTimeout)
}
