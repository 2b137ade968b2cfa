package main

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestOTLPSinkCountsBodies posts bodies smaller and larger than the read
// buffer, and a chunked one, over one keep-alive connection and checks
// the replies and what the sink counted.
func TestOTLPSinkCountsBodies(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sink := newOTLPSink()
	srv := &http.Server{Handler: sink}
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(l) }()
	defer func() { srv.Close(); <-done }()

	client := &http.Client{Timeout: 10 * time.Second}
	url := "http://" + l.Addr().String() + "/v1/traces"
	sizes := []int{0, 1, 100 << 10, sinkReadSize + 12345}
	var want int64
	for _, n := range sizes {
		body := bytes.Repeat([]byte{0xa5}, n)
		resp, err := client.Post(url, "application/x-protobuf", bytes.NewReader(body))
		if err != nil {
			t.Fatalf("post %d bytes: %v", n, err)
		}
		reply, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || len(reply) != 0 || resp.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Fatalf("post %d bytes: status %d, %d reply bytes, content type %q", n, resp.StatusCode, len(reply), resp.Header.Get("Content-Type"))
		}
		want += int64(n)
	}
	// A body of unknown length goes chunked.
	resp, err := client.Post(url, "application/x-protobuf", io.MultiReader(bytes.NewReader(make([]byte, 5000)), bytes.NewReader(make([]byte, 7))))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	want += 5007
	if got := sink.requests.Load(); got != int64(len(sizes)+1) {
		t.Errorf("requests = %d, want %d", got, len(sizes)+1)
	}
	if got := sink.bytes.Load(); got != want {
		t.Errorf("bytes = %d, want %d", got, want)
	}
}
