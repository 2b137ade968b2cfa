package main

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// TestGearmanAdminShutdownStopsProcess: with -gearman-admin-shutdown, the
// admin command "shutdown graceful" answers OK and the process drains and
// exits 0 by itself, as on SIGTERM.
func TestGearmanAdminShutdownStopsProcess(t *testing.T) {
	p := startJobgate(t, 1, "-gearman", "127.0.0.1:0", "-beanstalk", "", "-admin", "", "-data", "",
		"-gearman-admin-shutdown")
	nc, err := net.DialTimeout("tcp", p.addrs["gearman"], 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := nc.Write([]byte("shutdown graceful\n")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(nc).ReadString('\n')
	if err != nil || line != "OK\r\n" {
		t.Fatalf("shutdown graceful: %q, %v", line, err)
	}
	if err := waitExit(t, p, 30*time.Second); err != nil {
		t.Fatalf("exit after the admin shutdown: %v", err)
	}
}
