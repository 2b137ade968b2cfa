//go:build !unix

package main

import "net"

// Elsewhere the sink serves its connections through the runtime's poller.
const sinkMaxConns = 1 << 10

// prepareSinkRuntime leaves the runtime as it is.
func prepareSinkRuntime() {}

// newSinkConn serves c as it is.
func newSinkConn(c net.Conn) (sinkConn, error) { return netSinkConn{c}, nil }

// netSinkConn is a connection served through the runtime's poller.
type netSinkConn struct{ net.Conn }

func (c netSinkConn) shutdown() { c.Conn.Close() }

func (c netSinkConn) close() { c.Conn.Close() }
