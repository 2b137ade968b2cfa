//go:build linux

package proxy

import (
	"syscall"

	wire "github.com/jobgate/jobgate/codec/beanstalk"
	"github.com/jobgate/jobgate/internal/epoll"
	"github.com/jobgate/jobgate/internal/uring"
)

// Large bodies on a loop connection, in and out, as beanstalkd moves them:
// a put's body is read straight into the job's own buffer (the decoder's
// DirectMin; the engine keeps it, wire.Command.BodyOwned), and a RESERVED
// or FOUND body is written from the job with writev instead of being
// copied into the output buffer. Smaller ones are cheaper copied than
// given a system call or an iovec of their own.
const (
	// bloopDirectMin is the least put body read into its own buffer when
	// it has not all arrived with its line.
	bloopDirectMin = 4096
	// bloopRefMin is the least RESERVED or FOUND body written from where
	// it lies.
	bloopRefMin = 2048
)

// bloopRef is a reply body queued by reference: it goes out before
// out[at:], and body is what of it is not written yet. Job bodies are
// never modified after put (jobserver/beanstalk's job.body), so holding
// one is safe after the job is gone.
type bloopRef struct {
	at   int
	body []byte
}

// pending returns how many bytes of output wait to be written.
func (b *bloopConn) pending() int { return len(b.out) + b.refBytes }

// appendReply queues r's wire form, a large body by reference if jobBody
// says it is a job's own (never modified, see bloopRef).
func (b *bloopConn) appendReply(r *wire.Reply, jobBody bool) {
	if !jobBody || (r.Kind != wire.Reserved && r.Kind != wire.Found) || len(r.Body) < bloopRefMin {
		b.out = r.AppendTo(b.out)
		return
	}
	b.out = r.AppendLine(b.out)
	b.refs = append(b.refs, bloopRef{at: len(b.out), body: r.Body})
	b.refBytes += len(r.Body)
	b.out = append(b.out, "\r\n"...)
}

// writeOut writes what it can of b's output with one system call, a
// writev when bodies are queued by reference, and drops what was written.
func (b *bloopConn) writeOut() (int, error) {
	var n int
	var err error
	if len(b.refs) == 0 {
		n, err = epoll.Write(b.fd, b.out)
	} else {
		n, err = epoll.Writev(b.fd, b.outIov())
	}
	b.wroteOut(n)
	return n, err
}

// queueOut queues in io the write writeOut would make; wroteOut takes its
// result.
func (b *bloopConn) queueOut(io *uring.Batch) int {
	if len(b.refs) == 0 {
		return io.Write(b.fd, b.out)
	}
	return io.Writev(b.fd, b.outIov())
}

// outIov describes the output in b.iov: the lines from b.out, the bodies
// from where they lie, at most epoll.MaxIov buffers (the rest goes with
// the next write).
func (b *bloopConn) outIov() []syscall.Iovec {
	iov := b.iov[:0]
	prev, all := 0, true
	for _, r := range b.refs {
		if len(iov) > epoll.MaxIov-3 {
			all = false
			break
		}
		if r.at > prev {
			iov = appendIov(iov, b.out[prev:r.at])
		}
		iov = appendIov(iov, r.body)
		prev = r.at
	}
	if all && prev < len(b.out) {
		iov = appendIov(iov, b.out[prev:])
	}
	b.iov = iov
	return iov
}

// wroteOut drops the n bytes of output a write took.
func (b *bloopConn) wroteOut(n int) {
	clear(b.iov) // hold no body past the write
	b.iov = b.iov[:0]
	b.consume(n)
}

// appendIov appends p, non-empty, to iov.
func appendIov(iov []syscall.Iovec, p []byte) []syscall.Iovec {
	v := syscall.Iovec{Base: &p[0]}
	v.SetLen(len(p))
	return append(iov, v)
}

// consume drops the first n bytes of output, bodies by reference included.
func (b *bloopConn) consume(n int) {
	k, i := 0, 0 // bytes of out, and whole references, written
	for n > 0 {
		if i == len(b.refs) {
			k += n
			break
		}
		r := &b.refs[i]
		if gap := r.at - k; gap > 0 {
			d := min(gap, n)
			k, n = k+d, n-d
			continue
		}
		d := min(len(r.body), n)
		r.body, n = r.body[d:], n-d
		b.refBytes -= d
		if len(r.body) == 0 {
			i++
		}
	}
	if i > 0 {
		m := copy(b.refs, b.refs[i:])
		clear(b.refs[m:])
		b.refs = b.refs[:m]
	}
	for j := range b.refs {
		b.refs[j].at -= k
	}
	b.out = b.out[:copy(b.out, b.out[k:])]
}

// dropOut forgets b's output unwritten.
func (b *bloopConn) dropOut() {
	b.out = nil
	clear(b.refs)
	b.refs, b.refBytes = b.refs[:0], 0
}

// bodyRoom makes room in b.in for what follows a put body the decoder
// is reading into its own buffer, for readv to take both at once
// (queueRead).
func (b *bloopConn) bodyRoom() {
	if cap(b.in)-len(b.in) < bloopReadMin {
		if b.ir == len(b.in) { // always so while a body is read: Decode took all
			b.in, b.ir = b.in[:0], 0
		}
		if cap(b.in)-len(b.in) < bloopReadMin {
			buf := make([]byte, len(b.in), len(b.in)+bloopReadMin)
			copy(buf, b.in)
			b.in = buf
		}
	}
}

// sameBytes reports whether a and b are the same slice of the same memory.
func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}
