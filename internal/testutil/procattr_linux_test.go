//go:build linux

package testutil

import (
	"fmt"
	"net"
	"os"
	"testing"
	"time"
)

// TestServerDiesWithTestBinary: a server started by a test process that is
// killed (as by a panic or a -timeout) goes too, instead of holding its
// port for the rest of the run.
func TestServerDiesWithTestBinary(t *testing.T) {
	RequireBinary(t, "beanstalkd")
	child := StartChild(t, "TestHelperStartsBeanstalkd", "JOBGATE_TESTUTIL_HELPER", "1")
	if nc, err := net.DialTimeout("tcp", child.Addr, 5*time.Second); err != nil {
		t.Fatalf("beanstalkd started by the child does not answer: %v", err)
	} else {
		nc.Close()
	}
	child.Kill()
	deadline := time.Now().Add(10 * time.Second)
	for {
		nc, err := net.DialTimeout("tcp", child.Addr, time.Second)
		if err != nil {
			return // refused: the server is gone
		}
		nc.Close()
		if time.Now().After(deadline) {
			t.Fatal("beanstalkd still serves after the test process that started it was killed")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestHelperStartsBeanstalkd is run by TestServerDiesWithTestBinary in a
// child process: it starts a beanstalkd, says where, and waits to be
// killed.
func TestHelperStartsBeanstalkd(t *testing.T) {
	if os.Getenv("JOBGATE_TESTUTIL_HELPER") == "" {
		t.Skip("helper for TestServerDiesWithTestBinary")
	}
	fmt.Printf("ADDR %s\n", StartBeanstalkd(t))
	time.Sleep(time.Minute)
}
