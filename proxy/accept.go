package proxy

import (
	"errors"
	"log/slog"
	"net"
	"time"
)

// acceptLoop accepts connections on l and hands each to serve until
// closed reports that l was closed on purpose (Shutdown, a drain), then
// returns nil; serve returning false (the server began shutting down)
// closes the connection and returns nil too. Other accept errors, such as
// running out of file descriptors, are logged as proto's and retried
// after a delay doubling from 5 ms to 1 s, as net/http does, so that the
// connections already open keep their service and the listener is not
// given up; l closed by someone else ends the loop with that error.
func acceptLoop(l net.Listener, proto string, log *slog.Logger, closed func() bool, serve func(net.Conn) bool) error {
	var delay time.Duration
	for {
		nc, err := l.Accept()
		if err != nil {
			if closed() {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			log.Warn(proto+" accept", "err", err, "retry_in", delay)
			time.Sleep(delay)
			continue
		}
		delay = 0
		if !serve(nc) {
			nc.Close()
			return nil
		}
	}
}
