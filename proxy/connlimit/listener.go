// Package connlimit holds the protective limits on client connections that
// do not depend on a protocol: a listener capping connections in total and
// per source address, alone or shared with other listeners (Group). The
// timeouts and the slow-reader cut-off are proxy's (limits.go), since what
// counts as pending depends on the protocol.
//
// The protocol layer (proxy) decides what to say, if anything, when a limit
// strikes; this package decides when and counts nothing itself, reporting
// through hooks the wiring connects to metrics.
package connlimit

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Reason says which limit struck. Its String values are the reason labels
// of jobgate_connections_rejected_total and jobgate_connections_cut_total
// (the metrics package's Reason* constants).
type Reason uint8

// The reasons.
const (
	// ReasonMaxConnections: the listener's total was at its cap.
	ReasonMaxConnections Reason = iota + 1
	// ReasonMaxPerIP: the source address had its share already.
	ReasonMaxPerIP
	// ReasonIdle: nothing pending for the idle timeout.
	ReasonIdle
	// ReasonReadTimeout: a started request took too long to arrive.
	ReasonReadTimeout
	// ReasonWriteTimeout: a write made no progress for the write timeout.
	ReasonWriteTimeout
	// ReasonSlowReader: unsent output exceeded the write buffer limit.
	ReasonSlowReader
)

var reasonNames = [...]string{
	ReasonMaxConnections: "max_connections",
	ReasonMaxPerIP:       "max_connections_per_ip",
	ReasonIdle:           "idle_timeout",
	ReasonReadTimeout:    "read_timeout",
	ReasonWriteTimeout:   "write_timeout",
	ReasonSlowReader:     "slow_reader",
}

// String returns the metric label, e.g. "max_connections_per_ip".
func (r Reason) String() string {
	if r > 0 && int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return fmt.Sprintf("Reason(%d)", uint8(r))
}

// Options configures a Listener. The zero value limits nothing.
type Options struct {
	// MaxConns caps the listener's open connections; 0 means no cap.
	MaxConns int
	// MaxPerIP caps open connections from one source IP address (IPv4, or
	// IPv6 exact; an IPv4-mapped IPv6 address counts as IPv4); 0 means no
	// cap. Connections without an IP (Unix sockets) are not counted per IP.
	MaxPerIP int
	// Reject, if not nil, is given each connection refused for a limit,
	// to tell the client why before it is closed. It runs on its own
	// goroutine with a write deadline RejectTimeout away, and the listener
	// closes the connection when it returns. Leave it nil on a TLS
	// listener (the Listener wraps the raw TCP one, before the handshake,
	// so rejection stays cheap and the client could not read a plain-text
	// reply anyway): the client then sees the connection closed at once.
	//
	// What to send is the protocol's business. Beanstalk has no "too many
	// connections" reply; proxy should send "OUT_OF_MEMORY\r\n", the
	// token beanstalkd uses when it cannot take more, which a client reads
	// as the answer to its first command (go-beanstalk: ErrOOM) instead of
	// a bare EOF. Gearman: an ERROR packet (code and text of proxy's
	// choosing), which clients read as the reply to their first request.
	Reject func(c net.Conn, r Reason)
	// RejectTimeout is the write deadline of Reject. Default 1s.
	RejectTimeout time.Duration
	// MaxRejecting caps concurrent Reject calls, so a flood cannot turn
	// into a goroutine per refused connection; past it, refused
	// connections are closed without Reject. Default 64.
	MaxRejecting int
	// OnReject, if not nil, is called for every refused connection, on
	// the accepting goroutine, before Reject: count it
	// (metrics ConnSeries.Rejected(r.String())). It must be quick.
	OnReject func(remote net.Addr, r Reason)
	// OnOpen and OnClose, if not nil, are called when a connection is
	// admitted (on the accepting goroutine) and when it is first closed
	// (on the closing one): the open-connections gauge
	// (metrics ConnSeries.Opened and Closed). They must be quick.
	OnOpen, OnClose func()
	// Group, if not nil, is where the listener counts its connections, so
	// that several listeners share one cap (e.g. the Gearman and Beanstalk
	// ports of one process); MaxConns and MaxPerIP are then the group's,
	// and these fields are ignored. Nil: the listener has a group of its
	// own, with MaxConns and MaxPerIP.
	Group *Group
}

// Group is the count of open connections, in total and per source IP,
// that one or more Listeners admit against shared caps. It is safe for
// concurrent use.
type Group struct {
	mu       sync.Mutex // guards the fields below
	maxConns int
	maxPerIP int
	open     int
	perIP    map[netip.Addr]int
}

// NewGroup returns a group with the caps; 0 means no cap.
func NewGroup(maxConns, maxPerIP int) *Group {
	return &Group{maxConns: max(maxConns, 0), maxPerIP: max(maxPerIP, 0), perIP: make(map[netip.Addr]int)}
}

// SetLimits changes the caps (a config reload). Connections already open
// stay open even if now over the cap; the next ones are refused until
// enough have gone.
func (g *Group) SetLimits(maxConns, maxPerIP int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.maxConns, g.maxPerIP = max(maxConns, 0), max(maxPerIP, 0)
}

// Open returns the number of admitted connections not yet closed.
func (g *Group) Open() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.open
}

// OpenFrom returns the number of open connections from ip.
func (g *Group) OpenFrom(ip netip.Addr) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.perIP[ip.Unmap()]
}

// Listener wraps a net.Listener, refusing connections over its limits.
// Accept returns only admitted connections, as *Conn; closing one frees its
// slot. It is safe for concurrent use.
type Listener struct {
	net.Listener
	reject        func(net.Conn, Reason)
	rejectTimeout time.Duration
	onReject      func(net.Addr, Reason)
	onOpen        func()
	onClose       func()
	rejecting     chan struct{} // semaphore of running Reject calls
	*Group                      // the counts, perhaps shared with other listeners
}

// NewListener wraps l with the limits of o.
func NewListener(l net.Listener, o Options) *Listener {
	if o.RejectTimeout <= 0 {
		o.RejectTimeout = time.Second
	}
	if o.MaxRejecting <= 0 {
		o.MaxRejecting = 64
	}
	g := o.Group
	if g == nil {
		g = NewGroup(o.MaxConns, o.MaxPerIP)
	}
	return &Listener{
		Group:         g,
		Listener:      l,
		reject:        o.Reject,
		rejectTimeout: o.RejectTimeout,
		onReject:      o.OnReject,
		onOpen:        o.OnOpen,
		onClose:       o.OnClose,
		rejecting:     make(chan struct{}, o.MaxRejecting),
	}
}

// Accept waits for and returns the next admitted connection, a *Conn.
// Refused connections are handled (OnReject, Reject, close) inside Accept
// and never returned. Errors are the wrapped listener's.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := remoteIP(c.RemoteAddr())
		reason := l.admit(ip)
		if reason == 0 {
			if l.onOpen != nil {
				l.onOpen()
			}
			return &Conn{Conn: c, l: l, ip: ip}, nil
		}
		l.refuse(c, reason)
	}
}

// admit takes a slot for a connection from ip, or says why not.
func (g *Group) admit(ip netip.Addr) Reason {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.maxConns > 0 && g.open >= g.maxConns {
		return ReasonMaxConnections
	}
	if ip.IsValid() {
		if g.maxPerIP > 0 && g.perIP[ip] >= g.maxPerIP {
			return ReasonMaxPerIP
		}
		g.perIP[ip]++
	}
	g.open++
	return 0
}

func (l *Listener) release(ip netip.Addr) {
	if l.onClose != nil {
		l.onClose()
	}
	l.Group.release(ip)
}

func (g *Group) release(ip netip.Addr) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open--
	if ip.IsValid() {
		if n := g.perIP[ip] - 1; n > 0 {
			g.perIP[ip] = n
		} else {
			delete(g.perIP, ip) // the map must not keep every address ever seen
		}
	}
}

func (l *Listener) refuse(c net.Conn, r Reason) {
	if l.onReject != nil {
		l.onReject(c.RemoteAddr(), r)
	}
	if l.reject == nil {
		c.Close()
		return
	}
	select {
	case l.rejecting <- struct{}{}:
	default:
		c.Close() // too many rejections in flight: no message
		return
	}
	go func() {
		defer func() { <-l.rejecting }()
		defer c.Close()
		// Socket deadlines run on the runtime's wall clock; an injected
		// clock could not move them.
		c.SetWriteDeadline(time.Now().Add(l.rejectTimeout))
		l.reject(c, r)
	}()
}

func remoteIP(a net.Addr) netip.Addr {
	switch a := a.(type) {
	case *net.TCPAddr:
		ip, _ := netip.AddrFromSlice(a.IP)
		return ip.Unmap()
	case *net.UDPAddr:
		ip, _ := netip.AddrFromSlice(a.IP)
		return ip.Unmap()
	}
	return netip.Addr{}
}

// Conn is an admitted connection. Close frees its slot in the Listener
// (once, however often it is called, and also when a tls.Conn or other
// wrapper around it closes it).
type Conn struct {
	net.Conn
	l      *Listener
	ip     netip.Addr
	closed atomic.Bool
}

// Close closes the connection and frees its slot.
func (c *Conn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.l.release(c.ip)
	}
	return c.Conn.Close()
}

// NetConn returns the underlying connection (a *net.TCPConn for a TCP
// listener), for socket options such as SetKeepAlive or SetWriteBuffer.
// Close it through the Conn, not directly, or the slot is never freed.
func (c *Conn) NetConn() net.Conn { return c.Conn }

// RemoteIP returns the address the connection is counted under; the zero
// Addr for connections without an IP.
func (c *Conn) RemoteIP() netip.Addr { return c.ip }
