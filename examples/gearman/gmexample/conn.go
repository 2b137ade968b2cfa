// Package gmexample is the code behind the example Gearman programs
// examples/gearman/worker and examples/gearman/client: a minimal worker and
// client written directly on jobgate's codec (codec/gearman), one packet at a
// time, so that each step of the protocol is visible. The programs' mains only
// parse flags and call RunWorker and RunClient; the tests call the same
// functions in-process.
//
// The protocol in brief (http://gearman.org/protocol/): every packet is a
// 12-byte header (magic "\0REQ" or "\0RES", type, body length) and
// NUL-separated arguments. A worker announces what it can do (CAN_DO), asks
// for work (GRAB_JOB), and when there is none says it is going to sleep
// (PRE_SLEEP) and waits for the server's NOOP before asking again. A client
// submits a job (SUBMIT_JOB), gets its handle (JOB_CREATED) and then the
// worker's WORK_* packets, forwarded by the server, until WORK_COMPLETE or
// WORK_FAIL.
package gmexample

import (
	"context"
	"fmt"
	"net"

	"github.com/jobgate/jobgate/codec/gearman"
)

// conn is one connection to a Gearman server: the codec's Reader and Writer
// around a TCP socket. It is used by one goroutine at a time.
type conn struct {
	nc net.Conn
	r  *gearman.Reader
	w  *gearman.Writer
	// stop unregisters the context hook that closes nc.
	stop func() bool
}

// dial connects to addr. Cancelling ctx closes the connection, which is the
// only way to interrupt a read that is blocked waiting for the server (a
// sleeping worker, a client waiting for its result).
func dial(ctx context.Context, addr string) (*conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, cause(ctx, err)
	}
	return &conn{
		nc:   nc,
		r:    gearman.NewReader(nc, gearman.Limits{}),
		w:    gearman.NewWriter(nc),
		stop: context.AfterFunc(ctx, func() { nc.Close() }),
	}, nil
}

// Close closes the connection.
func (c *conn) Close() error {
	c.stop()
	return c.nc.Close()
}

// send writes one request packet and flushes it. A program that sends several
// packets in a row can WritePacket each and Flush once, as RunWorker does for
// a job's results.
func (c *conn) send(t gearman.Type, args ...[]byte) error {
	if err := c.w.WritePacket(gearman.Req, t, args...); err != nil {
		return err
	}
	return c.w.Flush()
}

// recv reads the next packet from the server. The packet aliases the
// Reader's buffer: it is valid only until the next recv, so callers copy
// (string(...), bytes.Clone, Packet.Clone) whatever they keep.
//
// An ERROR packet becomes an error: the server sends it when it did not
// understand a request, which in these small programs is a bug.
func (c *conn) recv() (*gearman.Packet, error) {
	f, err := c.r.ReadFrame()
	if err != nil {
		return nil, err
	}
	if f.Kind != gearman.KindPacket || f.Packet.Magic != gearman.Res {
		return nil, fmt.Errorf("gearman: unexpected %s from server", f.String())
	}
	p := &f.Packet
	if p.Type == gearman.Error {
		return nil, fmt.Errorf("gearman: server error %s: %s",
			p.Field(gearman.FieldCode), p.Field(gearman.FieldText))
	}
	return p, nil
}

// cause returns ctx's error instead of err once ctx is done: cancelling ctx
// closes the connection, so the error seen is then "use of closed network
// connection", which hides why.
func cause(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}
