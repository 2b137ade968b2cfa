package proxy

import (
	"time"

	wire "github.com/jobgate/jobgate/codec/beanstalk"
	engine "github.com/jobgate/jobgate/jobserver/beanstalk"
	"github.com/jobgate/jobgate/proxy/auth"
)

// deniedReserveHold is how long a denied reserve waits before its
// NOT_FOUND (a reserve-with-timeout waits at most its timeout): worker
// loops retry a failed reserve at once, and must not spin.
const deniedReserveHold = time.Second

// SetAuthPolicy replaces the auth policy (nil turns auth off), for config
// reload. Each connection identifies its client again under the new policy
// before its next command; a reserve already waiting keeps the tubes it
// waits on.
func (s *BeanstalkServer) SetAuthPolicy(p *auth.Policy) { s.auth.Store(p) }

// AuthPolicy returns the current auth policy, nil when auth is off.
func (s *BeanstalkServer) AuthPolicy() *auth.Policy { return s.auth.Load() }

// beanstalkAuth is a Beanstalk connection's auth state, made when the
// connection first sends a command while a policy is set.
type beanstalkAuth struct {
	connAuth
}

// beanstalkAuthSession is what the auth decisions need of a connection's
// protocol state, so that the direct path (an engine Session) and the
// gateway (a bgwSession) share them.
type beanstalkAuthSession interface {
	// SetReserveFilter makes reserve take jobs only from the tubes allow
	// passes; allow runs on the connection's goroutine only.
	SetReserveFilter(allow func(tube []byte) bool)
	// Used is the used tube.
	Used() []byte
	// Watching is the length of the watch list.
	Watching() int
	// Reservable reports whether the filter passes any watched tube.
	Reservable() bool
	// JobTube is the tube of job id and whether the connection holds it
	// reserved; ok false: no such job.
	JobTube(id uint64) (tube []byte, mine, ok bool)
}

var (
	_ beanstalkAuthSession = (*engine.Session)(nil)
	_ beanstalkAuthSession = (*bgwSession)(nil)
)

// authorize runs the auth policy's part of one command, before the
// engine sees it. It returns true when it has answered the command itself
// in *r: a token (use jobgate-auth.<token>), or a denial (see proxy/auth
// for the replies). r.Kind 0 then means: close the connection. It returns
// false to let the engine run the command. pol is the server's current
// policy; nil (auth turned off by a reload) lets everything through.
func (c *beanstalkConn) authorize(pol *auth.Policy, sess beanstalkAuthSession, cmd *wire.Command, r *wire.Reply) bool {
	a := c.auth
	if a == nil {
		a = &beanstalkAuth{}
		c.auth = a
		// The filter reads a.pol and a.id, which belong to this goroutine:
		// the engine calls it only from Exec, the gateway from its read
		// loop.
		sess.SetReserveFilter(func(tube []byte) bool {
			return a.pol.Decide(a.id, auth.Consume, tube).Allowed()
		})
	}
	a.sync(pol, c.nc)
	if pol == nil {
		return reservedWithoutPolicy(sess, cmd, r)
	}
	log := c.srv.log
	*r = wire.Reply{}
	need := auth.BeanstalkNeed(cmd.Verb)
	switch cmd.Verb {
	case wire.Use:
		tok, reserved := auth.ParseBeanstalkToken(cmd.Tube)
		if !reserved {
			return false
		}
		// Consumed: the used tube stays as it was, and the reply is the
		// echo clients expect (see proxy/auth).
		if _, closeConn := a.presentToken(log, tok, c.srv.maxBadTokens); closeConn {
			return true // r.Kind 0: close
		}
		r.Kind, r.Tube = wire.Using, cmd.Tube
		return true
	case wire.Watch:
		if !auth.IsReservedTube(cmd.Tube) {
			// A soft denial (see proxy/auth): the tube joins the watch
			// list, as the client's library expects, but the reserve
			// filter never takes from it. Refusing the watch instead would
			// make the client's own "ignore default" that follows fail
			// (NOT_IGNORED), which go-beanstalk and beaneater report as
			// the error of the reserve or watch.
			a.decide(log, need.Action, cmd.Tube)
			return false
		}
		// A reserved tube never reaches the engine: WATCHING as if
		// watched, the watch list unchanged. Its name holds a token:
		// never logged.
		a.denied(log, need.Action, redactedToken, a.refusal())
		r.Kind, r.Count = wire.Watching, uint64(sess.Watching())
		return true
	case wire.Ignore:
		return false // touches only the session; a reserved tube is never watched
	case wire.Reserve, wire.ReserveWithTimeout:
		if sess.Reservable() {
			return false
		}
		a.denied(log, need.Action, nil, a.refusal())
		c.holdDenied(cmd)
		r.Kind = wire.NotFound
		return true
	}
	if auth.IsReservedTube(cmd.Tube) { // stats-tube, pause-tube
		a.denied(log, need.Action, redactedToken, a.refusal())
		r.Kind = wire.NotFound
		return true
	}
	var name []byte
	switch need.Name {
	case auth.NoName:
	case auth.ArgName:
		name = cmd.Tube
	case auth.UsedTube:
		name = sess.Used()
	case auth.JobTube:
		tube, mine, ok := sess.JobTube(cmd.ID)
		if !ok || mine {
			return false // the engine answers NOT_FOUND, or it is the client's own job
		}
		name = tube
	}
	if a.decide(log, need.Action, name) {
		return false
	}
	r.Kind = wire.NotFound
	return true
}

// holdDenied delays a denied reserve's reply (see deniedReserveHold),
// after writing the replies before it. Shutdown cuts it short.
func (c *beanstalkConn) holdDenied(cmd *wire.Command) {
	d := deniedReserveHold
	if cmd.Verb == wire.ReserveWithTimeout {
		d = min(d, time.Duration(cmd.Timeout)*time.Second)
	}
	if d <= 0 || c.deferHold(d) {
		return
	}
	if c.in.wr.Flush() != nil {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-c.srv.quit:
	}
}

// refusal is the Decision to log for a request refused without asking the
// policy (a reserved tube name, a reserve with nothing to reserve from).
func (a *beanstalkAuth) refusal() auth.Decision {
	if !a.id.Authenticated() {
		return auth.DenyAnonymous
	}
	return auth.Deny
}

// redactedToken is logged in place of a reserved tube name, which holds a
// token.
var redactedToken = []byte(auth.TokenPrefix + "...")

// reservedWithoutPolicy keeps the reserved jobgate-auth.* names out of the
// engine and the upstream servers while no policy is set, as while one is:
// a token is accepted and ignored (USING, the used tube unchanged), a
// reserved tube is never watched, and stats-tube or pause-tube of one
// finds nothing. It reports whether it answered cmd in *r.
func reservedWithoutPolicy(sess beanstalkAuthSession, cmd *wire.Command, r *wire.Reply) bool {
	if !auth.IsReservedTube(cmd.Tube) {
		return false
	}
	switch cmd.Verb {
	case wire.Use:
		*r = wire.Reply{Kind: wire.Using, Tube: cmd.Tube}
	case wire.Watch:
		*r = wire.Reply{Kind: wire.Watching, Count: uint64(sess.Watching())}
	case wire.StatsTube, wire.PauseTube:
		*r = wire.Reply{Kind: wire.NotFound}
	default:
		return false
	}
	return true
}
