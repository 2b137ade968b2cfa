package tlsconf

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"go.uber.org/zap"
)

// TestZapToSlog: certmagic's zap logs arrive in slog with their level,
// logger name, With fields and call fields.
func TestZapToSlog(t *testing.T) {
	var buf bytes.Buffer
	zl := zapToSlog(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	zl.Named("obtain").With(zap.String("identifier", "a.test")).Info("certificate obtained", zap.Int("attempt", 2))
	zl.Debug("hidden")
	zl.Error("failed", zap.Error(errors.New("boom")))
	out := buf.String()
	for _, want := range []string{
		`level=INFO msg="certmagic: obtain: certificate obtained" identifier=a.test attempt=2`,
		`level=ERROR msg="certmagic: failed" error=boom`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "hidden") {
		t.Error("debug logged at info level")
	}
}
