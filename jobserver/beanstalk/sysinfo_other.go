//go:build !linux

package beanstalk

import (
	"runtime"
	"time"
)

// uname has no portable form outside Linux; stats prints the Go names.
func uname() (host, version, machine string) {
	return "", runtime.GOOS, runtime.GOARCH
}

func rusage() (user, sys time.Duration) { return 0, 0 }
