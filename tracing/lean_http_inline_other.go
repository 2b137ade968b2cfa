//go:build !linux

package tracing

import "net"

// canWriteNow is false: inline sends are for Linux only, where writeNow's
// raw writev is known to work; elsewhere the export goroutine sends every
// batch.
const canWriteNow = false

// writeNow cannot write without waiting here; inline sends never begin.
func writeNow(net.Conn, []byte, []byte) (int, error) { return 0, nil }
