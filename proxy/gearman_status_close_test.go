package proxy_test

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/metrics"
	"github.com/jobgate/jobgate/proxy"
)

// TestGearmanStatusKeyTooLongMetrics checks that a status request closed
// for its over-long key counts as a client error, not as the outcome of
// the request before it, in both connection modes.
func TestGearmanStatusKeyTooLongMetrics(t *testing.T) {
	for _, goroutines := range []bool{false, true} {
		m := metrics.New(metrics.Options{NoRuntimeCollectors: true})
		addr, stop, _ := gmServeStop(t, proxy.GearmanConfig{Metrics: m, Goroutines: goroutines})
		for _, req := range []struct {
			ty  codec.Type
			key string
		}{
			{codec.GetStatus, strings.Repeat("H", 64)},
			{codec.GetStatusUnique, strings.Repeat("u", 64)},
		} {
			c := gmDial(t, addr)
			c.sync() // an ECHO_REQ with outcome ok comes first
			c.send(req.ty, req.key)
			c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
			if f, err := c.rd.ReadFrame(); !errors.Is(err, io.EOF) {
				t.Fatalf("goroutines=%v %v: got %v %v, want the connection closed", goroutines, req.ty, f.Packet.Type, err)
			}
		}
		gm := func(cmd, res string) string {
			return `jobgate_commands_total{command="` + cmd + `",protocol="gearman",result="` + res + `"}`
		}
		got := scrapeMetrics(t, m)
		checkSamples(t, got, map[string]float64{
			gm("ECHO_REQ", "ok"):                    2,
			gm("GET_STATUS", "client_error"):        1,
			gm("GET_STATUS_UNIQUE", "client_error"): 1,
		})
		for _, k := range []string{gm("GET_STATUS", "ok"), gm("GET_STATUS_UNIQUE", "ok")} {
			if got[k] != 0 {
				t.Errorf("goroutines=%v: %s = %v, want 0", goroutines, k, got[k])
			}
		}
		stop()
	}
}
