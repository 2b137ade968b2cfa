package proxy

import (
	"slices"
	"strconv"
	"strings"

	"github.com/jobgate/jobgate/routing"
	"github.com/jobgate/jobgate/routing/upstream"
)

// mergeWorkers merges the "workers" listings of the local engine
// (parts[0]) and of the upstreams (parts[i+1] for rt.routed[i], when
// answered[i]) into what one gearmand would list for the same
// connections: one line "FD IP CLIENT_ID : FUNCTION..." per connection.
//
// Every client connection of the gateway has a session on the local
// engine, which lists it with the client's own fd and address; its line
// gets the functions the session registered on upstreams only. Each
// upstream lists the gateway's own sessions on it (with the gateway's
// address): those lines are dropped, so that a worker fanning in from
// several backends is listed once, and so are jobgate's own admin and
// probe connections (client id upstream.GearmanAdminClientID, no
// function). The rest of an upstream's lines (connections straight to
// it) are kept as they are. An upstream line is taken for a gateway
// session's when it has the session's client id and exactly the
// functions the session registered there; one not yet or no longer there
// leaves the listing as the upstream gave it.
func (s *gwSession) mergeWorkers(dst []byte, rt *gwRouting, parts [][]string, answered []bool) []byte {
	sessions := s.gw.own.snapshot()
	byFD := make(map[int]*gwSession, len(sessions))
	dupFD := map[int]bool{}
	for _, o := range sessions {
		if _, ok := byFD[o.info.FD]; ok {
			dupFD[o.info.FD] = true // ambiguous: such lines are left alone
		}
		byFD[o.info.FD] = o
	}
	for _, l := range parts[0] {
		dst = append(dst, l...)
		if sp := strings.IndexByte(l, ' '); sp > 0 {
			if fd, err := strconv.Atoi(l[:sp]); err == nil && !dupFD[fd] && byFD[fd] != nil {
				for _, fn := range byFD[fd].upstreamOnlyFunctions() {
					dst = append(append(dst, ' '), fn...)
				}
			}
		}
		dst = append(dst, '\n')
	}
	for i, b := range rt.routed {
		if !answered[i] {
			continue
		}
		// The gateway's sessions on b, by client id. The connections
		// jobgate opens for admin commands and probes (this one, those
		// of concurrent merges) carry their own id.
		own := map[string][][]string{}
		for _, o := range sessions {
			o.registeredOn(b, own)
		}
		for _, l := range parts[i+1] {
			if !isAdminLine(l) && !takeOwn(own, l) {
				dst = append(append(dst, l...), '\n')
			}
		}
	}
	return dst
}

// listedClientIDLen is how much of a client id gearmand keeps, and lists
// in "workers" (as the local engine does; see the transcript "SET_CLIENT_ID
// keeps the first 127 bytes of the id").
const listedClientIDLen = 127

// upstreamOnlyFunctions returns the functions s registered whose pools do
// not hold the local engine, sorted.
func (s *gwSession) upstreamOnlyFunctions() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for fn, a := range s.abilities {
		local := false
		for _, b := range a.backends {
			local = local || b.ID == routing.LocalID
		}
		if !local {
			out = append(out, fn)
		}
	}
	slices.Sort(out)
	return out
}

// registeredOn adds to own, by client id as b lists it, the functions
// of each live session s has on b (sameBackend: one opened before a
// reload that changed b's settings is still on the same server): those
// its abilities registered on that session's backend.
func (s *gwSession) registeredOn(b *routing.Backend, own map[string][][]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	id := "-"
	if s.clientID != nil { // an empty id is listed empty
		id = string(s.clientID[:min(len(s.clientID), listedClientIDLen)])
	}
	for _, bs := range s.backends {
		if bs.dead || !sameBackend(bs.b, b) {
			continue
		}
		fns := []string{}
		for fn, a := range s.abilities {
			if slices.Contains(a.backends, bs.b) {
				fns = append(fns, fn)
			}
		}
		own[id] = append(own[id], fns)
	}
}

// workerLineRest returns what follows "FD IP " in the "workers" line l:
// "ID : FUNCTION...". FD and IP hold no space.
func workerLineRest(l string) (string, bool) {
	sp1 := strings.IndexByte(l, ' ')
	if sp1 < 0 {
		return "", false
	}
	sp2 := strings.IndexByte(l[sp1+1:], ' ')
	if sp2 < 0 {
		return "", false
	}
	return l[sp1+1+sp2+1:], true
}

// isAdminLine reports whether the upstream "workers" line l is one of
// jobgate's own admin or probe connections: its id, no function.
func isAdminLine(l string) bool {
	rest, ok := workerLineRest(l)
	return ok && rest == upstream.GearmanAdminClientID+" :"
}

// takeOwn reports whether the upstream "workers" line l ("FD IP ID :
// FUNCTION...") is one of own (function sets by client id), removing the
// one it matched. An id may hold " :" itself: each " :" of the line is
// tried as the end of the id.
func takeOwn(own map[string][][]string, l string) bool {
	rest, ok := workerLineRest(l)
	if !ok {
		return false
	}
	for from := 0; ; {
		colon := strings.Index(rest[from:], " :")
		if colon < 0 {
			return false
		}
		colon += from
		id, fns := rest[:colon], rest[colon+2:]
		cands := own[id]
		for j, want := range cands {
			if sameFunctions(fns, want) {
				own[id] = slices.Delete(cands, j, j+1)
				return true
			}
		}
		from = colon + 1
	}
}

// sameFunctions reports whether list, " FN" for each function in the
// upstream's order, holds exactly the functions want. Names may hold
// spaces: then each " FN" must occur in list and the lengths add up.
func sameFunctions(list string, want []string) bool {
	n := 0
	spaced := false
	for _, fn := range want {
		n += 1 + len(fn)
		spaced = spaced || strings.IndexByte(fn, ' ') >= 0
	}
	if n != len(list) {
		return false
	}
	if spaced {
		for _, fn := range want {
			if !strings.Contains(list, " "+fn) {
				return false
			}
		}
		return true
	}
	got := strings.Split(list, " ")[1:] // list starts with a space
	if len(got) != len(want) {
		return false
	}
	w := slices.Clone(want)
	slices.Sort(got)
	slices.Sort(w)
	return slices.Equal(got, w)
}
