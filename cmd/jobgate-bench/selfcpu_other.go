//go:build !unix

package main

import "time"

// selfCPU is unavailable here: the generator's own cost is not reported.
func selfCPU() time.Duration { return 0 }
