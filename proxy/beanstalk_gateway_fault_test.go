package proxy_test

import (
	"bufio"
	"errors"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	gobeanstalk "github.com/beanstalkd/go-beanstalk"

	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/metrics"
	"github.com/jobgate/jobgate/proxy"
	"github.com/jobgate/jobgate/routing"
)

// Beanstalk gateway tests where an upstream dies or comes back.

// ownBeanstalkd runs beanstalkd on port with its binlog in dir and returns
// its process, for tests that kill it and start it again by PID.
func ownBeanstalkd(t *testing.T, port int, dir string) *exec.Cmd {
	t.Helper()
	return testutil.StartOwned(t, "beanstalkd", port, "-l", "127.0.0.1", "-p", strconv.Itoa(port), "-b", dir)
}

// kill ends a server started by ownBeanstalkd, by PID, at once.
func kill(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
}

// faultCluster is two beanstalkd that tests kill and restart, sharded by a
// gateway whose breakers open after one failure and try again soon.
type faultCluster struct {
	*bgwCluster
	gw    *proxy.BeanstalkGateway
	ports map[int]int       // backend id -> port
	dirs  map[int]string    // backend id -> binlog directory
	procs map[int]*exec.Cmd // backend id -> process
}

func startFaultCluster(t *testing.T) *faultCluster {
	t.Helper()
	fc := &faultCluster{ports: map[int]int{}, dirs: map[int]string{}, procs: map[int]*exec.Cmd{}}
	c := config.Default()
	var members []string
	var mirror []*routing.Backend
	ups := map[int]string{}
	for i := 1; i <= 2; i++ {
		fc.ports[i], fc.dirs[i] = testutil.FreePort(t), t.TempDir()
		fc.procs[i] = ownBeanstalkd(t, fc.ports[i], fc.dirs[i])
		b := config.DefaultBackend()
		b.Name, b.ID, b.Type, b.HealthInterval = "bs-"+strconv.Itoa(i), i, config.TypeBeanstalk, 0
		b.Address = net.JoinHostPort("127.0.0.1", strconv.Itoa(fc.ports[i]))
		b.DialTimeout, b.IOTimeout = time.Second, 2*time.Second
		b.Breaker = config.Breaker{Failures: 1, OpenTimeout: time.Second, HalfOpenRequests: 1}
		c.Backends = append(c.Backends, b)
		members = append(members, b.Name)
		mirror = append(mirror, &routing.Backend{ID: i, Name: b.Name})
		ups[i] = b.Address
	}
	c.Pools = append(c.Pools, config.Pool{Name: "shard", Strategy: config.StrategyShard, Backends: members})
	c.Routes.BeanstalkDefault = "shard"
	// One tube lives on bs-1 alone.
	c.Routes.Beanstalk = []config.Route{{Exact: "solo", Backend: "bs-1"}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	g, err := proxy.NewBeanstalkGatewayFromConfig(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr, srv := bsServeGateway(t, g, 0)
	pool, err := routing.NewPool("mirror", routing.Shard, mirror...)
	if err != nil {
		t.Fatal(err)
	}
	fc.bgwCluster = &bgwCluster{addr: addr, srv: srv, ups: ups, pool: pool}
	fc.gw = g
	return fc
}

// breaker is the breaker of backend id.
func (fc *faultCluster) breaker(id int) *routing.Breaker {
	for _, b := range fc.gw.Rules.Default().Backends() {
		if b.ID == id {
			return b.Breaker
		}
	}
	return nil
}

// TestBeanstalkGatewayUpstreamDiesMidPut kills the owner of a tube between
// puts: each put gets INSERTED (from the other backend, the owner's
// breaker being open) or INTERNAL_ERROR; every acknowledged job is on the backend its
// id names after the dead one restarts from its binlog; and the breaker
// closes again, so puts return to the owner.
func TestBeanstalkGatewayUpstreamDiesMidPut(t *testing.T) {
	t.Parallel()
	fc := startFaultCluster(t)
	tube := ""
	for i := 0; tube == ""; i++ {
		if name := "t" + strconv.Itoa(i); fc.owner(name) == 1 {
			tube = name
		}
	}
	c := bgwDial(t, fc.addr)
	tb := gobeanstalk.NewTube(c, tube)
	var acked []uint64
	failedOver, internal := 0, 0
	for i := range 40 {
		if i == 20 {
			kill(t, fc.procs[1])
		}
		id, err := tb.Put([]byte("p"+strconv.Itoa(i)), 1, 0, time.Minute)
		switch {
		case errors.Is(err, gobeanstalk.ErrInternal):
			internal++
			continue
		case err != nil:
			t.Fatalf("put %d: %v", i, err)
		}
		acked = append(acked, id)
		be, _ := split(id)
		if i < 20 && be != 1 {
			t.Fatalf("put %d before the kill went to backend %d", i, be)
		}
		if i >= 20 {
			if be != 2 {
				t.Fatalf("put %d after the kill went to backend %d", i, be)
			}
			// The lost session counted as a failure: the breaker is
			// open, so the dead server is not even dialled.
			if st := fc.breaker(1).State(); st != routing.BreakerOpen {
				t.Fatalf("put %d failed over with backend 1's breaker %v", i, st)
			}
			failedOver++
		}
	}
	if failedOver == 0 {
		t.Fatalf("no put failed over (%d INTERNAL_ERROR)", internal)
	}
	t.Logf("after the kill: %d failed over, %d INTERNAL_ERROR", failedOver, internal)
	fc.procs[1] = ownBeanstalkd(t, fc.ports[1], fc.dirs[1])
	direct := map[int]*gobeanstalk.Conn{1: bgwDial(t, fc.ups[1]), 2: bgwDial(t, fc.ups[2])}
	for _, id := range acked {
		be, up := split(id)
		st, err := direct[be].StatsJob(up)
		if err != nil || st["tube"] != tube {
			t.Fatalf("acknowledged job %d (backend %d id %d): %v %v", id, be, up, st, err)
		}
	}
	// The breaker lets a trial through after its open timeout; the put
	// goes back to the owner.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		id, err := tb.Put([]byte("back"), 1, 0, time.Minute)
		must(t, err)
		if be, _ := split(id); be == 1 {
			if st := fc.breaker(1).State(); st != routing.BreakerClosed {
				t.Fatalf("back on the owner with its breaker %v", st)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("puts never returned to the restarted owner")
		}
	}
}

// TestBeanstalkGatewayUpstreamDiesMidReserve kills one backend while two
// workers wait: the one watching only a tube routed to that backend alone
// gets INTERNAL_ERROR and its connection goes on; the one watching sharded
// tubes (served by both backends) gets the job put on the other backend.
func TestBeanstalkGatewayUpstreamDiesMidReserve(t *testing.T) {
	t.Parallel()
	fc := startFaultCluster(t)
	var t1, t2 string
	for i := 0; t1 == "" || t2 == ""; i++ {
		name := "r" + strconv.Itoa(i)
		if fc.owner(name) == 1 && t1 == "" {
			t1 = name
		} else if fc.owner(name) == 2 && t2 == "" {
			t2 = name
		}
	}
	only := bsDial(t, fc.addr)
	defer only.nc.Close()
	only.send(t, "watch solo\r\nignore default\r\nreserve\r\n")
	only.expect(t, "WATCHING 2\r\nWATCHING 1\r\n", "watch")
	both := bsDial(t, fc.addr)
	defer both.nc.Close()
	both.send(t, "watch "+t1+"\r\nwatch "+t2+"\r\nignore default\r\nreserve-with-timeout 20\r\n")
	both.expect(t, "WATCHING 2\r\nWATCHING 3\r\nWATCHING 2\r\n", "watch")
	d1 := bgwDial(t, fc.ups[1])
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		st, err := d1.Stats()
		must(t, err)
		if st["current-waiting"] == "2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("backend 1 does not see both waits: %v", st)
		}
	}
	kill(t, fc.procs[1])
	only.expect(t, "INTERNAL_ERROR\r\n", "reserve on the dead backend")
	only.send(t, "list-tube-used\r\n")
	only.expect(t, "USING default\r\n", "the connection goes on")
	p := bgwDial(t, fc.addr)
	id, err := gobeanstalk.NewTube(p, t2).Put([]byte("survivor"), 1, 0, time.Minute)
	must(t, err)
	both.expect(t, "RESERVED "+strconv.FormatUint(id, 10)+" 8\r\nsurvivor\r\n", "reserve over both")
	both.send(t, "delete "+strconv.FormatUint(id, 10)+"\r\n")
	both.expect(t, "DELETED\r\n", "delete")
}

// fakeBeanstalkd answers use and watch; it answers a put with INSERTED 7
// after delay, or, with delay 0, closes the connection: an upstream that
// dies in the middle of a command.
func fakeBeanstalkd(t *testing.T, delay time.Duration) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			nc, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				br := bufio.NewReader(nc)
				for {
					line, err := br.ReadString('\n')
					if err != nil {
						return
					}
					f := strings.Fields(line)
					switch {
					case len(f) == 2 && f[0] == "use":
						nc.Write([]byte("USING " + f[1] + "\r\n"))
					case len(f) == 2 && (f[0] == "watch" || f[0] == "ignore"):
						nc.Write([]byte("WATCHING 1\r\n"))
					case len(f) == 5 && f[0] == "put" && delay > 0:
						if _, err := br.ReadString('\n'); err != nil {
							return
						}
						time.Sleep(delay)
						nc.Write([]byte("INSERTED 7\r\n"))
					default:
						return
					}
				}
			}()
		}
	}()
	return l.Addr().String()
}

// TestBeanstalkGatewayUpstreamDiesMidCommand pipelines a put to an upstream
// that hangs up on it between commands for the local engine: the put gets
// INTERNAL_ERROR, the others their answers, in order.
func TestBeanstalkGatewayUpstreamDiesMidCommand(t *testing.T) {
	t.Parallel()
	addr := fakeGateway(t, fakeBeanstalkd(t, 0), "doomed")
	conn := bsDial(t, addr)
	defer conn.nc.Close()
	conn.send(t, "use doomed\r\nput 1 0 10 1\r\nx\r\nuse fine\r\nput 1 0 10 1\r\ny\r\nlist-tube-used\r\n")
	conn.expect(t, "USING doomed\r\nINTERNAL_ERROR\r\nUSING fine\r\nINSERTED {n}\r\nUSING fine\r\n", "batch")
	conn.send(t, "peek-ready\r\n")
	conn.expect(t, "FOUND {n} 1\r\ny\r\n", "the local job")
}

// fakeGateway serves a gateway routing tube to the fake upstream at up and
// everything else to the local engine.
func fakeGateway(t *testing.T, up, tube string) string {
	t.Helper()
	c := config.Default()
	b := config.DefaultBackend()
	b.Name, b.ID, b.Type, b.Address, b.HealthInterval = "fake", 1, config.TypeBeanstalk, up, 0
	c.Backends = append(c.Backends, b)
	c.Routes.Beanstalk = []config.Route{{Exact: tube, Backend: "fake"}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	g, err := proxy.NewBeanstalkGatewayFromConfig(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := bsServeGateway(t, g, 0)
	return addr
}

// TestBeanstalkGatewayReplyOrder pipelines a put to a slow upstream between
// commands the local engine answers at once: the replies come in request
// order, the slow one first.
func TestBeanstalkGatewayReplyOrder(t *testing.T) {
	t.Parallel()
	addr := fakeGateway(t, fakeBeanstalkd(t, 200*time.Millisecond), "slow")
	conn := bsDial(t, addr)
	defer conn.nc.Close()
	conn.send(t, "use slow\r\nput 1 0 10 1\r\nx\r\nuse fast\r\nput 1 0 10 1\r\ny\r\n")
	conn.expect(t, "USING slow\r\nINSERTED "+strconv.FormatUint(1<<routing.UpstreamIDBits|7, 10)+"\r\nUSING fast\r\nINSERTED 1\r\n", "batch")
}

// TestBeanstalkGatewayReplyTooBig reserves, through a gateway with a small
// job size limit, a job bigger than that limit on the upstream: the client
// gets INTERNAL_ERROR and the job goes back to ready there.
func TestBeanstalkGatewayReplyTooBig(t *testing.T) {
	t.Parallel()
	up := testutil.StartBeanstalkd(t)
	d := bgwDial(t, up)
	_, err := gobeanstalk.NewTube(d, "big").Put(make([]byte, 500), 1, 0, time.Minute)
	must(t, err)
	c := config.Default()
	c.Beanstalk.MaxJobSize = 100
	b := config.DefaultBackend()
	b.Name, b.ID, b.Type, b.Address, b.HealthInterval = "up", 1, config.TypeBeanstalk, up, 0
	c.Backends = append(c.Backends, b)
	c.Routes.BeanstalkDefault = "up"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	g, err := proxy.NewBeanstalkGatewayFromConfig(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := bsServeGateway(t, g, 100)
	conn := bsDial(t, addr)
	defer conn.nc.Close()
	conn.send(t, "watch big\r\nreserve-with-timeout 1\r\n")
	conn.expect(t, "WATCHING 2\r\nINTERNAL_ERROR\r\n", "reserve")
	pollReady(t, up, "big", 1)
}

// TestBeanstalkGatewayBreakerMetrics: a gateway built with metrics reports
// its backends' breaker transitions.
func TestBeanstalkGatewayBreakerMetrics(t *testing.T) {
	c := config.Default()
	b := config.DefaultBackend()
	b.Name, b.ID, b.Type, b.Address = "b1", 1, config.TypeBeanstalk, "127.0.0.1:1"
	b.Breaker = config.Breaker{Failures: 2, OpenTimeout: time.Hour, HalfOpenRequests: 1}
	c.Backends = append(c.Backends, b)
	c.Routes.Beanstalk = []config.Route{{Exact: "one", Backend: "b1"}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	m := metrics.New(metrics.Options{NoRuntimeCollectors: true})
	g, err := proxy.NewBeanstalkGatewayFromConfig(c, m)
	if err != nil {
		t.Fatal(err)
	}
	be := g.Rules.Match([]byte("one")).Owner([]byte("one"))
	if be.Breaker == nil {
		t.Fatal("no breaker")
	}
	fail := &routing.TransportError{Err: errors.New("reset")}
	be.Breaker.Record(fail)
	be.Breaker.Record(fail)
	checkSamples(t, scrapeMetrics(t, m), map[string]float64{
		`jobgate_breaker_state{backend="b1"}`:                       2,
		`jobgate_breaker_transitions_total{backend="b1",to="open"}`: 1,
	})
}

// TestBeanstalkGatewayCommandMetrics: commands through a gateway are
// counted by verb and result like those of the direct path, replies the
// gateway gives itself and INTERNAL_ERROR from a dead upstream included.
func TestBeanstalkGatewayCommandMetrics(t *testing.T) {
	t.Parallel()
	c := config.Default()
	b := config.DefaultBackend()
	b.Name, b.ID, b.Type, b.Address, b.HealthInterval = "fake", 1, config.TypeBeanstalk, fakeBeanstalkd(t, 0), 0
	c.Backends = append(c.Backends, b)
	c.Routes.Beanstalk = []config.Route{{Exact: "doomed", Backend: "fake"}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	m := metrics.New(metrics.Options{NoRuntimeCollectors: true})
	g, err := proxy.NewBeanstalkGatewayFromConfig(c, m)
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := bsServe(t, proxy.BeanstalkConfig{Gateway: g, Metrics: m})
	conn := bsDial(t, addr)
	defer conn.nc.Close()
	conn.send(t, "put 1 0 10 1\r\nx\r\nuse doomed\r\nput 1 0 10 1\r\ny\r\nbogus\r\n")
	conn.expect(t, "INSERTED 1\r\nUSING doomed\r\nINTERNAL_ERROR\r\nUNKNOWN_COMMAND\r\n", "batch")
	key := func(cmd, res string) string {
		return `jobgate_commands_total{command="` + cmd + `",protocol="beanstalk",result="` + res + `"}`
	}
	checkSamples(t, scrapeMetrics(t, m), map[string]float64{
		key("put", "ok"):           1,
		key("put", "server_error"): 1,
		key("use", "ok"):           1,
	})
}
