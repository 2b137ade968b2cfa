package proxy

import (
	"errors"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/jobserver/gearman"
	"github.com/jobgate/jobgate/proxy/auth"
)

// SetAuthPolicy replaces the auth policy (nil turns auth off), for config
// reload. Each connection identifies its client again under the new policy
// before its next request. Functions a worker registered stay registered.
func (s *GearmanServer) SetAuthPolicy(p *auth.Policy) { s.auth.Store(p) }

// AuthPolicy returns the current auth policy, nil when auth is off.
func (s *GearmanServer) AuthPolicy() *auth.Policy { return s.auth.Load() }

// errTooManyBadTokens closes a connection that keeps sending unknown
// tokens.
var errTooManyBadTokens = errors.New("gearman: too many unknown auth tokens")

// The denial replies as bytes, so that a denial does not convert them.
var (
	gearmanDeniedCode   = []byte(auth.GearmanDeniedCode)
	gearmanDeniedText   = []byte(auth.GearmanDeniedText)
	gearmanBadTokenText = []byte(auth.GearmanBadTokenText)
	gearmanAdminDenied  = []byte(auth.GearmanAdminDenied)
)

// authOn reports whether requests must pass authorizePacket/handleText's
// check: a policy is set, or was when the connection was last identified.
// Two loads, no allocation: this is on the event loop's path.
func (c *gearmanConn) authOn() bool {
	return c.auth != nil || c.srv.auth.Load() != nil
}

// authState returns the connection's auth state, identified under the
// server's current policy, which it also returns.
func (c *gearmanConn) authState() (*connAuth, *auth.Policy) {
	pol := c.srv.auth.Load()
	if c.auth == nil {
		c.auth = &connAuth{}
	}
	c.auth.sync(pol, c.nc)
	return c.auth, pol
}

// authorizePacket runs the auth policy's part of one request, before the
// session sees it, for the local engine and the gateway alike. It returns
// done=true when it has answered the request itself: a token (OPTION_REQ
// "auth=<token>", SET_CLIENT_ID "jobgate-auth.<token>"), which is never
// forwarded, or a denial (see proxy/auth for the replies). A non-nil error
// closes the connection.
func (c *gearmanConn) authorizePacket(p *codec.Packet) (done bool, err error) {
	a, pol := c.authState()
	if p.Magic != codec.Req || len(p.Args) == 0 {
		return false, nil // the session answers malformed requests
	}
	if pol == nil {
		return c.tokenWithoutPolicy(p), nil
	}
	log := c.srv.log
	switch p.Type {
	case codec.OptionReq:
		tok, isAuth := auth.ParseGearmanOption(p.Args[0])
		if !isAuth {
			return false, nil
		}
		known, closeConn := a.presentToken(log, tok, c.srv.maxBadTokens)
		switch {
		case closeConn:
			return true, errTooManyBadTokens
		case known:
			c.authReply(gearman.OutcomeOK, codec.OptionRes, p.Args[0])
		default:
			c.authReply(gearman.OutcomeClientError, codec.Error, gearmanDeniedCode, gearmanBadTokenText)
		}
		return true, nil
	case codec.SetClientID:
		tok, isAuth := auth.ParseGearmanClientID(p.Args[0])
		if !isAuth {
			return false, nil
		}
		// SET_CLIENT_ID has no reply: an unknown token is only logged.
		if _, closeConn := a.presentToken(log, tok, c.srv.maxBadTokens); closeConn {
			return true, errTooManyBadTokens
		}
		c.authReply(gearman.OutcomeOK, 0)
		return true, nil
	}
	need := auth.GearmanNeed(p.Type)
	if need.Action == auth.None {
		return false, nil
	}
	ok := a.decide(log, need.Action, p.Args[0])
	if ok && (p.Type == codec.SubmitReduceJob || p.Type == codec.SubmitReduceJobBackground) && len(p.Args) > 2 {
		ok = a.decide(log, need.Action, p.Args[2]) // the reducer runs jobs too
	}
	if ok {
		return false, nil
	}
	if need.Action == auth.Consume {
		// CAN_DO has no reply, and an unsolicited ERROR would be taken as
		// the answer to the worker's next request: register nothing, say
		// nothing.
		c.authReply(gearman.OutcomeClientError, 0)
		return true, nil
	}
	c.authReply(gearman.OutcomeClientError, codec.Error, gearmanDeniedCode, gearmanDeniedText)
	return true, nil
}

// tokenWithoutPolicy keeps tokens out of the engine and the upstream
// servers while no policy is set, as while one is: OPTION_REQ "auth=..."
// is accepted and ignored (OPTION_RES), SET_CLIENT_ID "jobgate-auth...."
// is dropped (it has no reply). It reports whether it answered p.
func (c *gearmanConn) tokenWithoutPolicy(p *codec.Packet) bool {
	switch p.Type {
	case codec.OptionReq:
		if _, isAuth := auth.ParseGearmanOption(p.Args[0]); isAuth {
			c.authReply(gearman.OutcomeOK, codec.OptionRes, p.Args[0])
			return true
		}
	case codec.SetClientID:
		if _, isAuth := auth.ParseGearmanClientID(p.Args[0]); isAuth {
			c.authReply(gearman.OutcomeOK, 0)
			return true
		}
	}
	return false
}

// handleText hands an admin line to the session, unless the client may not
// use admin commands: then it answers gearmand's admin error form.
func (c *gearmanConn) handleText(line []byte) error {
	if c.authOn() {
		a, pol := c.authState()
		if pol != nil && !a.decide(c.srv.log, auth.GearmanAdminNeed.Action, nil) {
			if c.engine != nil {
				c.engine.ReplyText(gearmanAdminDenied)
			} else if gs, ok := c.sess.(*gwSession); ok {
				gs.answerRaw(gearmanAdminDenied)
			}
			return nil
		}
	}
	return c.handleTextTraced(line)
}

// authReply answers a request auth handled, in request order: through the
// engine session (behind replies held for the journal) or the gateway's
// reply queue (behind replies upstream servers still owe). t 0 sends
// nothing.
func (c *gearmanConn) authReply(o gearman.Outcome, t codec.Type, args ...[]byte) {
	if c.engine != nil {
		c.engine.Reply(o, t, args...)
		return
	}
	if gs, ok := c.sess.(*gwSession); ok && t != 0 {
		gs.answer(t, args...)
	}
}

// answerRaw queues bytes the gateway answers itself, in request order.
func (s *gwSession) answerRaw(b []byte) {
	s.mu.Lock()
	s.fifo.push(&gwReply{out: b, done: true})
	s.flushFIFOLocked()
	s.mu.Unlock()
}
