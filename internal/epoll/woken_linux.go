package epoll

// NewWoken opens a poller with an eventfd already registered for reading
// under id, for a loop that other goroutines wake: they Signal the eventfd,
// the loop's Wait reports id, and the loop Drains it. Started with one P,
// or after SetParkAlways(true), the loop waits parked on the netpoller;
// after SetSpin, with more than one P, it polls for that long first.
func NewWoken(id int32) (*Poller, *EventFD, error) { return newWoken(id, true) }

// newWoken is NewWoken, parking (when alone, or always after
// SetParkAlways) only if park says so.
func newWoken(id int32, park bool) (*Poller, *EventFD, error) {
	p, err := New()
	if err != nil {
		return nil, nil, err
	}
	w, err := NewEventFD()
	if err != nil {
		p.Close()
		return nil, nil, err
	}
	if err := p.Add(w.FD(), In, id); err != nil {
		p.Close()
		w.Close()
		return nil, nil, err
	}
	p.spinDur, p.gate = spinSetting(), closedSpinGate()
	if !park {
		return p, w, nil
	}
	wait := p.ParkWhenAlone
	if parkAlways.Load() {
		wait = p.Park
	}
	if err := wait(); err != nil {
		p.Close()
		w.Close()
		return nil, nil, err
	}
	return p, w, nil
}
