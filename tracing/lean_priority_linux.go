package tracing

import (
	"syscall"
	"unsafe"
)

// Scheduling policies of sched_setscheduler(2).
const (
	schedOther = 0
	schedIdle  = 5
)

// threadID returns the calling thread's id.
func threadID() int { return syscall.Gettid() }

// setThreadIdle moves thread tid into the SCHED_IDLE class, or back into
// SCHED_OTHER.
func setThreadIdle(tid int, idle bool) error {
	policy := schedOther
	if idle {
		policy = schedIdle
	}
	var param struct{ priority int32 } // sched_param: 0 for both policies
	_, _, errno := syscall.RawSyscall(syscall.SYS_SCHED_SETSCHEDULER,
		uintptr(tid), uintptr(policy), uintptr(unsafe.Pointer(&param)))
	if errno != 0 {
		return errno
	}
	return nil
}

// threadIdle reports whether thread tid is in the SCHED_IDLE class.
func threadIdle(tid int) (bool, error) {
	policy, _, errno := syscall.RawSyscall(syscall.SYS_SCHED_GETSCHEDULER, uintptr(tid), 0, 0)
	if errno != 0 {
		return false, errno
	}
	return policy == schedIdle, nil
}
