package auth

import (
	"context"
	"log/slog"
	"net/netip"
)

// LogDenied logs one denial at Warn: "auth: denied" with the identity
// (name and method), the remote address, the action, the name and the
// decision. Every denial must be logged with the identity, so that an
// operator can tell a misconfigured rule from an intruder; the proxy calls
// this rather than composing its own line so that all denials look alike.
//
// Denials can be driven by a client in a loop, so the proxy should keep at
// most one log line per connection per second or so; LogDenied itself does
// not rate-limit. It allocates, but only on the denial path.
func LogDenied(ctx context.Context, log *slog.Logger, id Identity, remote netip.AddrPort, a Action, name []byte, d Decision) {
	if log == nil || !log.Enabled(ctx, slog.LevelWarn) {
		return
	}
	log.LogAttrs(ctx, slog.LevelWarn, "auth: denied",
		slog.Any("identity", id),
		slog.String("remote", remote.String()),
		slog.String("action", a.String()),
		slog.String("name", string(name)),
		slog.String("decision", d.String()))
}

// LogBadToken logs, at Warn, a token that matched no identity: never the
// token itself, which might be a real one with a typo, only its length.
func LogBadToken(ctx context.Context, log *slog.Logger, id Identity, remote netip.AddrPort, tokenLen int) {
	if log == nil {
		return
	}
	log.LogAttrs(ctx, slog.LevelWarn, "auth: unknown token",
		slog.Any("identity", id),
		slog.String("remote", remote.String()),
		slog.Int("token_len", tokenLen))
}
