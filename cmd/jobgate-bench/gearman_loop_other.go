//go:build !linux

package main

// runLoops falls back to goroutines where there is no epoll.
func (b *gearmanBench) runLoops(conns []benchConn) error {
	var workers []*benchWorker
	var clients []*benchClient
	for _, c := range conns {
		switch c := c.(type) {
		case *benchWorker:
			workers = append(workers, c)
		case *benchClient:
			clients = append(clients, c)
		}
	}
	return b.runGoroutines(workers, clients)
}
