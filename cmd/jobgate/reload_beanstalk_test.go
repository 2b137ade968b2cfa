package main

import (
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/beanstalkd/go-beanstalk"

	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/routing"
)

// TestReloadBeanstalkRoutes runs the binary as a Beanstalk gateway in
// front of two beanstalkd and moves a route with SIGHUP: the go-beanstalk
// connection open across the reload puts to the new backend afterwards,
// and still deletes the job it reserved on the old one.
func TestReloadBeanstalkRoutes(t *testing.T) {
	b1, b2 := testutil.StartBeanstalkd(t), testutil.StartBeanstalkd(t)
	path := writeFile(t, "bgw.yaml", gatewayYAML("beanstalk", b1, b2, "b1"))
	p := startJobgate(t, 2, "-config", path)
	c, err := beanstalk.DialTimeout("tcp", p.addrs["beanstalk"], 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tube := beanstalk.NewTube(c, "moved.a")
	id, err := tube.Put([]byte("x"), 1, 0, time.Minute)
	if err != nil || id>>routing.UpstreamIDBits != 1 {
		t.Fatalf("before the reload: id %d, %v", id, err)
	}
	got, _, err := beanstalk.NewTubeSet(c, "moved.a").Reserve(5 * time.Second)
	if err != nil || got != id {
		t.Fatalf("reserve: %d %v", got, err)
	}
	if err := os.WriteFile(path, []byte(gatewayYAML("beanstalk", b1, b2, "b2")), 0o644); err != nil {
		t.Fatal(err)
	}
	p.cmd.Process.Signal(syscall.SIGHUP)
	deadline := time.Now().Add(10 * time.Second)
	for { // SIGHUP is handled asynchronously
		id2, err := tube.Put([]byte("y"), 1, 0, time.Minute)
		if err != nil {
			t.Fatalf("put during the reload: %v", err)
		}
		if id2>>routing.UpstreamIDBits == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still routed to backend %d after SIGHUP", id2>>routing.UpstreamIDBits)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := c.Delete(id); err != nil {
		t.Fatalf("delete of the job reserved before the reload: %v", err)
	}
	if code, body := getAdmin(t, p.addrs["admin"], "/readyz?verbose"); code != http.StatusOK {
		t.Errorf("/readyz after the reload: %d %q", code, body)
	}
}
