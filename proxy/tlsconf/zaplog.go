package tlsconf

import (
	"context"
	"log/slog"
	"slices"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// zapToSlog returns a zap.Logger that writes to log, so certmagic's logs
// (it logs through zap) land in jobgate's own log with its format and level.
func zapToSlog(log *slog.Logger) *zap.Logger {
	return zap.New(&slogCore{log: log})
}

// slogCore is a zapcore.Core forwarding entries to a slog.Logger.
type slogCore struct {
	log   *slog.Logger
	attrs []slog.Attr // from With
}

var _ zapcore.Core = (*slogCore)(nil)

func slogLevel(l zapcore.Level) slog.Level {
	switch {
	case l <= zapcore.DebugLevel:
		return slog.LevelDebug
	case l == zapcore.InfoLevel:
		return slog.LevelInfo
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	}
	return slog.LevelError
}

func (c *slogCore) Enabled(l zapcore.Level) bool {
	return c.log.Enabled(context.Background(), slogLevel(l))
}

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	return &slogCore{log: c.log, attrs: append(slices.Clip(c.attrs), fieldAttrs(fields)...)}
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	msg := e.Message
	if e.LoggerName != "" {
		msg = e.LoggerName + ": " + msg
	}
	attrs := append(slices.Clip(c.attrs), fieldAttrs(fields)...)
	c.log.LogAttrs(context.Background(), slogLevel(e.Level), "certmagic: "+msg, attrs...)
	return nil
}

func (c *slogCore) Sync() error { return nil }

// fieldAttrs converts zap fields through zap's map encoder, which knows
// every field type. Fields keep their order; the keys one field expands to
// (a zap.Namespace or object) come in map order.
func fieldAttrs(fields []zapcore.Field) []slog.Attr {
	attrs := make([]slog.Attr, 0, len(fields))
	for _, f := range fields {
		enc := zapcore.NewMapObjectEncoder()
		f.AddTo(enc)
		for k, v := range enc.Fields {
			attrs = append(attrs, slog.Any(k, v))
		}
	}
	return attrs
}
