package routing

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"
)

type transitions struct {
	mu  sync.Mutex
	got []string
}

func (tr *transitions) record(name string, from, to BreakerState) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.got = append(tr.got, fmt.Sprintf("%s:%v->%v", name, from, to))
}

func (tr *transitions) String() string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return fmt.Sprint(tr.got)
}

var errDial = &TransportError{Backend: "b", Op: "dial", Err: syscall.ECONNREFUSED}

func TestIsTransport(t *testing.T) {
	for _, err := range []error{
		errDial, io.EOF, io.ErrUnexpectedEOF, syscall.ECONNRESET, &net.OpError{Op: "read", Err: errors.New("x")},
		context.DeadlineExceeded, fmt.Errorf("wrapped: %w", errDial),
	} {
		if !IsTransport(err) {
			t.Errorf("IsTransport(%v) = false", err)
		}
	}
	for _, err := range []error{
		nil, ErrClosed, ErrUnavailable, context.Canceled, errors.New("NOT_FOUND"), ErrIDOverflow,
	} {
		if IsTransport(err) {
			t.Errorf("IsTransport(%v) = true", err)
		}
	}
}

// TestBreakerCountsTransportOnly: protocol answers never open the breaker;
// consecutive transport failures do. The open timeout is set far beyond the
// test so the open state cannot lapse while we look at it.
func TestBreakerCountsTransportOnly(t *testing.T) {
	var tr transitions
	br, err := NewBreaker(BreakerConfig{Name: "b", Failures: 3, OpenTimeout: time.Hour, OnStateChange: tr.record})
	if err != nil {
		t.Fatal(err)
	}
	attempt := func(err error) error {
		done, aerr := br.Allow()
		if aerr != nil {
			return aerr
		}
		done(err)
		return nil
	}
	for range 10 {
		attempt(errors.New("NOT_FOUND"))
		attempt(ErrClosed)
	}
	attempt(errDial)
	attempt(errDial)
	attempt(nil) // a success resets the run
	attempt(errDial)
	attempt(errDial)
	if br.State() != BreakerClosed {
		t.Fatalf("state %v after non-consecutive failures", br.State())
	}
	attempt(errDial)
	if br.State() != BreakerOpen || br.Ready() {
		t.Fatalf("state %v after 3 consecutive failures", br.State())
	}
	if err := attempt(nil); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("open breaker allowed an attempt: %v", err)
	}
	br.Record(errDial) // ignored while open, must not panic
	if got := tr.String(); got != "[b:closed->open]" {
		t.Errorf("transitions %s", got)
	}
}

// TestBreakerRecovers: gobreaker has no clock to inject, so the open
// timeout is 1ns: the first look at the state after tripping finds it
// half-open, deterministically, with no sleep.
func TestBreakerRecovers(t *testing.T) {
	var tr transitions
	br, _ := NewBreaker(BreakerConfig{Name: "b", Failures: 1, OpenTimeout: time.Nanosecond,
		HalfOpenRequests: 2, OnStateChange: tr.record})
	br.Record(errDial)
	time.Sleep(time.Microsecond) // let 1ns of wall clock pass, whatever the clock's resolution
	if br.State() != BreakerHalfOpen || !br.Ready() {
		t.Fatalf("state %v", br.State())
	}
	d1, err1 := br.Allow()
	d2, err2 := br.Allow()
	if _, err3 := br.Allow(); err1 != nil || err2 != nil || !errors.Is(err3, ErrUnavailable) {
		t.Fatalf("half-open admitted: %v %v %v", err1, err2, err3)
	}
	d1(nil)
	d2(errors.New("NOT_FOUND")) // excluded: neither closes nor reopens
	if br.State() != BreakerHalfOpen {
		t.Fatalf("state %v after one success and one protocol error", br.State())
	}
	d, _ := br.Allow()
	d(nil)
	if br.State() != BreakerClosed {
		t.Fatalf("state %v after two successes", br.State())
	}
	if got := tr.String(); got != "[b:closed->open b:open->half-open b:half-open->closed]" {
		t.Errorf("transitions %s", got)
	}
}

func TestNilBreaker(t *testing.T) {
	var br *Breaker
	br.Record(errDial)
	if !br.Ready() {
		t.Fatal("nil breaker not ready")
	}
	done, err := br.allow()
	if err != nil {
		t.Fatal(err)
	}
	done(errDial)
	if _, err := NewBreaker(BreakerConfig{Failures: -1}); err == nil {
		t.Fatal("negative failures accepted")
	}
}

// fakeGearman is a GearmanBackend whose Open fails while err is set.
type fakeGearman struct {
	err    error
	closed func(error)
}

func (f *fakeGearman) Open(_ context.Context, ev GearmanEvents) (GearmanConn, error) {
	if f.err != nil {
		return nil, f.err
	}
	f.closed = ev.Closed
	return nil, nil
}

func TestBackendOpenThroughBreaker(t *testing.T) {
	br, _ := NewBreaker(BreakerConfig{Name: "g", Failures: 2, OpenTimeout: time.Hour})
	fg := &fakeGearman{}
	b := &Backend{ID: 1, Name: "g", Gearman: fg, Breaker: br}
	var lost []error
	if _, err := b.OpenGearman(context.Background(), GearmanEvents{Closed: func(err error) { lost = append(lost, err) }}); err != nil {
		t.Fatal(err)
	}
	fg.closed(errDial) // the session broke: counted, and passed on
	if len(lost) != 1 || br.State() != BreakerClosed {
		t.Fatalf("lost %v, state %v", lost, br.State())
	}
	fg.err = errDial
	if _, err := b.OpenGearman(context.Background(), GearmanEvents{}); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("open: %v", err)
	}
	if br.State() != BreakerOpen || b.Available() {
		t.Fatalf("state %v after a lost session and a failed dial", br.State())
	}
	if _, err := b.OpenGearman(context.Background(), GearmanEvents{}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("open while open: %v", err)
	}
	if _, err := b.OpenBeanstalk(context.Background(), nil); err == nil {
		t.Fatal("a Gearman backend opened a Beanstalk session")
	}
}
