package main

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	wire "github.com/jobgate/jobgate/codec/beanstalk"
)

// runGoroutines drives each connection from its own goroutine with
// blocking reads and writes: the portable way, and the costlier one.
func (b *beanstalkBench) runGoroutines(ws []*bsWorker) error {
	errs := make(chan error, len(ws))
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			switch w.role {
			case rolePut:
				err = b.putWorker(w.c, &w.hist)
			case rolePipelined:
				err = b.pipelinedWorker(w.c, &w.hist)
			case roleConsume:
				err = b.consumeWorker(w.c, &w.hist)
			}
			if err != nil {
				b.abort.Store(true)
				// Unblock the others: a consumer may wait in a reserve.
				for _, o := range ws {
					o.c.nc.SetDeadline(time.Now())
				}
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	var first error
	for err := range errs {
		if err != nil && (first == nil || errors.Is(first, os.ErrDeadlineExceeded)) {
			first = err
		}
	}
	return first
}

func (b *beanstalkBench) putWorker(c *beanstalkClient, lat *hdrHist) error {
	for b.more(1) {
		t0 := time.Now()
		if _, err := c.put(); err != nil {
			return err
		}
		lat.record(time.Since(t0))
		if b.workload != "cycle" {
			b.done.Add(1)
		}
	}
	return nil
}

func (b *beanstalkBench) pipelinedWorker(c *beanstalkClient, lat *hdrHist) error {
	for b.more(int64(b.pipeline)) {
		t0 := time.Now()
		for range b.pipeline {
			c.cmd = wire.Command{Verb: wire.Put, Pri: 1024, TTR: 120, Body: c.body}
			c.w.WriteCommand(&c.cmd)
		}
		if err := c.w.Flush(); err != nil {
			return err
		}
		for range b.pipeline {
			if err := c.expect(wire.Inserted); err != nil {
				return err
			}
		}
		lat.record(time.Since(t0))
		b.done.Add(int64(b.pipeline))
	}
	return nil
}

// consumeWorker reserves and deletes. It stops when the run is over: -n
// jobs done, the tube empty (reserve-delete), or the time up and nothing
// left to take (cycle drains what the producers put).
func (b *beanstalkBench) consumeWorker(c *beanstalkClient, lat *hdrHist) error {
	timeout := uint32(0)
	if b.workload == "cycle" {
		timeout = 1
	}
	for !b.abort.Load() {
		if b.n > 0 && b.done.Load() >= b.n {
			return nil
		}
		if b.n == 0 && b.stop.Load() && b.workload != "cycle" {
			if b.keep {
				return nil
			}
			return c.drain() // leave the server as we found it
		}
		t0 := time.Now()
		// A timed cycle's consumers drain the backlog after the stop:
		// not part of the measured run (see beanstalkBench.afterStop).
		late := b.afterStop()
		c.cmd = wire.Command{Verb: wire.ReserveWithTimeout, Timeout: timeout}
		r, err := c.roundTrip()
		if err != nil {
			return err
		}
		switch r.Kind {
		case wire.TimedOut:
			if b.workload != "cycle" || b.stop.Load() || (b.n > 0 && b.claimed.Load() >= b.n) {
				return nil
			}
			continue
		case wire.Reserved:
		default:
			return fmt.Errorf("reserve: %s", r.Kind)
		}
		c.cmd = wire.Command{Verb: wire.Delete, ID: r.ID}
		if _, err := c.roundTrip(); err != nil {
			return err
		}
		if !late {
			lat.record(time.Since(t0))
		}
		if b.done.Add(1) == b.n {
			b.endAt.Store(time.Now().UnixNano())
		}
	}
	return nil
}
