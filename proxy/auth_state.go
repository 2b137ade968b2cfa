package proxy

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"github.com/jobgate/jobgate/proxy/auth"
)

// DefaultMaxBadTokens is how many unknown tokens a connection may send
// before it is closed (BeanstalkConfig.MaxBadTokens,
// GearmanConfig.MaxBadTokens): a few typos are forgiven, guessing is not.
const DefaultMaxBadTokens = 3

// authLogEvery is the least time between two denial log lines of one
// connection: a client retrying a denied request in a loop must not flood
// the log. The first denial is always logged.
const authLogEvery = time.Second

// connAuth is one connection's standing with the auth policy: who it is
// under which policy. It belongs to the goroutine that serves the
// connection's requests. A connection is identified when it first sends a
// request while a policy is set (by then any TLS handshake is over, so a
// verified client certificate is known), and again whenever the server's
// policy has been swapped since (SetAuthPolicy): an Identity belongs to the
// Policy that made it.
type connAuth struct {
	pol     *auth.Policy  // the policy id was made by; nil: not identified yet
	id      auth.Identity // who the client is under pol
	peer    auth.Peer     // the connection's evidence; Token is the last known token
	remote  netip.AddrPort
	known   bool // peer and remote are filled in
	bad     int  // unknown tokens sent so far
	logged  time.Time
	skipped int // denials not logged since logged
}

// sync identifies the client under pol if it is not the policy id was made
// by. It allocates only then.
func (a *connAuth) sync(pol *auth.Policy, nc net.Conn) {
	if a.pol == pol {
		return
	}
	if !a.known {
		a.known = true
		a.peer = auth.PeerOf(nc.RemoteAddr(), tlsState(nc))
		if ta, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
			a.remote = ta.AddrPort()
		}
	}
	a.pol = pol
	a.id = pol.Identify(a.peer)
}

// tlsState returns the TLS state of nc, or of the connection it wraps
// (NetConn, as connlimit.Conn and tls.Conn offer), or nil for plain TCP.
// Called once the client has sent a request, so the handshake is over.
func tlsState(nc net.Conn) *tls.ConnectionState {
	for range 8 { // wrappers are few; a cycle must not hang us
		if tc, ok := nc.(interface{ ConnectionState() tls.ConnectionState }); ok {
			st := tc.ConnectionState()
			return &st
		}
		w, ok := nc.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		nc = w.NetConn()
	}
	return nil
}

// presentToken handles a token the client sent (nil: malformed). A known
// token identifies the client again, with the token as extra evidence; an
// unknown one changes nothing and is logged. It reports whether the token
// was known, and close=true when the client has now sent more unknown
// tokens than max allows.
func (a *connAuth) presentToken(log *slog.Logger, tok []byte, max int) (known, close bool) {
	if a.pol.CheckToken(tok) {
		a.peer.Token = append(a.peer.Token[:0], tok...)
		a.id = a.pol.Identify(a.peer)
		return true, false
	}
	a.bad++
	auth.LogBadToken(context.Background(), log, a.id, a.remote, len(tok))
	return false, a.bad >= max
}

// denied logs a denial, at most one line per authLogEvery.
func (a *connAuth) denied(log *slog.Logger, act auth.Action, name []byte, d auth.Decision) {
	now := time.Now()
	if !a.logged.IsZero() && now.Sub(a.logged) < authLogEvery {
		a.skipped++
		return
	}
	if a.skipped > 0 {
		log.Warn("auth: denials not logged", "identity", a.id, "remote", a.remote.String(), "count", a.skipped)
		a.skipped = 0
	}
	a.logged = now
	auth.LogDenied(context.Background(), log, a.id, a.remote, act, name, d)
}

// decide decides act on name and logs a denial.
func (a *connAuth) decide(log *slog.Logger, act auth.Action, name []byte) bool {
	d := a.pol.Decide(a.id, act, name)
	if d.Allowed() {
		return true
	}
	a.denied(log, act, name, d)
	return false
}
