package uring

import (
	"syscall"
	"unsafe"

	"github.com/jobgate/jobgate/internal/epoll"
)

// maxEntries is the most operations one io_uring_enter submits; a larger
// batch takes several.
const maxEntries = 256

// dontWait is every operation's MSG_DONTWAIT; tests take it away to see
// what a kernel that parks an operation instead of answering EAGAIN does.
var dontWait uint32 = syscall.MSG_DONTWAIT

type opKind uint8

const (
	opRead opKind = iota
	opReadv
	opWrite
	opWritev
)

// op is one queued operation and, after Run, its result.
type op struct {
	kind   opKind
	fd     int
	a, b   []byte          // the buffers of Read, Write and Readv
	iov    []syscall.Iovec // Writev's
	vec    [2]syscall.Iovec
	msg    syscall.Msghdr
	n      int
	err    error
	done   bool // has its result
	reaped bool // the ring posted its completion
}

// Batch queues reads and writes on non-blocking sockets and runs them
// together. Owned by one goroutine. The buffers handed to it must not be
// touched until Run returns; it holds none of them after that.
type Batch struct {
	ring *ring
	ops  []op
	run  int // ops[:run] have run
}

// New returns a batch, with an io_uring instance unless Disable was
// called or the kernel refuses one.
func New() *Batch {
	b := &Batch{}
	if !disabled.Load() {
		b.ring, _ = newRing(maxEntries)
	}
	return b
}

// Close releases the ring.
func (b *Batch) Close() {
	if b.ring != nil {
		b.ring.close()
		b.ring = nil
	}
}

// Ring reports whether the batch runs on io_uring.
func (b *Batch) Ring() bool { return b.ring != nil }

// Reset forgets every operation and its result.
func (b *Batch) Reset() {
	clear(b.ops)
	b.ops, b.run = b.ops[:0], 0
}

// add queues o; one with nothing to move is done at once, as the plain
// calls return (0, nil) for it without a system call.
func (b *Batch) add(o op) int {
	o.done = len(o.a) == 0 && len(o.b) == 0 && len(o.iov) == 0
	b.ops = append(b.ops, o)
	return len(b.ops) - 1
}

// Read queues a read into p, as epoll.Read; it returns the operation's
// index for Result.
func (b *Batch) Read(fd int, p []byte) int { return b.add(op{kind: opRead, fd: fd, a: p}) }

// Readv queues a read into a and then c, as epoll.Readv.
func (b *Batch) Readv(fd int, a, c []byte) int {
	return b.add(op{kind: opReadv, fd: fd, a: a, b: c})
}

// Write queues a write of p, as epoll.Write.
func (b *Batch) Write(fd int, p []byte) int { return b.add(op{kind: opWrite, fd: fd, a: p}) }

// Writev queues a write of iov's buffers, as epoll.Writev.
func (b *Batch) Writev(fd int, iov []syscall.Iovec) int {
	return b.add(op{kind: opWritev, fd: fd, iov: iov})
}

// Result returns what operation i did, as the plain call would have
// returned it. Valid after the Run that ran it, until Reset.
func (b *Batch) Result(i int) (int, error) { return b.ops[i].n, b.ops[i].err }

// Run runs the queued operations not yet run, in the order queued.
func (b *Batch) Run() {
	ops := b.ops[b.run:]
	b.run = len(b.ops)
	// One operation costs one system call either way, and the plain one
	// is the cheaper.
	all := ops
	if b.ring != nil && len(ops) > 1 {
		for len(ops) > 0 {
			k := min(len(ops), int(b.ring.entries))
			if !b.submit(ops[:k]) {
				break
			}
			ops = ops[k:]
		}
	}
	for i := range all {
		o := &all[i]
		if !o.done {
			o.plain()
		}
		o.a, o.b, o.iov = nil, nil, nil
	}
}

// submit runs ops on the ring; false when the ring failed and is closed,
// leaving the operations it did not submit to the plain calls. One it
// submitted and saw no completion of is never redone: it may have taken
// effect, so it fails.
func (b *Batch) submit(ops []op) bool {
	sub, err := b.ring.submit(ops)
	if err == nil {
		return true
	}
	for i := range ops[:sub] {
		if o := &ops[i]; !o.done {
			o.n, o.err, o.done = 0, syscall.EIO, true
		}
	}
	b.Close()
	return false
}

// fill describes o in s. The message header and vectors live in o,
// which stays put until the batch has run.
func (o *op) fill(s *sqe) {
	s.fd = int32(o.fd)
	switch o.kind {
	case opRead, opWrite:
		s.opcode = opRecv
		if o.kind == opWrite {
			s.opcode = opSend
		}
		if len(o.a) > 0 {
			s.addr = uint64(uintptr(unsafe.Pointer(&o.a[0])))
		}
		s.len = uint32(len(o.a))
	case opReadv, opWritev:
		s.opcode = opRecvmsg
		iov := o.vec[:0]
		if o.kind == opWritev {
			s.opcode = opSendmsg
			iov = o.iov
		} else {
			for _, p := range [2][]byte{o.a, o.b} {
				if len(p) > 0 {
					v := syscall.Iovec{Base: &p[0]}
					v.SetLen(len(p))
					iov = append(iov, v)
				}
			}
		}
		o.msg = syscall.Msghdr{}
		if len(iov) > 0 {
			o.msg.Iov = &iov[0]
			setLen(&o.msg.Iovlen, len(iov))
		}
		s.addr = uint64(uintptr(unsafe.Pointer(&o.msg)))
		s.len = 1
	}
	s.msgFlags = dontWait
	if o.kind == opWrite || o.kind == opWritev {
		s.msgFlags |= syscall.MSG_NOSIGNAL
	}
}

// complete records the result res of o's SQE as the plain call reports
// it. ENOTSOCK (a pipe, a file) and EINVAL (an operation this kernel's
// io_uring lacks) leave it to the plain call, which also handles them.
func (o *op) complete(res int32) {
	if res == -int32(syscall.ENOTSOCK) || res == -int32(syscall.EINVAL) || res == -int32(syscall.EINTR) {
		return
	}
	if res == -int32(syscall.ECANCELED) { // submit cancelled it: it did not happen
		res = -int32(syscall.EAGAIN)
	}
	o.done = true
	if res >= 0 {
		o.n, o.err = int(res), nil
		return
	}
	e := syscall.Errno(-res)
	o.n, o.err = 0, e
	if e == syscall.EAGAIN && (o.kind == opWrite || o.kind == opWritev) {
		o.err = nil // as epoll.Write: nothing taken is (0, nil)
	}
}

// plain runs o with its own system call.
func (o *op) plain() {
	switch o.kind {
	case opRead:
		o.n, o.err = epoll.Read(o.fd, o.a)
	case opReadv:
		o.n, o.err = epoll.Readv(o.fd, o.a, o.b)
	case opWrite:
		o.n, o.err = epoll.Write(o.fd, o.a)
	case opWritev:
		o.n, o.err = epoll.Writev(o.fd, o.iov)
	}
	o.done = true
}

// setLen sets a length field that is 32 or 64 bits wide by architecture.
func setLen[T ~uint32 | ~uint64](p *T, n int) { *p = T(n) }
