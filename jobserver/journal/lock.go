//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockName is the file in the journal directory that holds the flock.
const lockName = "LOCK"

// lockDir takes an exclusive flock on dir/LOCK, without waiting, and writes
// the process id into the file so the error a second process gets can say
// who holds it. flock belongs to the open file, so the lock goes away with
// the process however it dies: there is no stale lock to clean up after a
// crash. It also conflicts between two Opens in one process.
func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, lockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("journal: open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := "unknown"
		if b, rerr := os.ReadFile(path); rerr == nil && len(strings.TrimSpace(string(b))) > 0 {
			holder = strings.TrimSpace(string(b))
		}
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is in use (lock %s held by pid %s)", ErrLocked, dir, path, holder)
		}
		return nil, fmt.Errorf("journal: lock %s: %w", path, err)
	}
	// The pid is only a diagnostic; failing to write it is no reason to
	// refuse to start. Write, then cut to length: truncating to zero first
	// frees the block, which is slow on disks mounted with discard.
	pid := []byte(strconv.Itoa(os.Getpid()) + "\n")
	if _, err := f.WriteAt(pid, 0); err == nil {
		_ = f.Truncate(int64(len(pid)))
	}
	return f, nil
}

// unlockDir releases the lock taken by lockDir. The file stays: removing it
// would let a third process lock a fresh inode while a second still waits on
// the old one.
func unlockDir(f *os.File) error {
	if f == nil {
		return nil
	}
	return f.Close()
}
