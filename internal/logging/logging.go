// Package logging builds jobgate's *slog.Logger from the log section of the
// config (level and format strings), so cmd stays a wiring file and the
// accepted spellings live in one place.
//
// Level policy, for whoever logs: debug is per command and per job (never
// log per job at info: a busy server would log millions of lines); info is
// lifecycle (listening, reloaded, backend up/down, draining); warn is a
// degraded condition an operator may act on (a client cut off, a backend
// breaker opening, a journal repair); error is a failure of jobgate itself.
// Events that a client can trigger at will (rejections, cut-offs) belong at
// debug or in a metric, or behind a rate limit.
package logging

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// Levels and Formats are the accepted spellings, matched case-insensitively.
// They are config.LevelDebug... and config.FormatText/FormatJSON.
var (
	Levels  = []string{"debug", "info", "warn", "error"}
	Formats = []string{"text", "json"}
)

// ParseLevel returns the slog level named s (debug, info, warn, error,
// any case); "" is info.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "", "info":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("log level %q is not one of %s", s, strings.Join(Levels, ", "))
}

// ParseFormat checks a format name (text, json, any case; "" is text) and
// returns it lower-cased.
func ParseFormat(s string) (string, error) {
	switch f := strings.ToLower(s); f {
	case "", "text":
		return "text", nil
	case "json":
		return f, nil
	}
	return "", fmt.Errorf("log format %q is not one of %s", s, strings.Join(Formats, ", "))
}

// New returns a logger writing to w (standard error, in jobgate) at the
// given level in the given format, and the LevelVar that holds the level,
// so a config reload can change it without rebuilding the logger that
// every package already holds. A bad level and a bad format are both
// reported, joined in one error.
func New(w io.Writer, level, format string) (*slog.Logger, *slog.LevelVar, error) {
	lvl, lerr := ParseLevel(level)
	f, ferr := ParseFormat(format)
	if err := errors.Join(lerr, ferr); err != nil {
		return nil, nil, fmt.Errorf("logging: %w", err)
	}
	v := new(slog.LevelVar)
	v.Set(lvl)
	opts := &slog.HandlerOptions{Level: v}
	var h slog.Handler
	if f == "json" {
		h = slog.NewJSONHandler(w, opts)
	} else {
		h = slog.NewTextHandler(w, opts)
	}
	return slog.New(h), v, nil
}
