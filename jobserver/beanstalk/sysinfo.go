package beanstalk

import (
	"crypto/rand"
	"encoding/hex"
	"os"
)

// HostSystem returns the facts of the running process: pid, hostname and
// uname fields, a random instance id, and its CPU usage.
func HostSystem() System {
	s := System{PID: os.Getpid(), Rusage: rusage}
	s.Hostname, s.OS, s.Platform = uname()
	if s.Hostname == "" {
		s.Hostname, _ = os.Hostname()
	}
	var id [8]byte
	_, _ = rand.Read(id[:]) // never fails on supported platforms
	s.InstanceID = hex.EncodeToString(id[:])
	return s
}
