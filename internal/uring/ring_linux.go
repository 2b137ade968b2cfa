package uring

import (
	"errors"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// The io_uring system calls have the same numbers on every architecture.
const (
	sysSetup = 425
	sysEnter = 426
)

// Opcodes, setup and enter flags (include/uapi/linux/io_uring.h).
const (
	opSendmsg = 9
	opRecvmsg = 10
	opSend    = 26
	opRecv    = 27

	opAsyncCancel = 14
	// cancelTag marks a cancellation's user data; an operation's is its
	// index in the batch.
	cancelTag = 1 << 62

	setupSubmitAll = 1 << 7 // 5.18: an SQE that fails to prepare does not stop the rest
	enterGetEvents = 1

	offSQRing    = 0
	offSQEs      = 0x10000000
	featRWCurPos = 1 << 3 // 5.6, with the send and recv operations and one mapping for both rings
)

type sqOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

type cqOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

type params struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFD uint32
	resv                                                                   [3]uint32
	sq                                                                     sqOffsets
	cq                                                                     cqOffsets
}

// sqe is struct io_uring_sqe, 64 bytes.
type sqe struct {
	opcode   uint8
	flags    uint8
	ioprio   uint16
	fd       int32
	off      uint64
	addr     uint64
	len      uint32
	msgFlags uint32
	userData uint64
	bufIndex uint16
	pers     uint16
	fileIdx  int32
	addr3    uint64
	pad      uint64
}

// cqe is struct io_uring_cqe, 16 bytes.
type cqe struct {
	userData uint64
	res      int32
	flags    uint32
}

// ring is one io_uring instance with its shared rings mapped. Owned by
// one goroutine.
type ring struct {
	fd      int
	sqTail  *uint32
	sqMask  uint32
	sqArray []uint32
	sqes    []sqe
	cqHead  *uint32
	cqTail  *uint32
	cqMask  uint32
	cqes    []cqe
	entries uint32
	mem     [][]byte // the mappings, for close
}

// newRing sets up a ring of at least entries submission slots.
func newRing(entries uint32) (*ring, error) {
	var p params
	p.flags = setupSubmitAll
	// The descriptor is not close-on-exec until CloseOnExec: hold fork
	// off meanwhile, as the syscall package does for its sockets.
	syscall.ForkLock.RLock()
	fd, _, e := syscall.RawSyscall(sysSetup, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	if e == syscall.EINVAL { // a kernel before 5.18
		p = params{}
		fd, _, e = syscall.RawSyscall(sysSetup, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	}
	if e == 0 {
		syscall.CloseOnExec(int(fd))
	}
	syscall.ForkLock.RUnlock()
	if e != 0 {
		return nil, e
	}
	r := &ring{fd: int(fd), entries: p.sqEntries}
	if p.features&featRWCurPos == 0 { // before 5.6: no send and recv operations
		r.close()
		return nil, syscall.ENOSYS
	}
	size := max(p.sq.array+p.sqEntries*4, p.cq.cqes+p.cqEntries*uint32(unsafe.Sizeof(cqe{})))
	rings, err := syscall.Mmap(r.fd, offSQRing, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED|syscall.MAP_POPULATE)
	if err != nil {
		r.close()
		return nil, err
	}
	r.mem = append(r.mem, rings)
	sqes, err := syscall.Mmap(r.fd, offSQEs, int(p.sqEntries)*int(unsafe.Sizeof(sqe{})), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED|syscall.MAP_POPULATE)
	if err != nil {
		r.close()
		return nil, err
	}
	r.mem = append(r.mem, sqes)
	base := unsafe.Pointer(&rings[0])
	r.sqTail = (*uint32)(unsafe.Add(base, p.sq.tail))
	r.sqMask = *(*uint32)(unsafe.Add(base, p.sq.ringMask))
	r.sqArray = unsafe.Slice((*uint32)(unsafe.Add(base, p.sq.array)), p.sqEntries)
	r.sqes = unsafe.Slice((*sqe)(unsafe.Pointer(&sqes[0])), p.sqEntries)
	r.cqHead = (*uint32)(unsafe.Add(base, p.cq.head))
	r.cqTail = (*uint32)(unsafe.Add(base, p.cq.tail))
	r.cqMask = *(*uint32)(unsafe.Add(base, p.cq.ringMask))
	r.cqes = unsafe.Slice((*cqe)(unsafe.Add(base, p.cq.cqes)), p.cqEntries)
	return r, nil
}

// close unmaps the rings and closes the instance.
func (r *ring) close() {
	for _, m := range r.mem {
		syscall.Munmap(m)
	}
	r.mem = nil
	syscall.Close(r.fd)
}

// submit runs ops on the ring, at most r.entries of them: it hands the
// kernel their SQEs and records each completion in its op. It returns how
// many of ops were submitted: those are complete. An error means the ring
// cannot go on.
//
// The operations are non-blocking (MSG_DONTWAIT), so the kernel completes
// each while it submits it. One it does not (a kernel that parks it to
// wait for the socket instead) is cancelled: it ends as if the socket had
// said EAGAIN, and the loop never waits on a socket.
func (r *ring) submit(ops []op) (int, error) {
	for i := range ops {
		s := r.next(i)
		ops[i].fill(s)
		s.userData = uint64(i)
	}
	sub, err := r.enter(len(ops))
	got := r.reap(ops)
	if got == sub {
		return sub, err
	}
	k := 0
	for i := range ops[:sub] {
		if !ops[i].reaped {
			s := r.next(k)
			s.opcode = opAsyncCancel
			s.fd = -1
			s.addr = uint64(i)
			s.userData = cancelTag | uint64(i)
			k++
		}
	}
	if n, e := r.enter(k); e != nil || n < k {
		return got, errors.Join(err, e, errors.New("uring: cancel not submitted"))
	}
	for want := sub + k; got < want; {
		_, _, e := syscall.Syscall6(sysEnter, uintptr(r.fd), 0, uintptr(want-got), enterGetEvents, 0, 0)
		if e != 0 && e != syscall.EINTR {
			return sub, e
		}
		got += r.reap(ops)
	}
	return sub, err
}

// next returns the i-th free submission entry, cleared.
func (r *ring) next(i int) *sqe {
	idx := (*r.sqTail + uint32(i)) & r.sqMask
	r.sqArray[idx] = idx
	s := &r.sqes[idx]
	*s = sqe{}
	return s
}

// enter submits the n entries filled since the last call; it returns how
// many the kernel took.
func (r *ring) enter(n int) (int, error) {
	tail := *r.sqTail
	atomic.StoreUint32(r.sqTail, tail+uint32(n))
	sub := 0
	for sub < n {
		k, _, e := syscall.RawSyscall6(sysEnter, uintptr(r.fd), uintptr(n-sub), 0, 0, 0, 0)
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			return sub, e
		}
		sub += int(k)
	}
	return sub, nil
}

// reap records every completion ready in its op and returns how many
// there were, a cancellation's own included.
func (r *ring) reap(ops []op) int {
	head := *r.cqHead
	tail := atomic.LoadUint32(r.cqTail)
	n := 0
	for ; head != tail; head++ {
		c := &r.cqes[head&r.cqMask]
		if c.userData&cancelTag == 0 {
			o := &ops[c.userData]
			o.reaped = true
			o.complete(c.res)
		}
		n++
	}
	atomic.StoreUint32(r.cqHead, head)
	return n
}
