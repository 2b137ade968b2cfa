// Package uring runs a batch of non-blocking socket reads and writes with
// one io_uring_enter system call instead of one system call each, for the
// event loops (internal/epoll): a loop reads every socket epoll reported
// ready in one batch, and writes every connection that got output in
// another.
//
// On a kernel with page-table isolation and no PCID (Meltdown's fix on
// many virtual machines), entering the kernel costs about a microsecond
// whatever the call does, more than a loopback send's own work; a batch
// pays it once (docs/BENCHMARKS.md, "Batched socket calls").
//
// Each operation keeps the result epoll's plain call would give (Read,
// Readv, Write, Writev), so a loop can use either. A batch never waits on
// a socket: every operation is MSG_DONTWAIT, and one a kernel parks anyway
// is cancelled and reads as EAGAIN. Where io_uring is
// missing or refused (kernels before 5.6, seccomp filters, the
// kernel.io_uring_disabled sysctl) or Disable was called, a Batch makes
// the plain calls itself.
package uring

import "sync/atomic"

// disabled makes New return batches without a ring.
var disabled atomic.Bool

// Disable makes batches made from now on use plain system calls, as on a
// kernel without io_uring (for tests and the -io-uring=false setting).
// Off Linux there are no batches; it does nothing there.
func Disable(off bool) { disabled.Store(off) }
