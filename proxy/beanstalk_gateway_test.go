package proxy_test

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	gobeanstalk "github.com/beanstalkd/go-beanstalk"

	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/proxy"
	"github.com/jobgate/jobgate/routing"
)

// bgwCluster is a gateway sharding every tube over real beanstalkd servers
// and, optionally, the local engine.
type bgwCluster struct {
	addr string                 // the gateway
	srv  *proxy.BeanstalkServer // the gateway's server
	ups  map[int]string         // backend id -> beanstalkd address
	pool *routing.Pool          // a pool with the same ids, to tell owners
}

// bgwStart starts n beanstalkd and a gateway whose default pool shards
// over them (and the local engine when local is set). mods adjust the
// configuration before it is validated.
func bgwStart(t *testing.T, n int, local bool, mods ...func(*config.Config)) *bgwCluster {
	t.Helper()
	return bgwStartOn(t, false, n, local, mods...)
}

// bgwStartOn is bgwStart with the gateway's connections on goroutines
// when goroutines is set, else on its event loop.
func bgwStartOn(t *testing.T, goroutines bool, n int, local bool, mods ...func(*config.Config)) *bgwCluster {
	t.Helper()
	g, ups := bgwShardGateway(t, n, local, mods...)
	cl := &bgwCluster{ups: ups}
	var mirror []*routing.Backend
	if local {
		mirror = append(mirror, &routing.Backend{ID: 0, Name: "local"})
	}
	for i := 1; i <= n; i++ {
		mirror = append(mirror, &routing.Backend{ID: i, Name: fmt.Sprintf("bs-%d", i)})
	}
	cl.addr, cl.srv = bsServe(t, proxy.BeanstalkConfig{Gateway: g, Goroutines: goroutines})
	var err error
	if cl.pool, err = routing.NewPool("mirror", routing.Shard, mirror...); err != nil {
		t.Fatal(err)
	}
	return cl
}

// bsStartGatewaySharding serves a gateway whose default pool shards over
// the local engine and two fresh beanstalkd (maxJobSize is unused: the
// signature is the transcript suites' server starter's).
func bsStartGatewaySharding(t testing.TB, _ int) bsServer {
	t.Helper()
	g, _ := bgwShardGateway(t, 2, true)
	addr, _ := bsServeGateway(t, g, 0)
	return bsServer{name: "gateway sharding over local and two beanstalkd", addr: addr}
}

// owner is the backend id that owns tube.
func (cl *bgwCluster) owner(tube string) int { return cl.pool.Owner([]byte(tube)).ID }

// dial connects a go-beanstalk client to addr, closed when the test ends.
func bgwDial(t *testing.T, addr string) *gobeanstalk.Conn {
	t.Helper()
	c, err := gobeanstalk.DialTimeout("tcp", addr, bsReplyTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// split is a gateway id's backend id and upstream id.
func split(id uint64) (int, uint64) {
	return int(id >> routing.UpstreamIDBits), id & routing.MaxUpstreamID
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// tubesOnEveryBackend returns names, at least per of them owned by each
// backend of cl.
func (cl *bgwCluster) tubesOnEveryBackend(per int) []string {
	count := map[int]int{}
	var names []string
	for i := 0; len(count) < len(cl.pool.Backends()) || slices.ContainsFunc(cl.pool.Backends(), func(b *routing.Backend) bool { return count[b.ID] < per }); i++ {
		name := "tube-" + strconv.Itoa(i)
		if count[cl.owner(name)] < per {
			count[cl.owner(name)]++
			names = append(names, name)
		}
	}
	return names
}

// TestBeanstalkGatewayPutsLandOnOwner puts into tubes owned by each of
// three beanstalkd and the local engine and finds each job where the hash
// says, by asking that server directly.
func TestBeanstalkGatewayPutsLandOnOwner(t *testing.T) {
	t.Parallel()
	cl := bgwStart(t, 3, true)
	gc := bgwDial(t, cl.addr)
	direct := map[int]*gobeanstalk.Conn{}
	for id, addr := range cl.ups {
		direct[id] = bgwDial(t, addr)
	}
	for _, tube := range cl.tubesOnEveryBackend(3) {
		id, err := gobeanstalk.NewTube(gc, tube).Put([]byte("job in "+tube), 5, 0, time.Minute)
		must(t, err)
		be, up := split(id)
		if want := cl.owner(tube); be != want {
			t.Fatalf("tube %s: id %d names backend %d, the owner is %d", tube, id, be, want)
		}
		if be == routing.LocalID {
			// The local engine's ids pass unchanged; the gateway's own
			// stats-job shows where the job is.
			st, err := gc.StatsJob(id)
			must(t, err)
			if st["tube"] != tube {
				t.Fatalf("local job %d: tube %q, want %q", id, st["tube"], tube)
			}
			continue
		}
		st, err := direct[be].StatsJob(up)
		must(t, err)
		if st["tube"] != tube || st["state"] != "ready" {
			t.Fatalf("backend %d job %d: %v", be, up, st)
		}
	}
}

// TestBeanstalkGatewayFanIn has a worker watching tubes on every backend
// take all the jobs producers put: each exactly once.
func TestBeanstalkGatewayFanIn(t *testing.T) {
	t.Parallel()
	cl := bgwStart(t, 3, true)
	tubes := cl.tubesOnEveryBackend(2)
	const perTube = 6
	want := map[string]bool{}
	var wg sync.WaitGroup
	for p := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := gobeanstalk.DialTimeout("tcp", cl.addr, bsReplyTimeout)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			for i := range perTube / 2 {
				for _, tube := range tubes {
					if _, err := gobeanstalk.NewTube(c, tube).Put(fmt.Appendf(nil, "%s/%d/%d", tube, p, i), 1, 0, time.Minute); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
		for i := range perTube / 2 {
			for _, tube := range tubes {
				want[fmt.Sprintf("%s/%d/%d", tube, p, i)] = true
			}
		}
	}
	wg.Wait()
	got := map[string]int{}
	var mu sync.Mutex
	var workers sync.WaitGroup
	for range 2 {
		workers.Add(1)
		go func() {
			defer workers.Done()
			c, err := gobeanstalk.DialTimeout("tcp", cl.addr, bsReplyTimeout)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			ts := gobeanstalk.NewTubeSet(c, tubes...)
			// Work until every job came (or a deadline): a job a
			// cancelled upstream wait got is ready again only after that
			// upstream's reserve round, so a quiet second proves nothing.
			deadline := time.Now().Add(20 * time.Second)
			for time.Now().Before(deadline) {
				mu.Lock()
				n := len(got)
				mu.Unlock()
				if n == len(want) {
					return
				}
				id, body, err := ts.Reserve(time.Second)
				if errors.Is(err, gobeanstalk.ErrTimeout) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				got[string(body)]++
				mu.Unlock()
				if err := c.Delete(id); err != nil {
					t.Errorf("delete %d: %v", id, err)
					return
				}
			}
		}()
	}
	workers.Wait()
	for k := range want {
		if got[k] != 1 {
			t.Errorf("job %s delivered %d times", k, got[k])
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d distinct jobs delivered, %d put", len(got), len(want))
	}
	for id, addr := range cl.ups {
		st, err := bgwDial(t, addr).Stats()
		must(t, err)
		if st["current-jobs-ready"] != "0" || st["current-jobs-reserved"] != "0" {
			t.Errorf("backend %d still holds jobs: ready %s reserved %s", id, st["current-jobs-ready"], st["current-jobs-reserved"])
		}
	}
}

// TestBeanstalkGatewayIDsRoundTrip uses a gateway id with every command
// that takes one, on a tube of an upstream and one of the local engine.
func TestBeanstalkGatewayIDsRoundTrip(t *testing.T) {
	t.Parallel()
	cl := bgwStart(t, 2, true)
	c := bgwDial(t, cl.addr)
	for _, tube := range cl.tubesOnEveryBackend(1) {
		t.Run(fmt.Sprint("backend-", cl.owner(tube)), func(t *testing.T) {
			tb := gobeanstalk.NewTube(c, tube)
			ts := gobeanstalk.NewTubeSet(c, tube)
			id, err := tb.Put([]byte("x"), 7, 0, time.Minute)
			must(t, err)
			if be, _ := split(id); be != cl.owner(tube) {
				t.Fatalf("id %d names backend %d, want %d", id, be, cl.owner(tube))
			}
			rid, _, err := ts.Reserve(time.Second)
			must(t, err)
			if rid != id {
				t.Fatalf("reserved %d, put %d", rid, id)
			}
			must(t, c.Touch(id))
			must(t, c.Release(id, 9, 0))
			rid, _, err = ts.Reserve(time.Second)
			must(t, err)
			if rid != id {
				t.Fatalf("reserved %d after release, want %d", rid, id)
			}
			must(t, c.Bury(id, 3))
			pid, _, err := tb.PeekBuried()
			must(t, err)
			if pid != id {
				t.Fatalf("peek-buried %d, want %d", pid, id)
			}
			body, err := c.Peek(id)
			must(t, err)
			if string(body) != "x" {
				t.Fatalf("peek %d: %q", id, body)
			}
			st, err := c.StatsJob(id)
			must(t, err)
			if st["id"] != strconv.FormatUint(id, 10) || st["state"] != "buried" || st["pri"] != "3" || st["tube"] != tube {
				t.Fatalf("stats-job %d: %v", id, st)
			}
			must(t, c.KickJob(id))
			pid, _, err = tb.PeekReady()
			must(t, err)
			if pid != id {
				t.Fatalf("peek-ready %d, want %d", pid, id)
			}
			must(t, c.Delete(id))
			if err := c.Delete(id); !errors.Is(err, gobeanstalk.ErrNotFound) {
				t.Fatalf("second delete: %v", err)
			}
		})
	}
	// An id no backend holds is NOT_FOUND, as from beanstalkd.
	if err := c.Delete(uint64(999) << routing.UpstreamIDBits); !errors.Is(err, gobeanstalk.ErrNotFound) {
		t.Fatalf("delete of an unknown backend's id: %v", err)
	}
}

// TestBeanstalkGatewayStatsAggregate checks that stats, stats-tube and
// list-tubes add up the backends.
func TestBeanstalkGatewayStatsAggregate(t *testing.T) {
	t.Parallel()
	cl := bgwStart(t, 3, true)
	c := bgwDial(t, cl.addr)
	tubes := cl.tubesOnEveryBackend(1)
	for i, tube := range tubes {
		for range i + 1 {
			_, err := gobeanstalk.NewTube(c, tube).Put([]byte("s"), 1, 0, time.Minute)
			must(t, err)
		}
	}
	total := len(tubes) * (len(tubes) + 1) / 2
	st, err := c.Stats()
	must(t, err)
	if st["current-jobs-ready"] != strconv.Itoa(total) || st["total-jobs"] != strconv.Itoa(total) {
		t.Fatalf("stats: ready %s total %s, want %d", st["current-jobs-ready"], st["total-jobs"], total)
	}
	list, err := c.ListTubes()
	must(t, err)
	for _, tube := range append(tubes, "default") {
		if !slices.Contains(list, tube) {
			t.Fatalf("list-tubes %v lacks %s", list, tube)
		}
	}
	if st["current-tubes"] != strconv.Itoa(len(list)) {
		t.Fatalf("current-tubes %s, list-tubes has %d", st["current-tubes"], len(list))
	}
	last := gobeanstalk.NewTube(c, tubes[len(tubes)-1])
	ts, err := last.Stats()
	must(t, err)
	if ts["current-jobs-ready"] != strconv.Itoa(len(tubes)) {
		t.Fatalf("stats-tube: %v", ts)
	}
	// pause-tube reaches the backends of the pool that have the tube;
	// stats-tube shows the pause.
	must(t, last.Pause(time.Minute))
	if ts, err = last.Stats(); err != nil || ts["pause"] != "60" {
		t.Fatalf("stats-tube after pause: %v %v", ts, err)
	}
	if id := cl.owner(last.Name); id != routing.LocalID {
		if ts, err := gobeanstalk.NewTube(bgwDial(t, cl.ups[id]), last.Name).Stats(); err != nil || ts["pause"] != "60" {
			t.Fatalf("backend %d: stats-tube after pause: %v %v", id, ts, err)
		}
	}
	if _, err := gobeanstalk.NewTube(c, "never-used").Stats(); !errors.Is(err, gobeanstalk.ErrNotFound) {
		t.Fatalf("stats-tube of an unknown tube: %v", err)
	}
}

// TestBeanstalkGatewayKickAcrossBackends buries jobs of one tube on both
// backends of its pool (as puts failed over while the owner was down would
// leave them) and kicks them through the gateway: owner first, then the
// next, within the bound.
func TestBeanstalkGatewayKickAcrossBackends(t *testing.T) {
	t.Parallel()
	cl := bgwStart(t, 2, false)
	tube := cl.tubesOnEveryBackend(1)[0]
	owner := cl.owner(tube)
	other := 3 - owner
	// Two buried jobs on each backend, put there directly.
	for _, id := range []int{owner, other} {
		d := bgwDial(t, cl.ups[id])
		tb := gobeanstalk.NewTube(d, tube)
		ts := gobeanstalk.NewTubeSet(d, tube)
		for range 2 {
			_, err := tb.Put([]byte("k"), 1, 0, time.Minute)
			must(t, err)
			jid, _, err := ts.Reserve(time.Second)
			must(t, err)
			must(t, d.Bury(jid, 1))
		}
	}
	c := bgwDial(t, cl.addr)
	tb := gobeanstalk.NewTube(c, tube)
	n, err := tb.Kick(3)
	must(t, err)
	if n != 3 {
		t.Fatalf("kick 3 kicked %d", n)
	}
	if n, err = tb.Kick(10); err != nil || n != 1 {
		t.Fatalf("kick 10 kicked %d, %v; want the last one", n, err)
	}
	if _, _, err := tb.PeekBuried(); !errors.Is(err, gobeanstalk.ErrNotFound) {
		t.Fatalf("peek-buried after kicking all: %v", err)
	}
	st, err := tb.Stats()
	must(t, err)
	if st["current-jobs-ready"] != "4" {
		t.Fatalf("stats-tube after kicks: %v", st)
	}
}
