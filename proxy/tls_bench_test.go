package proxy_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"strconv"
	"testing"
	"time"

	gmcodec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/proxy"
)

// BenchmarkTLSConnect measures a new connection and its first Gearman
// ECHO, plain against TLS (a full TLS 1.3 handshake with an ECDSA P-256
// certificate, no session resumption), one connection at a time:
// conns/s is the handshake rate a single client gets.
//
//	go test -run '^$' -bench 'TLSConnect|TLSEcho' -benchtime 2s ./proxy/
func BenchmarkTLSConnect(b *testing.B) {
	f := startTLSFixture(b, tlsFixtureOptions{})
	conf := f.clientConf()
	conf.ClientSessionCache = nil
	for _, mode := range []string{"plain", "tls"} {
		b.Run(mode, func(b *testing.B) {
			start := time.Now()
			for b.Loop() {
				var nc net.Conn
				var err error
				if mode == "plain" {
					nc, err = net.DialTimeout("tcp", f.gearmanPlain, tlsTimeout)
				} else {
					nc, err = tls.DialWithDialer(&net.Dialer{Timeout: tlsTimeout}, "tcp", f.gearmanTLS, conf)
				}
				if err != nil {
					b.Fatal(err)
				}
				nc.SetDeadline(time.Now().Add(tlsTimeout))
				if err := echo(nc, "x"); err != nil {
					b.Fatal(err)
				}
				nc.Close()
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "conns/s")
		})
	}
}

// BenchmarkTLSEcho measures Gearman ECHO round trips on one connection,
// plain against TLS, for a small and a large payload: the cost of the
// record layer once the handshake is done. TLS connections are served by
// goroutines, plain ones by the epoll loop; "plain-goroutines" is a plain
// connection to a server in goroutine mode, which separates the cost of
// TLS from that of the serving mode.
func BenchmarkTLSEcho(b *testing.B) {
	f := startTLSFixture(b, tlsFixtureOptions{})
	gs, err := proxy.NewGearmanServer(proxy.GearmanConfig{Goroutines: true})
	if err != nil {
		b.Fatal(err)
	}
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go gs.Serve(gl)
	b.Cleanup(func() { gs.Shutdown(context.Background()) })
	for _, size := range []int{64, 64 << 10} {
		payload := bytes.Repeat([]byte("j"), size)
		for _, mode := range []string{"plain", "plain-goroutines", "tls"} {
			b.Run(mode+"/"+byteSize(size), func(b *testing.B) {
				var nc net.Conn
				var err error
				switch mode {
				case "plain":
					nc, err = net.DialTimeout("tcp", f.gearmanPlain, tlsTimeout)
				case "plain-goroutines":
					nc, err = net.DialTimeout("tcp", gl.Addr().String(), tlsTimeout)
				default:
					nc, err = dialTLS(b, f.gearmanTLS, f.clientConf())
				}
				if err != nil {
					b.Fatal(err)
				}
				defer nc.Close()
				nc.SetDeadline(time.Time{})
				r, w := gmcodec.NewReader(nc, gmcodec.Limits{}), gmcodec.NewWriter(nc)
				b.SetBytes(int64(2 * size))
				for b.Loop() {
					w.WritePacket(gmcodec.Req, gmcodec.EchoReq, payload)
					if err := w.Flush(); err != nil {
						b.Fatal(err)
					}
					fr, err := r.ReadFrame()
					if err != nil || fr.Packet.Type != gmcodec.EchoRes || len(fr.Packet.Data()) != size {
						b.Fatalf("%v %s", err, fr.String())
					}
				}
			})
		}
	}
}

func byteSize(n int) string {
	if n >= 1<<10 {
		return strconv.Itoa(n>>10) + "KiB"
	}
	return strconv.Itoa(n) + "B"
}
