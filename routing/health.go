package routing

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jobgate/jobgate/jobserver/clock"
)

// HealthConfig configures a Health checker. Zero fields take the defaults.
type HealthConfig struct {
	// Probe checks the backend once (e.g. a Gearman ECHO or a Beanstalk
	// command on a fresh connection) and returns nil when it is healthy.
	// It must return by ctx's deadline. Required.
	Probe func(ctx context.Context) error
	// Clock schedules the probes. Default clock.Real{}.
	Clock clock.Clock
	// Interval is the time between the end of one probe and the start of
	// the next. Default 5s.
	Interval time.Duration
	// Timeout bounds one probe (wall-clock time, through ctx). Default
	// Interval.
	Timeout time.Duration
	// Rise is how many consecutive successful probes mark a down backend
	// up. Default 2.
	Rise int
	// Fall is how many consecutive failed probes mark an up backend down.
	// Default 3.
	Fall int
	// OnChange, if not nil, is called with the new state each time it
	// flips, on the probing goroutine, without any lock held.
	OnChange func(up bool)
}

// Health marks a backend up or down from periodic probes. A backend starts
// up, so traffic flows from the first moment and the breaker, not a probe
// that has not run yet, reacts to a dead upstream. It is safe for concurrent
// use.
type Health struct {
	cfg HealthConfig

	mu      sync.Mutex
	up      bool
	streak  int // consecutive probe results contrary to up
	timer   clock.Timer
	running bool
	gen     int // bumped by Stop, so a probe finishing after it is ignored
}

// NewHealth returns a checker in the up state; Start begins probing.
func NewHealth(cfg HealthConfig) (*Health, error) {
	if cfg.Probe == nil {
		return nil, errors.New("routing: health check without a probe")
	}
	if cfg.Interval < 0 || cfg.Timeout < 0 || cfg.Rise < 0 || cfg.Fall < 0 {
		return nil, errors.New("routing: health check: negative setting")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Interval == 0 {
		cfg.Interval = 5 * time.Second
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = cfg.Interval
	}
	if cfg.Rise == 0 {
		cfg.Rise = 2
	}
	if cfg.Fall == 0 {
		cfg.Fall = 3
	}
	return &Health{cfg: cfg, up: true}, nil
}

// Up reports the current state.
func (h *Health) Up() bool {
	if h == nil {
		return true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.up
}

// Start schedules the first probe one Interval from now. Starting a
// started checker does nothing.
func (h *Health) Start() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.running {
		return
	}
	h.running = true
	h.schedule()
}

// Stop cancels the next probe; a probe running now finishes but its result
// is ignored. The state stays as it was.
func (h *Health) Stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.running = false
	h.gen++
	if h.timer != nil {
		h.timer.Stop()
		h.timer = nil
	}
}

// schedule arms the timer for the next probe. h.mu is held.
func (h *Health) schedule() {
	gen := h.gen
	h.timer = h.cfg.Clock.AfterFunc(h.cfg.Interval, func() { h.probe(gen) })
}

// probe runs one probe, records it and schedules the next, unless Stop came
// in between.
func (h *Health) probe(gen int) {
	ctx, cancel := context.WithTimeout(context.Background(), h.cfg.Timeout)
	err := h.cfg.Probe(ctx)
	cancel()
	h.mu.Lock()
	if gen != h.gen {
		h.mu.Unlock()
		return
	}
	changed := h.record(err == nil)
	up := h.up
	h.schedule()
	h.mu.Unlock()
	if changed && h.cfg.OnChange != nil {
		h.cfg.OnChange(up)
	}
}

// Observe records the outcome of a probe made elsewhere (nil: healthy),
// as a scheduled probe would, and reports whether the state flipped. It
// lets a caller feed passive checks in, and lets tests drive the
// thresholds. OnChange is called as for a scheduled probe.
func (h *Health) Observe(err error) bool {
	h.mu.Lock()
	changed := h.record(err == nil)
	up := h.up
	h.mu.Unlock()
	if changed && h.cfg.OnChange != nil {
		h.cfg.OnChange(up)
	}
	return changed
}

// record counts one result and flips the state at the threshold. h.mu is
// held.
func (h *Health) record(ok bool) bool {
	if ok == h.up {
		h.streak = 0
		return false
	}
	h.streak++
	need := h.cfg.Fall
	if !h.up {
		need = h.cfg.Rise
	}
	if h.streak < need {
		return false
	}
	h.up, h.streak = ok, 0
	return true
}
