package beanstalk

import (
	"syscall"
	"time"
)

// uname returns the node name, OS version and machine, as beanstalkd
// prints them.
func uname() (host, version, machine string) {
	var u syscall.Utsname
	if err := syscall.Uname(&u); err != nil {
		return "", "", ""
	}
	return utsString(u.Nodename[:]), utsString(u.Version[:]), utsString(u.Machine[:])
}

// utsString takes int8 or uint8: the Utsname element type differs by
// architecture.
func utsString[T int8 | uint8](a []T) string {
	b := make([]byte, 0, len(a))
	for _, c := range a {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	return string(b)
}

func rusage() (user, sys time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}
