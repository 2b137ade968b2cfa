//go:build linux

package proxy

// GatewayLoopCounts returns how many commands the Beanstalk gateway's event
// loop ran on the loop and handed to goroutines, and how often it stopped
// reading a client for backpressure; ok is false when the gateway has no
// loop (its connections are served by goroutines).
func GatewayLoopCounts(s *BeanstalkServer) (on, off, stalls int64, ok bool) {
	s.mu.Lock()
	l := s.gw.loop
	s.mu.Unlock()
	if l == nil {
		return 0, 0, 0, false
	}
	return l.onLoop.Load(), l.offLoop.Load(), l.stalls.Load(), true
}
