package main

import (
	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/internal/epoll"
)

// applyLoopWait sets how the event loops opened from now on wait
// (config.LoopWait). It runs before the servers start: a loop keeps the
// way it chose when it opened, so a reload does not change it.
func applyLoopWait(cfg *config.Config) {
	epoll.SetParkAlways(cfg.LoopWait == config.LoopWaitPark)
}
