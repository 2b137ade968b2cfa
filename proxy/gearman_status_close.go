package proxy

import (
	"errors"

	codec "github.com/jobgate/jobgate/codec/gearman"
)

// errStatusKeyTooLong closes a connection whose GET_STATUS or
// GET_STATUS_UNIQUE names a job by a key no status reply can carry.
var errStatusKeyTooLong = errors.New("gearman: status request key too long; connection closed as gearmand does")

// statusKeyTooLong reports whether p is a GET_STATUS whose handle is over
// the handle limit (default 63 bytes) or a GET_STATUS_UNIQUE whose unique
// ID reaches the unique limit (default 64 bytes). gearmand closes the
// connection for both (its 64-byte buffers keep a NUL; libgearman-server
// GET_STATUS and GET_STATUS_UNIQUE), and that is the one answer libgearman
// (PHP's gearman extension, the gearman CLI) survives: it cannot match a
// STATUS_RES or STATUS_RES_UNIQUE carrying such a key to its request, so the
// call waits until its timeout (forever by default), and an ERROR reply
// leaves its next request on that connection unanswered. After a close it
// reports GEARMAN_LOST_CONNECTION at once and reconnects
// (TestGearmanPHPStatusKeyTooLong). A job submitted with a 64-byte unique
// ID, which jobgate keeps whole, is still found by its handle. A negative
// limit turns the check off.
func statusKeyTooLong(p *codec.Packet, lim codec.Limits) bool {
	switch p.Type {
	case codec.GetStatus:
		limit := lim.MaxHandleSize
		if limit == 0 {
			limit = codec.DefaultMaxHandleSize
		}
		return limit >= 0 && len(p.Handle()) > limit
	case codec.GetStatusUnique:
		limit := lim.MaxUniqueSize
		if limit == 0 {
			limit = codec.DefaultMaxUniqueSize
		}
		return limit >= 0 && len(p.Unique()) >= limit
	}
	return false
}
