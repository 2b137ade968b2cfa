//go:build !linux

package main

import "time"

// runLoops falls back to goroutines where there is no epoll.
func (b *beanstalkBench) runLoops(ws []*bsWorker, start time.Time) error {
	return b.runGoroutines(ws)
}
