//go:build !linux

package tracing

import "errors"

// threadID is 0 where threads cannot be told apart.
func threadID() int { return 0 }

// setThreadIdle fails: only Linux has the SCHED_IDLE class.
func setThreadIdle(int, bool) error { return errors.ErrUnsupported }

// threadIdle reports false: only Linux has the SCHED_IDLE class.
func threadIdle(int) (bool, error) { return false, nil }
