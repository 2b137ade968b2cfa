package proxy_test

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/jobserver/gearman"
	"github.com/jobgate/jobgate/proxy"
	"github.com/jobgate/jobgate/tracing"
)

// TestGearmanTraceRefusedSubmit: a SUBMIT_* the codec refuses gets a send
// span that failed with the ERROR code, as a refused Beanstalk put does:
// a body over the packet limit and a unique ID over its limit (both
// answered with ERROR, the connection goes on), then too few arguments
// (gearmand closes the connection), in both serving modes.
func TestGearmanTraceRefusedSubmit(t *testing.T) {
	for _, goroutines := range []bool{false, true} {
		t.Run(map[bool]string{false: "loop", true: "goroutines"}[goroutines], func(t *testing.T) {
			tr, rec := recordedTracer(t, tracing.Gearman, tracing.Config{})
			addr, _, _ := gmServeStop(t, proxy.GearmanConfig{
				Engine:     gearman.Config{HandlePrefix: "H:t"},
				Limits:     codec.Limits{MaxPacketSize: 100},
				Goroutines: goroutines,
				Tracer:     tr,
			})
			cl := gmDial(t, addr)
			cl.send(codec.SubmitJob, "big", "", strings.Repeat("x", 200))
			if e := cl.expect(codec.Error); e[0] != "ARGUMENT_TOO_LARGE" {
				t.Fatalf("ERROR %q", e)
			}
			cl.send(codec.SubmitJobBg, "long", strings.Repeat("u", 65), "d")
			if e := cl.expect(codec.Error); e[0] != "ARGUMENT_TOO_LARGE" {
				t.Fatalf("ERROR %q", e)
			}
			cl.send(codec.SubmitJobHigh, "few") // one argument of three
			cl.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := cl.rd.ReadFrame(); !errors.Is(err, io.EOF) {
				t.Fatalf("after too few arguments: %v, want the connection closed", err)
			}
			checkSpans(t, waitSpans(t, rec, 3), []string{
				"T1 send producer parent=- links=[] status=Error error.type=ARGUMENT_TOO_LARGE messaging.message.body.size=205 messaging.operation.name=SUBMIT_JOB messaging.operation.type=send messaging.system=gearman",
				"T2 send long producer parent=- links=[] status=Error error.type=ARGUMENT_TOO_LARGE messaging.destination.name=long messaging.message.body.size=1 messaging.operation.name=SUBMIT_JOB_BG messaging.operation.type=send messaging.system=gearman",
				"T3 send producer parent=- links=[] status=Error error.type=INVALID_PACKET messaging.message.body.size=0 messaging.operation.name=SUBMIT_JOB_HIGH messaging.operation.type=send messaging.system=gearman",
			})
		})
	}
}
