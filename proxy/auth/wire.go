package auth

import (
	"bytes"

	bscodec "github.com/jobgate/jobgate/codec/beanstalk"
	gmcodec "github.com/jobgate/jobgate/codec/gearman"
)

// Token wire forms; see the package documentation.
const (
	// TokenPrefix starts the Beanstalk tube name ("use jobgate-auth.<token>")
	// and the Gearman SET_CLIENT_ID that carry a token. Tube names with
	// this prefix are reserved.
	TokenPrefix = "jobgate-auth."
	// GearmanOptionPrefix starts the Gearman OPTION_REQ that carries a
	// token: "auth=<token>".
	GearmanOptionPrefix = "auth="
)

// ParseBeanstalkToken looks at the tube of a Beanstalk "use" command. It
// returns reserved=true when the tube is in the reserved "jobgate-auth."
// namespace, which the proxy must consume and never forward, and then the
// token, or nil when what follows the prefix cannot be a token. Either way
// the proxy answers "USING <tube>" (see BeanstalkDenial for why use never
// fails) and leaves the used tube unchanged. The token aliases tube.
func ParseBeanstalkToken(tube []byte) (token []byte, reserved bool) {
	return parsePrefixed(tube, TokenPrefix)
}

// IsReservedTube reports whether a tube name is in the reserved
// "jobgate-auth." namespace: put, watch, ignore, peek, stats-tube and
// pause-tube on such a name must not reach a backend (answer them as for a
// tube the client may not use).
func IsReservedTube(tube []byte) bool {
	return bytes.HasPrefix(tube, []byte(TokenPrefix))
}

// ParseGearmanOption looks at the option of a Gearman OPTION_REQ. It
// returns isAuth=true for "auth=..." options, which the proxy must consume,
// and then the token, or nil when the value cannot be a token (answer ERROR
// GearmanDeniedCode GearmanBadTokenText). The token aliases option.
func ParseGearmanOption(option []byte) (token []byte, isAuth bool) {
	return parsePrefixed(option, GearmanOptionPrefix)
}

// ParseGearmanClientID looks at the id of a Gearman SET_CLIENT_ID. It
// returns isAuth=true for ids starting with "jobgate-auth.", which the
// proxy must consume (SET_CLIENT_ID has no reply), and then the token, or
// nil when what follows cannot be a token. The token aliases id.
func ParseGearmanClientID(id []byte) (token []byte, isAuth bool) {
	return parsePrefixed(id, TokenPrefix)
}

func parsePrefixed(b []byte, prefix string) ([]byte, bool) {
	if !bytes.HasPrefix(b, []byte(prefix)) {
		return nil, false
	}
	t := b[len(prefix):]
	if !validToken(t) {
		return nil, true
	}
	return t, true
}

// Denial replies. See the package documentation for why these.
const (
	// GearmanDeniedCode is the code (first argument) of the ERROR packet
	// answering a denied request or an unknown token.
	GearmanDeniedCode gmcodec.Code = "PERMISSION_DENIED"
	// GearmanDeniedText is the text of the ERROR answering a denied
	// SUBMIT_JOB*.
	GearmanDeniedText = "jobgate: not authorized to submit jobs to this function"
	// GearmanBadTokenText is the text of the ERROR answering an OPTION_REQ
	// auth= with an unknown or malformed token.
	GearmanBadTokenText = "jobgate: unknown token"
	// GearmanAdminDenied answers a denied text admin command, in gearmand's
	// admin error form (spaces as '+').
	GearmanAdminDenied = "ERR PERMISSION_DENIED jobgate:+not+authorized+for+admin+commands\r\n"

	// BeanstalkDenied answers every hard-denied Beanstalk command (see
	// BeanstalkDenial for the soft ones).
	BeanstalkDenied = "NOT_FOUND\r\n"
)

// BeanstalkDenial returns the reply to a denied Beanstalk command:
// BeanstalkDenied, or "" for use, watch and ignore, whose denial is soft:
// answer USING/WATCHING as beanstalkd would and keep the tube in the
// session's state, but never put into or reserve from it (use needs no
// right at all; see WatchedTubes for watch). Clients such as go-beanstalk
// pipeline use/watch/ignore in front of the next command and skip their
// replies unread, so any other reply there would be taken as the next
// command's reply and desynchronise the connection.
func BeanstalkDenial(v bscodec.Verb) string {
	switch v {
	case bscodec.Watch, bscodec.Use, bscodec.Ignore:
		return ""
	}
	return BeanstalkDenied
}

// NameOf says which name a request's Action applies to.
type NameOf uint8

// Where the name of a Need comes from.
const (
	// NoName: the action needs no name (None, Admin).
	NoName NameOf = iota
	// ArgName: the request's own name argument (Beanstalk Command.Tube,
	// Gearman function).
	ArgName
	// UsedTube: the session's used tube (put, peek-ready, kick...).
	UsedTube
	// WatchedTubes: every tube the session watches. The proxy reserves
	// only from the watched tubes the identity may consume (every session
	// starts watching "default", which it may not); when none is left, the
	// reserve is denied.
	WatchedTubes
	// JobTube: the tube of the job the command names by id. A job this
	// connection reserved needs no check (it was consumable when
	// reserved); for any other job the proxy learns its tube (stats-job)
	// and decides on that.
	JobTube
	// ReducerName: for SUBMIT_REDUCE_JOB*, the reducer function too.
	ReducerName
)

// Need is what a request needs: an action on a name.
type Need struct {
	Action Action
	Name   NameOf
}

// BeanstalkNeed returns what Beanstalk command v needs. use is free
// (consumers use a tube to peek or kick in it), so put checks the used
// tube; ignore, list-tube-used, list-tubes-watched and quit touch only the
// session; release, bury and touch act on jobs the connection reserved.
func BeanstalkNeed(v bscodec.Verb) Need {
	switch v {
	case bscodec.Put:
		return Need{Produce, UsedTube}
	case bscodec.Watch:
		return Need{Consume, ArgName}
	case bscodec.Reserve, bscodec.ReserveWithTimeout:
		return Need{Consume, WatchedTubes}
	case bscodec.PeekReady, bscodec.PeekDelayed, bscodec.PeekBuried, bscodec.Kick:
		return Need{Consume, UsedTube}
	case bscodec.ReserveJob, bscodec.Delete, bscodec.Peek, bscodec.KickJob, bscodec.StatsJob:
		return Need{Consume, JobTube}
	case bscodec.StatsTube:
		return Need{Observe, ArgName}
	case bscodec.Stats, bscodec.ListTubes, bscodec.PauseTube:
		return Need{Admin, NoName}
	}
	return Need{None, NoName}
}

// GearmanNeed returns what a Gearman request packet of type t needs;
// GearmanAdminNeed covers text admin lines. Results (WORK_*) concern jobs
// the worker was assigned, GET_STATUS* only reports, and the rest configure
// the connection, so they need nothing.
func GearmanNeed(t gmcodec.Type) Need {
	switch t {
	case gmcodec.SubmitJob, gmcodec.SubmitJobBg, gmcodec.SubmitJobHigh, gmcodec.SubmitJobHighBg,
		gmcodec.SubmitJobLow, gmcodec.SubmitJobLowBg, gmcodec.SubmitJobSched, gmcodec.SubmitJobEpoch:
		return Need{Produce, ArgName}
	case gmcodec.SubmitReduceJob, gmcodec.SubmitReduceJobBackground:
		// The proxy checks ReducerName as well: reduce jobs run there.
		return Need{Produce, ArgName}
	case gmcodec.CanDo, gmcodec.CanDoTimeout:
		return Need{Consume, ArgName}
	}
	return Need{None, NoName}
}

// GearmanAdminNeed is what every Gearman text admin line needs (status,
// workers, maxqueue, cancel job, shutdown, version...): all are
// server-wide, and listing other teams' functions is itself a leak.
var GearmanAdminNeed = Need{Admin, NoName}
