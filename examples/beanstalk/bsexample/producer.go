// Package bsexample is the code behind the example Beanstalk programs
// examples/beanstalk/producer and examples/beanstalk/worker, written on the
// third-party client github.com/beanstalkd/go-beanstalk, as an application
// would. The programs' mains only parse flags and call Produce and Work; the
// tests call the same functions in-process.
//
// A job's life in beanstalkd's protocol: put into a tube (ready, or delayed
// for a while first), reserved by one worker for at most its TTR
// (time-to-run), then deleted when done, released back to the tube
// (possibly with a delay) to be tried again, or buried: set aside until an
// operator kicks it.
package bsexample

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/beanstalkd/go-beanstalk"
)

// ProducerConfig configures Produce.
type ProducerConfig struct {
	// Addr is the server's host:port.
	Addr string
	// Tube is the tube to put the jobs in. Default "default".
	Tube string
	// N is how many jobs to put.
	N int
	// Body is the jobs' body, a fmt format given the job's number (from 1):
	// "hello %d" makes "hello 1", "hello 2", ... A body without a % is
	// used as is. Default "job %d".
	Body string
	// Priority is the jobs' priority: 0 is the most urgent, 4294967295 the
	// least; beanstalkd's clients default to 1024.
	Priority uint32
	// Delay keeps each job out of the ready queue for this long after the
	// put. Beanstalk counts in whole seconds, so it is rounded down.
	Delay time.Duration
	// TTR is how long a worker may hold a job before the server gives it to
	// another one; at least 1s. Default 60s.
	TTR time.Duration
}

// Produce puts cfg.N jobs into cfg.Tube and prints one line per job to out:
// its id and body. It returns the ids in order.
func Produce(ctx context.Context, cfg ProducerConfig, out io.Writer) (ids []uint64, err error) {
	if cfg.Tube == "" {
		cfg.Tube = "default"
	}
	if cfg.Body == "" {
		cfg.Body = "job %d"
	}
	if cfg.TTR == 0 {
		cfg.TTR = 60 * time.Second
	}
	conn, err := dial(ctx, cfg.Addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	defer func() { err = cause(ctx, err) }()

	// A Tube value "uses" its tube: the client sends "use" before the
	// first put and whenever another tube was used in between.
	tube := beanstalk.NewTube(conn.Conn, cfg.Tube)
	for i := 1; i <= cfg.N; i++ {
		body := cfg.Body
		if strings.Contains(body, "%") {
			body = fmt.Sprintf(body, i)
		}
		id, err := tube.Put([]byte(body), cfg.Priority, cfg.Delay, cfg.TTR)
		if err != nil {
			return ids, fmt.Errorf("put %q: %w", body, err)
		}
		ids = append(ids, id)
		fmt.Fprintf(out, "put %d %q\n", id, body)
	}
	return ids, nil
}

// conn is a go-beanstalk connection whose Close also drops the context
// hook installed by dial.
type conn struct {
	*beanstalk.Conn
	stop func() bool
}

// Close closes the connection.
func (c conn) Close() error {
	c.stop()
	return c.Conn.Close()
}

// dial connects to a Beanstalk server. go-beanstalk's commands take no
// context, so cancelling ctx closes the connection instead, which makes a
// command blocked on it (a reserve waiting for a job) return at once.
func dial(ctx context.Context, addr string) (conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return conn{}, cause(ctx, err)
	}
	return conn{
		Conn: beanstalk.NewConn(nc),
		stop: context.AfterFunc(ctx, func() { nc.Close() }),
	}, nil
}

// cause returns ctx's error instead of err once ctx is done: cancelling ctx
// closes the connection, so the error seen is then "use of closed network
// connection", which hides why.
func cause(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}
