package testutil

import (
	"bufio"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

func TestStartBeanstalkdAnswers(t *testing.T) {
	addr := StartBeanstalkd(t)
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("list-tube-used\r\n")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != "USING default\r\n" {
		t.Fatalf("got %q, %v", line, err)
	}
}

func TestStartGearmandAnswers(t *testing.T) {
	addr := StartGearmand(t)
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("version\n")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "OK ") {
		t.Fatalf("got %q, %v", line, err)
	}
}

func TestListenerOwnerFindsThisProcess(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	if err := CheckListener(port, os.Getpid()); err != nil {
		t.Fatal(err)
	}
	if err := CheckListener(port, os.Getpid()+1); err == nil {
		t.Fatal("another pid accepted as the owner")
	}
}
