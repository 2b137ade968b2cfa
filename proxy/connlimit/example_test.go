package connlimit_test

import (
	"io"
	"net"

	"github.com/jobgate/jobgate/metrics"
	"github.com/jobgate/jobgate/proxy/connlimit"
)

// The shape of a Beanstalk listener and connection loop with every limit
// from config.Limits applied. (Compiled, not run: it needs a client.)
func Example() {
	m := metrics.New(metrics.Options{})
	conns := m.Conns(metrics.Beanstalk)

	raw, _ := net.Listen("tcp", ":11300")
	l := connlimit.NewListener(raw, connlimit.Options{
		MaxConns: 10000, // limits.max_connections
		MaxPerIP: 0,     // limits.max_connections_per_ip
		Reject: func(c net.Conn, _ connlimit.Reason) {
			io.WriteString(c, "OUT_OF_MEMORY\r\n") // nil on a TLS listener
		},
		OnReject: func(_ net.Addr, r connlimit.Reason) { conns.Rejected(r.String()) },
		OnOpen:   conns.Opened,
		OnClose:  conns.Closed,
	})
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go serve(c, conns)
	}
}

func serve(c net.Conn, conns *metrics.ConnSeries) {
	defer c.Close()
	// The timeouts (limits.idle_timeout, read_timeout, write_timeout) are
	// the protocol layer's: proxy's sweeper cuts the connection off and
	// counts it with conns.Cut(reason).
	io.Copy(io.Discard, c)
}
