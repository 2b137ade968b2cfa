package connlimit_test

import (
	"bufio"
	"io"
	"net"
	"time"

	"github.com/jobgate/jobgate/jobserver/clock"
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
	// Replies go through a Writer: a client that stops reading is cut off
	// at limits.write_buffer_limit or after limits.write_timeout without
	// progress. In proxy the codec's Writer wraps it.
	w := connlimit.NewWriter(c, connlimit.WriterOptions{
		Limit:        16 << 20,
		WriteTimeout: 30 * time.Second,
		OnCutoff:     func(r connlimit.Reason) { conns.Cut(r.String()) },
	})
	defer w.Abort()
	// limits.idle_timeout: closing the connection ends the read below.
	idle := connlimit.NewIdle(clock.Real{}, 5*time.Minute, func() {
		conns.Cut(connlimit.ReasonIdle.String())
		c.Close()
	})
	defer idle.Stop()

	r := bufio.NewReader(c)
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return
		}
		idle.Touch()
		// A reserve that waits, or a job held reserved, is pending: the
		// connection is not idle until the matching End (reply sent,
		// job deleted/released/buried).
		idle.Begin()
		w.Write(line) // the reply, in request order
		idle.End()
	}
}
