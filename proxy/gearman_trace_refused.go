package proxy

import (
	"context"
	"errors"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/tracing"
)

// traceRefused records a SUBMIT_* the codec refused (a body over the
// packet size limit, too few arguments, a unique ID over its limit) as a
// send span that failed at once, with the ERROR code as error.type: the
// producer's attempt shows in the trace as Beanstalk's refused put does
// (beanstalkTrace.rejectedPut). It uses the server's Tracer, so a
// gateway's refusals are recorded too. f is the frame ReadFrame returned
// with err; only ErrUniqueTooLong leaves the packet (and so its function)
// in it; otherwise the span has no destination.
func (c *gearmanConn) traceRefused(err error, f *codec.Frame) {
	var pe *codec.ProtocolError
	if !errors.As(err, &pe) || pe.Magic != codec.Req || !isSubmit(pe.Type) {
		return
	}
	m := tracing.Message{Operation: pe.Type.String()}
	switch {
	case f.Kind == codec.KindPacket && len(f.Packet.Args) > 0:
		m.Destination = string(f.Packet.Args[0])
		m.BodySize = len(f.Packet.Data())
	case errors.Is(pe, codec.ErrTooLarge):
		// The body was skipped unread: the size it declared, function
		// and unique ID included, is what made it too big.
		m.BodySize = int(pe.Size)
	}
	c.srv.cfg.Tracer.StartSend(context.Background(), m).Fail(string(pe.Code))
}
