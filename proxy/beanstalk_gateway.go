package proxy

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	wire "github.com/jobgate/jobgate/codec/beanstalk"
	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/metrics"
	"github.com/jobgate/jobgate/routing"
	"github.com/jobgate/jobgate/routing/upstream"
)

// BeanstalkGateway is the routing of a BeanstalkServer that is a gateway
// (BeanstalkConfig.Gateway): which backend serves each tube, and how job
// ids name their backend. Build it with NewBeanstalkGatewayFromConfig or by
// hand from routing values; it is immutable once given to the server.
//
// What the gateway does per client connection (beanstalk_gateway_*.go):
//   - use, watch, ignore, list-tube-used and list-tubes-watched are kept
//     and answered by the gateway. The used tube is passed on at once to
//     the backend the next put goes to, a watched tube to every backend of
//     its pool (each backend session watches exactly the client's tubes it
//     serves), and the reply waits for those backends, so the tubes exist
//     where beanstalkd would have them by the time the client hears.
//   - put goes to the used tube's pool: the first available backend in
//     Pool.Order (the shard owner, else the next in hash order); a backend
//     that cannot be opened is skipped for the next. INSERTED carries an id
//     that names the backend (routing.IDMap).
//   - reserve and reserve-with-timeout are served from every backend of
//     every watched tube's pool (consumers drain every shard): first a job
//     ready now, asking the backends in turn (starting one further each
//     time); else a wait raced over all of them, where the first job wins,
//     the other waits are cancelled, and a job a loser got goes back to
//     ready with its priority at once.
//   - reserve-job, delete, release, bury, touch, peek, kick-job and
//     stats-job go to the backend the id names, with the backend's own id;
//     an id no backend can hold is NOT_FOUND, as from beanstalkd.
//   - peek-ready, peek-delayed and peek-buried ask every backend of the
//     used tube's pool and answer the first found in hash order; kick kicks
//     on them in that order until the bound is used up.
//   - stats and list-tubes merge every routed backend's answer (counters
//     summed, tubes listed once; the connection and command counts the
//     gateway's own: beanstalk_gateway_clients.go); stats-tube merges the
//     tube's pool
//     (addTubeStats);
//     pause-tube pauses the tube on every backend of its pool. With one
//     backend the answer is passed on byte for byte.
//   - Replies keep request order per connection (DESIGN decision 4); the
//     commands of a pipelined batch are all sent before the first reply is
//     awaited.
//   - A backend session that fails answers each command waiting on it with
//     INTERNAL_ERROR; the connection and its other backends go on, and the
//     next command reopens the session through the backend's breaker (its
//     reservations on that backend are then gone, as on any disconnect).
//   - Closing the client connection closes every backend session, so every
//     backend returns the connection's reservations to ready.
//   - The server's auth policy, connection limits, drain and tracing apply
//     as on the direct path (beanstalk_gateway_auth.go, _limits.go,
//     _trace.go); a config reload swaps the routing (_reload.go).
//
// Limits of this version:
//   - A tube no rule routes (no default) gets INTERNAL_ERROR for put.
//   - A losing reserve wait on an upstream where the client holds a job
//     cannot be closed (that would return the job), so it is cancelled:
//     the session stays busy until its reserve round ends (at most
//     upstream.DefaultReserveRound), and a job the round brings goes back
//     to ready after it, with one more reserve and release counted. Where
//     the client holds none, the session is closed instead
//     (abandonWait).
//   - A put the codec refuses (EXPECTED_CRLF, JOB_TOO_BIG) is answered by
//     the gateway and uses up no id on the backend, unlike beanstalkd.
//   - Per-tube job metrics count the local engine's jobs only; commands
//     through the gateway are counted by the server as usual.
//   - The gateway counts a connection's reservations from the replies it
//     passes on; a job whose TTR runs out upstream counts until a command
//     on it answers NOT_FOUND (MaxReservedPerConn, the idle timeout, Idle).
//   - A reserved job whose upstream id does not fit the client-visible id
//     (routing.ErrIDOverflow) is released and the reserve answers
//     INTERNAL_ERROR.
//   - stats sums the servers' counters; process fields (pid, version,
//     rusage, uptime, binlog, id, hostname) are the first routed backend's.
//   - Upstream sessions are dialled on the connection's goroutine (on the
//     event loop's path, on a goroutine the command is handed to:
//     beanstalk_gateway_loop.go).
//   - Shutdown closes client connections but does not interrupt a command
//     waiting for an upstream's reply: that ends within the backend's I/O
//     timeout (upstream.Config.IOTimeout).
type BeanstalkGateway struct {
	// Rules map tube names to pools. Required.
	Rules *routing.Rules
	// IDs encodes and decodes client-visible job ids; it must know every
	// backend of Rules. When its only backend is id 0 (Passthrough), ids
	// are not rewritten.
	IDs *routing.IDMap
	// DialTimeout bounds opening one upstream session for a command.
	// Default 5s (the backends' own dial timeouts are usually shorter).
	DialTimeout time.Duration

	// health are the checkers NewBeanstalkGatewayFromConfig built, started
	// and stopped with the server (or by a reload).
	health []*routing.Health
	// built are the backends NewBeanstalkGatewayFromConfig made, by name,
	// for a reload to keep the unchanged ones.
	built map[string]builtBackend
}

// beanstalkGateway is a BeanstalkGateway serving one BeanstalkServer.
type beanstalkGateway struct {
	srv         *BeanstalkServer
	cur         atomic.Pointer[bgwRouting] // swapped whole by a reload (beanstalk_gateway_reload.go)
	dialTimeout time.Duration              // kept across reloads

	drain    atomic.Bool  // Drain was called: puts answer DRAINING
	reserved atomic.Int64 // jobs the clients hold reserved through the gateway
	trace    *bgwTrace    // nil: tracing off (beanstalk_gateway_trace.go); kept across reloads
	clients  bgwClients   // client connections, for stats (beanstalk_gateway_clients.go)

	loop   *bgwLoop // guarded by srv.mu; nil until the first loop connection (beanstalk_gateway_loop_linux.go)
	noLoop bool     // guarded by srv.mu; the loop failed to start
}

// bgwRouting is the routing of one configuration; immutable.
type bgwRouting struct {
	cfg    BeanstalkGateway
	routed []*routing.Backend // every backend some rule or the default reaches, local first
}

// rt returns the routing in force; a session reads it once per command.
func (gw *beanstalkGateway) rt() *bgwRouting { return gw.cur.Load() }

func newBeanstalkGateway(s *BeanstalkServer, g *BeanstalkGateway, traceTableSize int) (*beanstalkGateway, error) {
	rt, err := newBgwRouting(g)
	if err != nil {
		return nil, err
	}
	gw := &beanstalkGateway{srv: s, dialTimeout: g.DialTimeout}
	if gw.dialTimeout <= 0 {
		gw.dialTimeout = 5 * time.Second
	}
	gw.cur.Store(rt)
	if s.trace != nil {
		gw.trace = newBgwTrace(s.trace.tr, traceTableSize, s.guard.clk)
	}
	for _, h := range rt.cfg.health {
		h.Start()
	}
	return gw, nil
}

// newBgwRouting checks g and lists the backends its rules reach.
func newBgwRouting(g *BeanstalkGateway) (*bgwRouting, error) {
	if g.Rules == nil || g.IDs == nil {
		return nil, errors.New("beanstalk gateway: Rules and IDs are required")
	}
	rt := &bgwRouting{cfg: *g}
	seen := map[*routing.Backend]bool{}
	var local *routing.Backend
	add := func(p *routing.Pool) {
		if p == nil {
			return
		}
		for _, b := range p.Backends() {
			if seen[b] {
				continue
			}
			seen[b] = true
			if b.ID == routing.LocalID && b.Beanstalk == nil {
				local = b
				continue
			}
			if b.Beanstalk == nil {
				continue
			}
			rt.routed = append(rt.routed, b)
		}
	}
	for _, r := range g.Rules.Rules() {
		add(r.Pool)
	}
	add(g.Rules.Default())
	if local != nil {
		rt.routed = append([]*routing.Backend{local}, rt.routed...)
	}
	for _, b := range rt.routed {
		if _, err := g.IDs.Encode(b, 1); err != nil {
			return nil, fmt.Errorf("beanstalk gateway: backend %q (id %d) is not in the id map", b.Name, b.ID)
		}
	}
	return rt, nil
}

func (gw *beanstalkGateway) stop() {
	for _, h := range gw.rt().cfg.health {
		h.Stop()
	}
}

// serves reports whether b can hold Beanstalk jobs for this gateway: the
// local engine (id 0 without an opener) or an upstream.
func serves(b *routing.Backend) bool {
	return b != nil && (b.Beanstalk != nil || b.ID == routing.LocalID)
}

// openTimeout is the context for dialling one backend session.
func (gw *beanstalkGateway) openTimeout() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), gw.dialTimeout)
}

// NewBeanstalkGatewayFromConfig builds the Beanstalk routing of c: the local
// backend (id 0, the server's engine), an upstream.Beanstalk for every
// backend of type beanstalk (with its TLS, timeouts, breaker and health
// check), the pools whose members serve Beanstalk, and routes.beanstalk
// with routes.beanstalk_default. c must have passed Validate. It returns
// nil, nil when c names no beanstalk backend: the server stays a plain
// local server, on the direct path. Breaker state and health go to m (nil:
// not reported). The id map knows only the routed backends, so a
// configuration whose routes all lead to the local engine keeps its ids.
func NewBeanstalkGatewayFromConfig(c *config.Config, m *metrics.Metrics) (*BeanstalkGateway, error) {
	return buildBeanstalkGateway(c, m, nil)
}

// buildBeanstalkGateway is NewBeanstalkGatewayFromConfig keeping the
// backends of prev whose configuration is unchanged (reuseBackend).
func buildBeanstalkGateway(c *config.Config, m *metrics.Metrics, prev map[string]builtBackend) (*BeanstalkGateway, error) {
	limits := wire.Limits{MaxJobSize: c.Beanstalk.MaxJobSize.Int()}
	byName := map[string]*routing.Backend{}
	built := map[string]builtBackend{}
	var health []*routing.Health
	upstreams := 0
	for _, cb := range c.AllBackends() {
		switch {
		case cb.Name == config.LocalName:
			byName[cb.Name] = &routing.Backend{ID: routing.LocalID, Name: config.LocalName}
		case cb.Type == config.TypeBeanstalk:
			upstreams++
			if b := reuseBackend(prev, cb); b != nil {
				byName[cb.Name], built[cb.Name] = b, builtBackend{cb, b}
				if b.Health != nil {
					health = append(health, b.Health)
				}
				continue
			}
			uc, err := upstreamConfig(cb)
			if err != nil {
				return nil, err
			}
			ub, err := upstream.NewBeanstalk(upstream.BeanstalkConfig{Config: uc, Limits: limits})
			if err != nil {
				return nil, fmt.Errorf("beanstalk backend %q: %w", cb.Name, err)
			}
			b := &routing.Backend{ID: cb.ID, Name: cb.Name, Beanstalk: ub}
			h, err := guardBackend(b, cb, ub.Probe, m)
			if err != nil {
				return nil, err
			}
			if h != nil {
				health = append(health, h)
			}
			byName[cb.Name], built[cb.Name] = b, builtBackend{cb, b}
		}
	}
	if upstreams == 0 {
		return nil, nil
	}
	rt, pools, err := routeRules(c, "beanstalk", c.Routes.Beanstalk, c.Routes.BeanstalkDefault, byName)
	if err != nil {
		return nil, err
	}
	// The id map holds the routed backends only: an upstream no route
	// reaches never hands out an id, and leaving it out keeps the local
	// engine's ids unchanged when it is the only routed backend.
	var routed []*routing.Backend
	seen := map[*routing.Backend]bool{}
	for _, p := range pools {
		for _, b := range p.Backends() {
			if !seen[b] {
				seen[b] = true
				routed = append(routed, b)
			}
		}
	}
	// A reload keeps the ids of the backends it keeps decodable, routed or
	// not, so that clients can finish the jobs they hold there.
	for name, bb := range built {
		if old, ok := prev[name]; ok && old.b == bb.b && !seen[bb.b] {
			seen[bb.b] = true
			routed = append(routed, bb.b)
		}
	}
	if len(routed) == 0 {
		routed = append(routed, byName[config.LocalName])
	}
	ids, err := routing.NewIDMap(routed)
	if err != nil {
		return nil, err
	}
	return &BeanstalkGateway{Rules: rt, IDs: ids, health: health, built: built}, nil
}
