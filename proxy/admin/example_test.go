package admin_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/jobgate/jobgate/metrics"
	"github.com/jobgate/jobgate/proxy/admin"
	"github.com/jobgate/jobgate/routing"
)

// Wire the admin server the way cmd will: metrics fed by routing's
// callbacks, readiness from flags and a per-route backend check.
func Example() {
	m := metrics.New(metrics.Options{Version: "dev", NoRuntimeCollectors: true})

	// Per backend: resolve the series once and hand routing closures.
	gm1 := m.Backend("gm1")
	if _, err := routing.NewBreaker(routing.BreakerConfig{
		Name:          "gm1",
		OnStateChange: func(_ string, _, to routing.BreakerState) { gm1.SetBreakerState(uint8(to)) },
	}); err != nil {
		fmt.Println(err)
	}
	// And routing.HealthConfig{OnChange: gm1.SetUp, ...}; each upstream
	// round trip: gm1.ObserveLatency(d).

	listeners := admin.NewFlag("listeners bound")
	journal := admin.NewFlag("journal replayed")
	var gm1Up atomic.Bool // in cmd: the backend's Available()
	srv := admin.New(admin.Options{
		Metrics: m.Handler(),
		Reload:  func(context.Context) error { return nil },
		Drain:   func(context.Context) error { return nil },
		Logger:  slog.New(slog.DiscardHandler),
	})
	srv.AddCheck("listeners", listeners.Check)
	srv.AddCheck("journal", journal.Check)
	srv.AddCheck("backends", func(context.Context) error {
		// In cmd: for each route, is at least one of its pool's backends
		// Available()?
		if !gm1Up.Load() {
			return fmt.Errorf("route gearman %q: no backend up", "*")
		}
		return nil
	})

	l, _ := net.Listen("tcp", "127.0.0.1:0")
	go srv.Serve(l)
	defer srv.Shutdown(context.Background())
	get := func(path string) {
		resp, err := http.Get("http://" + l.Addr().String() + path)
		if err != nil {
			fmt.Println(err)
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		fmt.Printf("%s %d %s", path, resp.StatusCode, body)
	}

	listeners.Set(true)
	journal.Set(true)
	get("/readyz")
	gm1Up.Store(true)
	get("/readyz")

	resp, _ := http.Get("http://" + l.Addr().String() + "/metrics")
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "jobgate_backend_up") {
			fmt.Println(line)
		}
	}
	// Output:
	// /readyz 503 backends: route gearman "*": no backend up
	// /readyz 200 ok
	// jobgate_backend_up{backend="gm1"} 1
}
