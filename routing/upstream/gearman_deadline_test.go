package upstream

import (
	"testing"
	"time"

	"github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/internal/testutil"
)

// TestGearmanBusyNoTimeout: the read deadline is set lazily, so on a busy
// session it fires while a request is outstanding but not late (answered
// requests keep moving the real deadline). That must not end the session:
// echoes answered at once for several I/O timeouts all come back.
func TestGearmanBusyNoTimeout(t *testing.T) {
	g := newGearman(t, testutil.StartGearmand(t), 30*time.Millisecond)
	c, pk := openGearman(t, g)
	for end := time.Now().Add(200 * time.Millisecond); time.Now().Before(end); {
		send(t, c, gearman.EchoReq, "x")
		flush(t, c)
		pk.expect(t, gearman.EchoRes)
	}
}
