package main

import (
	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/internal/epoll"
	"github.com/jobgate/jobgate/internal/uring"
)

// applyLoopWait sets how the event loops opened from now on wait
// (config.LoopWait, config.Config.EventLoopSpin) and make their socket calls
// (config.IOUring). It runs
// before the servers start: a loop keeps the ways it chose when it
// opened, so a reload does not change them.
func applyLoopWait(cfg *config.Config) {
	epoll.SetParkAlways(cfg.LoopWait == config.LoopWaitPark)
	epoll.SetSpin(cfg.EventLoopSpin())
	uring.Disable(!cfg.IOUring)
}
