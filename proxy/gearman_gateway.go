package proxy

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/metrics"
	"github.com/jobgate/jobgate/routing"
	"github.com/jobgate/jobgate/routing/upstream"
)

// GearmanGateway is the routing of a GearmanServer that is a gateway
// (GearmanConfig.Gateway): which backend serves each function, and how
// job handles name their backend. Build it with NewGearmanGatewayFromConfig
// or by hand from routing values; it is immutable once given to the server.
//
// What the gateway does per client connection (gearman_gateway_session.go):
//   - SUBMIT_* go to the function's pool: the first available backend in
//     Pool.Order (the shard owner, else the next in hash order). JOB_CREATED
//     carries a handle that names the backend (routing.HandleMap).
//   - GET_STATUS and WORK_* go to the backend their handle names, with the
//     backend's own handle; an undecodable handle is answered as gearmand
//     answers an unknown job. GET_STATUS_UNIQUE (a unique id names no
//     function) is asked of every routed backend; the first that knows the
//     job answers.
//   - CAN_DO, CAN_DO_TIMEOUT and CANT_DO go to every backend of the
//     function's pool (consumers drain every shard); RESET_ABILITIES and
//     SET_CLIENT_ID to every backend the connection has opened.
//   - GRAB_JOB* tries the worker's backends in turn, starting one further
//     each time, and answers NO_JOB only when all did; PRE_SLEEP goes to
//     all of them; the first NOOP after a PRE_SLEEP wakes the worker. So
//     a worker gets the highest-priority job of each backend, not of all
//     its functions across backends: a job taken to compare could not be
//     handed back to gearmand without counting a retry.
//   - ECHO_REQ, OPTION_REQ and malformed requests are answered by the
//     gateway; the exceptions option is also set on every backend session.
//   - Admin "status", "prioritystatus" and "workers" merge the routed
//     backends' answers (counts summed per function, a gateway worker
//     registered on several backends counted and listed once:
//     gearman_gateway_admin*.go); every other admin command is the local
//     engine's.
//   - Replies keep request order per connection (DESIGN decision 4).
//   - A backend session that fails answers each request waiting on it with
//     ERROR QUEUE_ERROR "jobgate: backend <name> failed: ..." (a pending
//     GRAB_JOB moves on to the worker's next backend); the connection and
//     its other backends go on, and the next request reopens the session
//     through the backend's breaker.
//
// Limits of this version, by design or not done yet:
//   - Admin commands other than the three merged ones ("show jobs",
//     "cancel job", "maxqueue", "create/drop function", "getpid",
//     "version", "verbose", "shutdown") are answered by the local engine
//     only.
//   - A foreground job whose upstream session fails is lost (gearmand
//     keeps no foreground job across a restart); its client gets WORK_FAIL.
//   - An ERROR JOB_NOT_FOUND from a backend is taken as the answer to a
//     WORK_* (which expects no reply), never as a queued request's reply.
//   - Health checks (NewGearmanGatewayFromConfig) mark a backend down
//     (Backend.Available: skipped by submits and GRAB_JOB); they do not
//     close the sessions already open to it.
//   - A configuration that declares a gearman backend makes the server a
//     gateway even if no route reaches that backend.
//   - Each client connection that touches an upstream holds one TCP
//     connection to it (DESIGN decision 2), except that background submits
//     of loop connections without one go on shared lines
//     (gearman_gateway_bgline.go). On Linux, plain-TCP upstream
//     sessions of event-loop connections are served by the same loop
//     (gearman_gateway_loop.go); they are dialled off the loop, while the
//     connection waits. With a TLS upstream the gateway serves every
//     connection with goroutines, and a reload cannot add one to a
//     gateway on the loop.
type GearmanGateway struct {
	// Rules map function names to pools. Required.
	Rules *routing.Rules
	// Handles encodes and decodes client-visible job handles; it must know
	// every backend of Rules and the local backend (id 0). When the local
	// backend is its only one (Passthrough), the server is not a gateway.
	Handles *routing.HandleMap
	// AdminTimeout bounds the upstream part of an aggregated admin command;
	// a backend that does not answer in time is left out. Default 5s.
	AdminTimeout time.Duration
	// DialTimeout bounds opening one upstream session for a request.
	// Default 5s (the backends' own dial timeouts are usually shorter).
	DialTimeout time.Duration

	// health are the checkers NewGearmanGatewayFromConfig built, started
	// and stopped with the server. Health checkers of backends built by
	// hand are the caller's to start and stop.
	health []*routing.Health
	// built are the backends NewGearmanGatewayFromConfig made, by name,
	// with their configuration: a reload keeps those whose configuration
	// did not change (gearman_gateway_reload.go).
	built map[string]builtBackend
}

// gearmanGateway is a GearmanGateway serving one GearmanServer.
type gearmanGateway struct {
	srv   *GearmanServer
	cur   atomic.Pointer[gwRouting] // swapped whole by a reload (gearman_gateway_reload.go)
	trace *gwTrace                  // nil: tracing off (gearman_gateway_trace.go); kept across reloads
	// dials is the parent of every session dial; Shutdown cancels it
	// (stopDials), so that no dial outlives the server.
	dials     context.Context
	stopDials context.CancelFunc
	own       gwOwnSessions // sessions the merged admin listings know (gearman_gateway_admin_dedup.go)
	lines     gwLines       // shared sessions for background submits (gearman_gateway_bgline.go)
	sessions  atomic.Uint64 // sessions started: spreads them over the lines
}

// gwRouting is the routing of one configuration; immutable.
type gwRouting struct {
	cfg    GearmanGateway
	routed []*routing.Backend // every backend some rule or the default reaches, local first
	local  bool               // the local backend is routed to
}

// rt returns the routing in force; a request reads it once.
func (gw *gearmanGateway) rt() *gwRouting { return gw.cur.Load() }

func newGearmanGateway(s *GearmanServer, g *GearmanGateway) (*gearmanGateway, error) {
	rt, err := newGwRouting(g)
	if err != nil {
		return nil, err
	}
	gw := &gearmanGateway{srv: s, trace: newGwTrace(s.cfg.Tracer, s.cfg.TraceTableSize, s.guard.clk)}
	gw.dials, gw.stopDials = context.WithCancel(context.Background())
	gw.cur.Store(rt)
	for _, h := range rt.cfg.health {
		h.Start()
	}
	return gw, nil
}

// newGwRouting checks g and finds the backends it routes to.
func newGwRouting(g *GearmanGateway) (*gwRouting, error) {
	if g.Rules == nil || g.Handles == nil {
		return nil, errors.New("gearman gateway: Rules and Handles are required")
	}
	cfg := *g
	if cfg.AdminTimeout <= 0 {
		cfg.AdminTimeout = 5 * time.Second
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	gw := &gwRouting{cfg: cfg}
	if gw.localBackend() == nil {
		return nil, errors.New("gearman gateway: the handle map lacks the local backend (id 0)")
	}
	seen := map[*routing.Backend]bool{}
	add := func(p *routing.Pool) {
		if p == nil {
			return
		}
		for _, b := range p.Backends() {
			if seen[b] {
				continue
			}
			seen[b] = true
			if b.ID == routing.LocalID {
				gw.local = true
				continue
			}
			if b.Gearman == nil {
				continue
			}
			gw.routed = append(gw.routed, b)
		}
	}
	for _, r := range cfg.Rules.Rules() {
		add(r.Pool)
	}
	add(cfg.Rules.Default())
	for _, b := range gw.routed {
		if b2, _ := cfg.Handles.Decode(appendHandle(nil, cfg.Handles, b)); b2 != b {
			return nil, fmt.Errorf("gearman gateway: backend %q (id %d) is not in the handle map", b.Name, b.ID)
		}
	}
	return gw, nil
}

// appendHandle is a probe handle on b, to check that the map knows b.
func appendHandle(dst []byte, m *routing.HandleMap, b *routing.Backend) []byte {
	out, _ := m.Append(dst, b, []byte("H:x:1"))
	return out
}

func (gw *gearmanGateway) stop() {
	for _, h := range gw.rt().cfg.health {
		h.Stop()
	}
}

// NewGearmanGatewayFromConfig builds the Gearman routing of c: the local
// backend (id 0, the server's engine), an upstream.Gearman for every
// backend of type gearman (with its TLS, timeouts, breaker and health
// check), the pools whose members serve Gearman, and routes.gearman with
// routes.gearman_default. c must have passed Validate. The result goes in
// GearmanConfig.Gateway; when c names no gearman backend the server stays
// a plain local server. Each upstream backend's breaker state and health go
// to m (jobgate_breaker_state, jobgate_breaker_transitions_total,
// jobgate_backend_up); nil m reports nothing. Commands through the gateway
// are counted by the server (GearmanConfig.Metrics), not here. Typical
// wiring:
//
//	c, err := config.Load(file) // or config.Upstreams(gearmanAddrs, nil)
//	...
//	gw, err := proxy.NewGearmanGatewayFromConfig(c, m)
//	...
//	srv, err := proxy.NewGearmanServer(proxy.GearmanConfig{Engine: ..., Gateway: gw, Metrics: m})
func NewGearmanGatewayFromConfig(c *config.Config, m *metrics.Metrics) (*GearmanGateway, error) {
	return buildGearmanGateway(c, m, nil)
}

// buildGearmanGateway is NewGearmanGatewayFromConfig reusing the backends
// of prev whose configuration is unchanged.
func buildGearmanGateway(c *config.Config, m *metrics.Metrics, prev map[string]builtBackend) (*GearmanGateway, error) {
	limits := codec.Limits{MaxPacketSize: int(c.Gearman.MaxPacketSize)}
	byName := map[string]*routing.Backend{}
	built := map[string]builtBackend{}
	var all []*routing.Backend
	var health []*routing.Health
	for _, cb := range c.AllBackends() {
		if b := reuseBackend(prev, cb); b != nil {
			byName[cb.Name], built[cb.Name] = b, builtBackend{cb, b}
			all = append(all, b)
			if b.Health != nil {
				health = append(health, b.Health)
			}
			continue
		}
		switch {
		case cb.Name == config.LocalName:
			b := &routing.Backend{ID: routing.LocalID, Name: config.LocalName}
			byName[cb.Name], built[cb.Name] = b, builtBackend{cb, b}
			all = append(all, b)
		case cb.Type == config.TypeGearman:
			uc, err := upstreamConfig(cb)
			if err != nil {
				return nil, err
			}
			ug, err := upstream.NewGearman(upstream.GearmanConfig{Config: uc, Limits: limits})
			if err != nil {
				return nil, fmt.Errorf("gearman backend %q: %w", cb.Name, err)
			}
			b := &routing.Backend{ID: cb.ID, Name: cb.Name, Gearman: ug}
			h, err := guardBackend(b, cb, ug.Probe, m)
			if err != nil {
				return nil, err
			}
			if h != nil {
				health = append(health, h)
			}
			byName[cb.Name], built[cb.Name] = b, builtBackend{cb, b}
			all = append(all, b)
		}
	}
	rt, _, err := routeRules(c, "gearman", c.Routes.Gearman, c.Routes.GearmanDefault, byName)
	if err != nil {
		return nil, err
	}
	hm, err := routing.NewHandleMap(all)
	if err != nil {
		return nil, err
	}
	return &GearmanGateway{Rules: rt, Handles: hm, health: health, built: built}, nil
}

// openTimeout is the context for dialling one backend session.
func (gw *gearmanGateway) openTimeout() (context.Context, context.CancelFunc) {
	return context.WithTimeout(gw.dials, gw.rt().cfg.DialTimeout)
}
