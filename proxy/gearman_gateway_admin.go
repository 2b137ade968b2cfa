package proxy

import (
	"context"
	"strings"
	"sync"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/jobserver/gearman"
)

// gearmanAdmin is what upstream.Gearman offers for admin commands.
type gearmanAdmin interface {
	Admin(ctx context.Context, line string) ([]string, error)
}

// HandleText runs one admin line (gearmanHandler). "status",
// "prioritystatus" and "workers" merge the answers of every routed backend,
// the upstream ones fetched on their own goroutine so that the read loop
// never waits for them; the reply still keeps its place in request order.
// Every other command is the local engine's.
func (s *gwSession) HandleText(line []byte) error {
	var fields [codec.MaxAdminFields + 1][]byte
	args := codec.AppendAdminFields(fields[:0], line)
	if len(args) > codec.MaxAdminFields {
		return gearman.ErrTooManyFields
	}
	cmd := strings.ToLower(string(args[0]))
	merged := cmd == "status" || cmd == "prioritystatus" || cmd == "workers"
	r := &gwReply{}
	s.push(r)
	var local []byte
	rt := s.gw.rt()
	// "workers" always has the local part: it lists the gateway's own
	// client connections (mergeWorkers).
	if !merged || rt.local || cmd == "workers" {
		s.local.sendMu.Lock()
		out, err := s.local.local.Text(line)
		s.local.sendMu.Unlock()
		if err != nil {
			return err
		}
		local = out
	}
	if !merged || len(rt.routed) == 0 {
		s.mu.Lock()
		r.out, r.done = local, true
		s.flushFIFOLocked()
		s.mu.Unlock()
		return nil
	}
	go s.mergeAdmin(rt, r, cmd, string(line), local)
	return nil
}

// mergeAdmin asks every routed upstream for line and completes r with the
// merged listing. An upstream that fails or is unavailable is left out.
func (s *gwSession) mergeAdmin(rt *gwRouting, r *gwReply, cmd, line string, local []byte) {
	parts := make([][]string, len(rt.routed)+1)
	parts[0] = listingLines(string(local))
	ctx, cancel := context.WithTimeout(context.Background(), rt.cfg.AdminTimeout)
	defer cancel()
	answered := make([]bool, len(rt.routed))
	var wg sync.WaitGroup
	for i, b := range rt.routed {
		a, ok := b.Gearman.(gearmanAdmin)
		if !ok || !b.Available() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			lines, err := a.Admin(ctx, line)
			if err != nil {
				b.Breaker.Record(err)
				s.gw.srv.log.Debug("gearman gateway: admin", "backend", b.Name, "err", err)
				return
			}
			if len(lines) == 1 && strings.HasPrefix(lines[0], "ERR ") && !strings.Contains(lines[0], "\t") {
				return
			}
			parts[i+1], answered[i] = lines, true
		}()
	}
	wg.Wait()
	var out []byte
	if cmd == "workers" {
		out = s.mergeWorkers(out, rt, parts, answered)
	} else {
		out = sumListing(out, parts, listingColumns(cmd), s.gw.own.extraRegistrations(rt.answeredSet(answered)))
	}
	out = append(out, ".\n"...)
	s.mu.Lock()
	r.out, r.done = out, true
	s.flushFIFOLocked()
	s.mu.Unlock()
	s.gw.srv.flushDirty()
}

// listingLines splits a listing into its lines, without the final ".";
// an error answer (one "ERR ..." line) has none. A function whose name
// starts "ERR " keeps its line.
func listingLines(text string) []string {
	if strings.HasPrefix(text, "ERR ") && strings.Count(text, "\n") <= 1 {
		return nil
	}
	var out []string
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSuffix(l, "\r")
		if l == "" || l == "." {
			continue
		}
		out = append(out, l)
	}
	return out
}
