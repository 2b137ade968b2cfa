package routing

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"
)

// BreakerState is the state of a Breaker.
type BreakerState uint8

// The breaker states.
const (
	// BreakerClosed lets everything through.
	BreakerClosed BreakerState = iota
	// BreakerHalfOpen lets a few trial sessions through; their outcome
	// closes or reopens the breaker.
	BreakerHalfOpen
	// BreakerOpen refuses everything until its OpenTimeout has passed.
	BreakerOpen
)

// String returns "closed", "half-open" or "open".
func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerHalfOpen:
		return "half-open"
	case BreakerOpen:
		return "open"
	}
	return fmt.Sprintf("BreakerState(%d)", uint8(s))
}

// BreakerConfig configures a Breaker. Zero fields take the defaults.
type BreakerConfig struct {
	// Name names the breaker (the backend) in OnStateChange.
	Name string
	// Failures is how many consecutive transport failures open the
	// breaker. Default 5.
	Failures int
	// OpenTimeout is how long the breaker stays open before it lets trial
	// sessions through. Default 30s.
	OpenTimeout time.Duration
	// HalfOpenRequests is how many trial sessions may be in flight while
	// half open; that many consecutive successes close it. Default 1.
	HalfOpenRequests int
	// OnStateChange, if not nil, is called on every state change, for
	// metrics and logs. It runs with the breaker's lock held, on the
	// goroutine that caused the change: it must be quick and must not
	// call into the breaker.
	OnStateChange func(name string, from, to BreakerState)
}

// Breaker is a circuit breaker for one backend, built on
// github.com/sony/gobreaker/v2. It counts only transport failures
// (IsTransport): a backend that answers NOT_FOUND or an ERROR packet is
// healthy, however unwelcome the answer. It is safe for concurrent use.
//
// gobreaker reads time.Now itself and takes no clock, so the open timeout is
// wall-clock time; tests drive it with tiny timeouts and deadline-bounded
// polling rather than a fake clock.
//
// What it counts, through Backend.OpenGearman/OpenBeanstalk: each dial
// (success or failure) and each session that ends by itself (a failure).
// Requests inside a healthy session are not counted one by one: a broken
// connection fails them all at once and is counted once.
type Breaker struct {
	cb *gobreaker.TwoStepCircuitBreaker[struct{}]
	// open mirrors "gobreaker's state is open", kept by OnStateChange, so
	// that Ready, asked on every request, reads no clock while the breaker
	// is closed: gobreaker's State calls time.Now each time.
	open atomic.Bool
}

// NewBreaker returns a closed breaker.
func NewBreaker(cfg BreakerConfig) (*Breaker, error) {
	if cfg.Failures < 0 || cfg.OpenTimeout < 0 || cfg.HalfOpenRequests < 0 {
		return nil, fmt.Errorf("routing: breaker %q: negative setting", cfg.Name)
	}
	if cfg.Failures == 0 {
		cfg.Failures = 5
	}
	if cfg.OpenTimeout == 0 {
		cfg.OpenTimeout = 30 * time.Second
	}
	if cfg.HalfOpenRequests == 0 {
		cfg.HalfOpenRequests = 1
	}
	failures := uint32(cfg.Failures)
	st := gobreaker.Settings{
		Name:        cfg.Name,
		MaxRequests: uint32(cfg.HalfOpenRequests),
		Timeout:     cfg.OpenTimeout,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= failures },
		// Only transport failures count against the backend; anything
		// else (ErrClosed, a protocol-level error) is excluded rather
		// than counted as a success, so it cannot close a half-open
		// breaker either.
		IsExcluded: func(err error) bool { return err != nil && !IsTransport(err) },
	}
	b := &Breaker{}
	f := cfg.OnStateChange
	st.OnStateChange = func(name string, from, to gobreaker.State) {
		b.open.Store(to == gobreaker.StateOpen)
		if f != nil {
			f(name, fromGo(from), fromGo(to))
		}
	}
	b.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](st)
	return b, nil
}

func fromGo(s gobreaker.State) BreakerState {
	switch s {
	case gobreaker.StateHalfOpen:
		return BreakerHalfOpen
	case gobreaker.StateOpen:
		return BreakerOpen
	}
	return BreakerClosed
}

// State returns the current state; an open breaker whose timeout has passed
// reports half-open.
func (b *Breaker) State() BreakerState { return fromGo(b.cb.State()) }

// Ready reports whether the breaker would let a session through now (it is
// not open). A half-open breaker is ready, though Allow may still refuse
// once its trial sessions are in flight.
func (b *Breaker) Ready() bool {
	// Only an open breaker can have changed state with time passing (to
	// half-open): ask gobreaker then.
	return b == nil || !b.open.Load() || b.cb.State() != gobreaker.StateOpen
}

// Allow asks to start one attempt. It returns ErrUnavailable (wrapping
// gobreaker's reason) when the breaker refuses; otherwise the caller must
// call done exactly once with the attempt's outcome: nil for success, an
// error that IsTransport counts as a failure, any other error ignored.
func (b *Breaker) Allow() (done func(err error), err error) {
	done, err = b.cb.Allow()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrUnavailable, b.cb.Name(), err)
	}
	return done, nil
}

// allow is Allow for an optional breaker: a nil Breaker allows everything.
func (b *Breaker) allow() (func(error), error) {
	if b == nil {
		return func(error) {}, nil
	}
	return b.Allow()
}

// Record counts the outcome of something that was not started through
// Allow, such as an established session that broke: a transport failure
// counts as one failure while the breaker is not open; anything else is
// ignored. A nil Breaker ignores everything.
func (b *Breaker) Record(err error) {
	if b == nil || !IsTransport(err) {
		return
	}
	if done, aerr := b.cb.Allow(); aerr == nil {
		done(err)
	}
}
