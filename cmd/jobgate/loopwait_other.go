//go:build !linux

package main

import "github.com/jobgate/jobgate/config"

// applyLoopWait does nothing: there are no event loops off Linux.
func applyLoopWait(*config.Config) {}
