//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package journal

import (
	"fmt"
	"os"
	"runtime"
)

// lockDir fails: without flock the journal cannot keep a second process out
// of the directory, and two writers would corrupt it.
func lockDir(dir string) (*os.File, error) {
	return nil, fmt.Errorf("journal: directory locking is not supported on %s", runtime.GOOS)
}

func unlockDir(f *os.File) error { return nil }
