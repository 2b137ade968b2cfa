package main

import (
	"errors"
	"testing"

	"github.com/beanstalkd/go-beanstalk"

	codec "github.com/jobgate/jobgate/codec/gearman"
)

// TestMaxConnectionsAcrossListeners runs the binary with
// -limits-max-connections 2: one Gearman and one Beanstalk client fill it,
// so a second Beanstalk client reads OUT_OF_MEMORY (go-beanstalk: ErrOOM).
func TestMaxConnectionsAcrossListeners(t *testing.T) {
	p := startJobgate(t, 2, "-gearman", "127.0.0.1:0", "-beanstalk", "127.0.0.1:0", "-admin", "", "-data", "",
		"-limits-max-connections", "2")
	gm := gmDial(t, p.addrs["gearman"])
	if pk := gm.ask(t, codec.EchoReq, "hi"); pk.Type != codec.EchoRes {
		t.Fatalf("gearman echo: %v", pk.Type)
	}
	first, err := beanstalk.Dial("tcp", p.addrs["beanstalk"])
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if _, err := first.ListTubes(); err != nil {
		t.Fatalf("second connection in all: %v", err)
	}
	over, err := beanstalk.Dial("tcp", p.addrs["beanstalk"])
	if err != nil {
		t.Fatal(err)
	}
	defer over.Close()
	if _, err := over.ListTubes(); !errors.Is(err, beanstalk.ErrOOM) {
		t.Fatalf("third connection in all: %v, want OUT_OF_MEMORY", err)
	}
}
