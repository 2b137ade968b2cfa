package gearman

import codec "github.com/jobgate/jobgate/codec/gearman"

// Reply answers a request that a layer in front of the session handled
// itself (an access-control denial, a consumed option): it emits a packet
// of type t with args, in order behind any replies the session still
// holds for the journal, and records o as the request's Outcome. A zero
// t emits nothing and only records o. Call it from the goroutine that
// calls Handle, instead of Handle; args are copied.
func (s *Session) Reply(o Outcome, t codec.Type, args ...[]byte) {
	e := s.e
	e.mu.Lock()
	defer e.mu.Unlock()
	s.outcome = o
	if s.closed || t == 0 {
		return
	}
	e.emit(s, t, args...)
}

// ReplyText is Reply for an admin text line: text is written in order
// behind any held replies.
func (s *Session) ReplyText(text []byte) {
	e := s.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if s.closed {
		return
	}
	e.writeText(s, text)
}
