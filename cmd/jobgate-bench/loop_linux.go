package main

import "github.com/jobgate/jobgate/internal/epoll"

// watchOut makes p report fd (epoll id id) writable while output waits
// for room, and only then; *watching is what is registered now.
func watchOut(p *epoll.Poller, fd int, id int32, want bool, watching *bool) error {
	if want == *watching {
		return nil
	}
	ev := uint32(epoll.In | epoll.Err)
	if want {
		ev |= epoll.Out
	}
	if err := p.Mod(fd, ev, id); err != nil {
		return err
	}
	*watching = want
	return nil
}
