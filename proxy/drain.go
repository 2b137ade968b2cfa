package proxy

// Drain stops accepting connections and new jobs while the open
// connections keep working: put answers DRAINING (as after beanstalkd's
// SIGUSR1), and reserve, delete, release, bury and touch go on, so the
// jobs workers hold can finish. Shutdown ends it.
func (s *BeanstalkServer) Drain() {
	s.eng.SetDraining(true)
	if s.gw != nil {
		s.gw.drain.Store(true) // the gateway's puts (beanstalk_gateway_limits.go)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for l := range s.lns {
		delete(s.lns, l) // Serve then returns nil
		l.Close()
	}
}

// Idle reports whether no job is reserved (through the gateway too, on any
// backend): a drain can end without taking a job from a worker in the
// middle of it.
func (s *BeanstalkServer) Idle() bool {
	if s.gw != nil && s.gw.reserved.Load() > 0 {
		return false
	}
	reserved := 0
	s.eng.QueueDepths(func(_ string, _, r, _, _ int) { reserved += r })
	return reserved == 0
}

// Drain stops accepting connections and new jobs while the open
// connections keep working: every SUBMIT_* gets an ERROR QUEUE_ERROR
// (limits_gearman.go says why), while workers keep grabbing and completing
// jobs and clients keep receiving WORK_* packets. Shutdown ends it.
func (s *GearmanServer) Drain() {
	s.draining.Store(true)
	s.mu.Lock()
	defer s.mu.Unlock()
	for l := range s.listeners {
		delete(s.listeners, l) // Serve then returns nil
		l.Close()
	}
}

// Idle reports whether no job of the local engine is running (assigned to
// a worker) and, on a gateway, no client awaits a foreground job it
// submitted upstream. Jobs still queued stay queued (background ones in
// the journal, or upstream).
func (s *GearmanServer) Idle() bool {
	running := 0
	s.engine.QueueDepths(func(_ string, _, r int) { running += r })
	if running > 0 {
		return false
	}
	if s.gw == nil {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if gs, ok := c.sess.(*gwSession); ok && gs.awaitingForeground() {
			return false
		}
	}
	return true
}

// awaitingForeground reports whether a foreground job this session
// submitted is not finished on some backend.
func (s *gwSession) awaitingForeground() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lineJobs > 0 {
		return true
	}
	for _, b := range s.backends {
		if len(b.foreground) > 0 {
			return true
		}
	}
	return false
}
