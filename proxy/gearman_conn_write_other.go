//go:build !unix

package proxy

// writeNow writes nothing here: without a non-blocking write(2) through
// the runtime's poller, the connection's writer goroutine writes it all.
func (c *gearmanConn) writeNow([]byte) (int, error) { return 0, nil }
