package main

import (
	"bufio"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
)

// TestBinaryEnforcesAuth runs the binary with an auth section (a token
// file identity and a loopback CIDR identity) and checks both protocols:
// the CIDR client may produce to "jobs" only, the token client may consume
// it, and admin commands are denied; -auth-max-bad-tokens applies.
func TestBinaryEnforcesAuth(t *testing.T) {
	dir := t.TempDir()
	const token = "binary-test-token-0123456789"
	tokens := filepath.Join(dir, "worker.tokens")
	if err := os.WriteFile(tokens, []byte("# the worker's token\n"+token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgFile := writeFile(t, "auth.yaml", `
auth:
  enabled: true
  identities:
    - name: worker
      tokens_file: `+tokens+`
    - name: local
      cidrs: ["127.0.0.1/32"]
  rules:
    - identity: local
      produce: ["jobs"]
    - identity: worker
      consume: ["jobs"]
`)
	p := startJobgate(t, 2, "-config", cfgFile, "-gearman", "127.0.0.1:0", "-beanstalk", "127.0.0.1:0", "-admin", "", "-data", "", "-auth-max-bad-tokens", "1")

	_, _, say := lineDial(t, p.addrs["beanstalk"])
	say("put 0 0 60 1\r\na\r\n", "NOT_FOUND\r\n")
	say("use jobs\r\n", "USING jobs\r\n")
	say("put 0 0 60 1\r\nb\r\n", "INSERTED 1\r\n")
	say("stats\r\n", "NOT_FOUND\r\n")
	say("watch jobs\r\n", "WATCHING 2\r\n")
	say("reserve-with-timeout 0\r\n", "NOT_FOUND\r\n")
	say("use jobgate-auth."+token+"\r\n", "USING jobgate-auth."+token+"\r\n")
	say("reserve-with-timeout 0\r\n", "RESERVED 1 1\r\nb\r\n")
	say("delete 1\r\n", "DELETED\r\n")

	// -auth-max-bad-tokens 1: the first unknown token closes the connection.
	bad, badr, _ := lineDial(t, p.addrs["beanstalk"])
	io.WriteString(bad, "use jobgate-auth.not-the-token-0123456789\r\n")
	if line, err := badr.ReadString('\n'); err == nil {
		t.Fatalf("unknown token answered %q, want the connection closed", line)
	}

	gm, gr, _ := lineDial(t, p.addrs["gearman"])
	gm.Write(codec.AppendPacket(nil, codec.Req, codec.SubmitJobBg, []byte("secret"), nil, []byte("x")))
	var hdr [codec.HeaderSize]byte
	if _, err := io.ReadFull(gr, hdr[:]); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, int(hdr[8])<<24|int(hdr[9])<<16|int(hdr[10])<<8|int(hdr[11]))
	io.ReadFull(gr, body)
	if codec.Type(hdr[7]) != codec.Error || !strings.HasPrefix(string(body), "PERMISSION_DENIED\x00") {
		t.Fatalf("denied submit answered type %d %q", hdr[7], body)
	}
	io.WriteString(gm, "status\n")
	if line, err := gr.ReadString('\n'); err != nil || !strings.HasPrefix(line, "ERR PERMISSION_DENIED ") {
		t.Fatalf("status answered %q %v", line, err)
	}
}

// lineDial connects to addr for the rest of the test (10s deadline) and
// returns the connection, its reader, and say, which sends a command and
// requires the reply lines want, byte for byte.
func lineDial(t *testing.T, addr string) (net.Conn, *bufio.Reader, func(send, want string)) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	return c, br, func(send, want string) {
		t.Helper()
		io.WriteString(c, send)
		var got string
		for range strings.Count(want, "\n") {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("%q: %v after %q", send, err, got)
			}
			got += line
		}
		if got != want {
			t.Fatalf("%q: got %q, want %q", send, got, want)
		}
	}
}
