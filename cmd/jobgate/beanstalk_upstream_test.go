package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/proxy"
	"github.com/jobgate/jobgate/routing"
)

// bsLine sends one command (with its body, if any) and returns the reply
// line and, for OK/RESERVED/FOUND, the body.
func bsLine(t *testing.T, nc net.Conn, br *bufio.Reader, cmd string) (string, string) {
	t.Helper()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := nc.Write([]byte(cmd)); err != nil {
		t.Fatal(err)
	}
	line, err := br.ReadString('\n')
	if err != nil {
		t.Fatalf("%q: %v", cmd, err)
	}
	f := strings.Fields(line)
	if len(f) >= 2 && (f[0] == "OK" || f[0] == "RESERVED" || f[0] == "FOUND") {
		n, _ := strconv.Atoi(f[len(f)-1])
		body := make([]byte, n+2)
		if _, err := io.ReadFull(br, body); err != nil {
			t.Fatal(err)
		}
		return line, string(body[:n])
	}
	return line, ""
}

// TestBeanstalkUpstreamFlag runs the one-line gateway in front of two real
// beanstalkd: puts into many tubes land on both, each on the server its id
// names, and a worker watching every tube gets them all back.
func TestBeanstalkUpstreamFlag(t *testing.T) {
	ups := []string{testutil.StartBeanstalkd(t), testutil.StartBeanstalkd(t)}
	p := startJobgate(t, 1, "-gearman", "", "-beanstalk", "127.0.0.1:0", "-admin", "", "-data", "",
		"-beanstalk-upstream", strings.Join(ups, ","))
	nc, err := net.Dial("tcp", p.addrs["beanstalk"])
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	br := bufio.NewReader(nc)
	direct := make([]*bufio.Reader, len(ups))
	dconns := make([]net.Conn, len(ups))
	for i, a := range ups {
		if dconns[i], err = net.Dial("tcp", a); err != nil {
			t.Fatal(err)
		}
		defer dconns[i].Close()
		direct[i] = bufio.NewReader(dconns[i])
	}
	const tubes = 12
	perBackend := map[int]int{}
	ids := map[string]uint64{}
	for i := range tubes {
		tube := fmt.Sprintf("flag-%d", i)
		bsLine(t, nc, br, "use "+tube+"\r\n")
		line, _ := bsLine(t, nc, br, "put 1 0 60 4\r\nbody\r\n")
		var id uint64
		if _, err := fmt.Sscanf(line, "INSERTED %d\r\n", &id); err != nil {
			t.Fatalf("put into %s: %q", tube, line)
		}
		backend, up := int(id>>routing.UpstreamIDBits), id&routing.MaxUpstreamID
		pos := backend - config.UpstreamBeanstalkIDBase - 1
		if pos < 0 || pos >= len(ups) {
			t.Fatalf("id %d names backend %d", id, backend)
		}
		perBackend[pos]++
		line, body := bsLine(t, dconns[pos], direct[pos], "stats-job "+strconv.FormatUint(up, 10)+"\r\n")
		if !strings.HasPrefix(line, "OK ") || !strings.Contains(body, "tube: \""+tube+"\"") && !strings.Contains(body, "tube: "+tube+"\n") {
			t.Fatalf("job %d of %s is not on server %d: %q %q", id, tube, pos+1, line, body)
		}
		ids[tube] = id
	}
	if len(perBackend) != len(ups) {
		t.Fatalf("every tube went to one server: %v", perBackend)
	}
	for tube := range ids {
		bsLine(t, nc, br, "watch "+tube+"\r\n")
	}
	for range ids {
		line, _ := bsLine(t, nc, br, "reserve-with-timeout 5\r\n")
		var id uint64
		if _, err := fmt.Sscanf(line, "RESERVED %d 4\r\n", &id); err != nil {
			t.Fatalf("reserve: %q", line)
		}
		if line, _ := bsLine(t, nc, br, "delete "+strconv.FormatUint(id, 10)+"\r\n"); line != "DELETED\r\n" {
			t.Fatalf("delete %d: %q", id, line)
		}
	}
	if line, _ := bsLine(t, nc, br, "reserve-with-timeout 0\r\n"); line != "TIMED_OUT\r\n" {
		t.Fatalf("after draining: %q", line)
	}
}

// TestBeanstalkShardingExample checks that the sharding example passes
// check-config and builds a gateway (nothing is dialled until a client
// comes).
func TestBeanstalkShardingExample(t *testing.T) {
	const file = "../../examples/config/beanstalk-sharding.yaml"
	var out, errs strings.Builder
	if code := run([]string{"check-config", file}, &out, &errs); code != 0 {
		t.Fatalf("check-config: exit %d: %s", code, errs.String())
	}
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	g, err := proxy.NewBeanstalkGatewayFromConfig(cfg, nil)
	if err != nil || g == nil {
		t.Fatalf("gateway: %v %v", g, err)
	}
	for tube, want := range map[string]string{"local.x": "local", "mail": "mail", "anything": "tubes"} {
		if p := g.Rules.Match([]byte(tube)); p == nil || p.Name() != want {
			t.Errorf("tube %s routed to %v, want pool %s", tube, p, want)
		}
	}
}

// TestBothUpstreamFlags: -gearman-upstream and -beanstalk-upstream make one
// configuration with both gateways, ids apart.
func TestBothUpstreamFlags(t *testing.T) {
	var stderr strings.Builder
	cfg, code := parseCommandLine([]string{"-gearman-upstream", "127.0.0.1:4731,127.0.0.1:4732",
		"-beanstalk-upstream", "127.0.0.1:11301"}, &stderr)
	if cfg == nil || code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if cfg.Routes.GearmanDefault != config.UpstreamGearmanPool || cfg.Routes.BeanstalkDefault != config.UpstreamBeanstalkPool {
		t.Fatalf("defaults %q %q", cfg.Routes.GearmanDefault, cfg.Routes.BeanstalkDefault)
	}
	var ids []int
	for _, b := range cfg.Backends {
		ids = append(ids, b.ID)
	}
	if fmt.Sprint(ids) != "[1 2 513]" {
		t.Fatalf("backend ids %v", ids)
	}
}
