package gmexample

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/jobgate/jobgate/codec/gearman"
)

// WorkerConfig configures RunWorker.
type WorkerConfig struct {
	// Addr is the server's host:port.
	Addr string
	// Function is the function name the worker registers with CAN_DO.
	// Default "reverse".
	Function string
	// ClientID, when set, is sent with SET_CLIENT_ID; the admin "workers"
	// command (gearadmin --workers) lists the worker under it.
	ClientID string
	// Jobs is how many jobs to run before returning; 0 means until ctx is
	// cancelled.
	Jobs int
}

// RunWorker connects to a Gearman server and runs jobs of cfg.Function until
// it has run cfg.Jobs of them or ctx is cancelled. Each job's payload is
// reversed byte by byte, and the result is streamed to the client in two
// halves the way a long job would stream its output, with progress reports:
//
//	WORK_STATUS   handle 1 2             (half done)
//	WORK_DATA     handle <first half>    (output streamed early)
//	WORK_STATUS   handle 2 2             (all done)
//	WORK_COMPLETE handle <second half>   (the rest of the output)
//
// The result is the concatenation of the WORK_DATA chunks and the
// WORK_COMPLETE data, which is how libgearman's gearman command line prints
// it ("olleh" for "hello"). RunWorker prints one line per job to out: the
// handle, the payload and the result.
//
// RunWorker returns nil after cfg.Jobs jobs, ctx.Err() when ctx is cancelled,
// and otherwise the connection's or the server's error.
func RunWorker(ctx context.Context, cfg WorkerConfig, out io.Writer) (err error) {
	if cfg.Function == "" {
		cfg.Function = "reverse"
	}
	c, err := dial(ctx, cfg.Addr)
	if err != nil {
		return err
	}
	defer c.Close()
	defer func() { err = cause(ctx, err) }()

	// Introduce ourselves: both packets are one-way, so write them
	// together and let grab's GRAB_JOB flush them.
	if cfg.ClientID != "" {
		if err := c.w.WritePacket(gearman.Req, gearman.SetClientID, []byte(cfg.ClientID)); err != nil {
			return err
		}
	}
	if err := c.w.WritePacket(gearman.Req, gearman.CanDo, []byte(cfg.Function)); err != nil {
		return err
	}

	for done := 0; cfg.Jobs == 0 || done < cfg.Jobs; done++ {
		handle, payload, err := c.grab()
		if err != nil {
			return err
		}
		// This work cannot fail. Work that can answers WORK_FAIL (handle
		// only) or WORK_EXCEPTION (handle and a message, delivered to
		// clients that set the "exceptions" option) instead of
		// WORK_COMPLETE.
		result := reverse(payload)
		// The four packets go out in one write: a real worker would flush
		// after each status so that the client sees progress as it happens.
		// WritePacket only fails on an invalid packet or an earlier write
		// error, which the Writer keeps and Flush returns.
		half := len(result) / 2
		c.w.WritePacket(gearman.Req, gearman.WorkStatus, handle, []byte("1"), []byte("2"))
		c.w.WritePacket(gearman.Req, gearman.WorkData, handle, result[:half])
		c.w.WritePacket(gearman.Req, gearman.WorkStatus, handle, []byte("2"), []byte("2"))
		c.w.WritePacket(gearman.Req, gearman.WorkComplete, handle, result[half:])
		if err := c.w.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(out, "%s %q -> %q\n", handle, payload, result)
	}
	return nil
}

// grab asks the server for a job and, while there is none, sleeps until the
// server wakes it. It returns the job's handle and payload, copied out of
// the Reader's buffer.
//
// The exchange is GRAB_JOB, answered by JOB_ASSIGN or NO_JOB; after NO_JOB
// the worker sends PRE_SLEEP and the server sends NOOP when a job for one of
// its functions arrives, upon which the worker asks again. Polling instead
// (GRAB_JOB in a loop) would work but wastes both sides' CPU.
func (c *conn) grab() (handle, payload []byte, err error) {
	if err := c.send(gearman.GrabJob); err != nil {
		return nil, nil, err
	}
	sleeping := false
	for {
		p, err := c.recv()
		if err != nil {
			return nil, nil, err
		}
		switch p.Type {
		case gearman.JobAssign:
			return bytes.Clone(p.Handle()), bytes.Clone(p.Data()), nil
		case gearman.NoJob:
			if err := c.send(gearman.PreSleep); err != nil {
				return nil, nil, err
			}
			sleeping = true
		case gearman.Noop:
			// A NOOP that arrives while a GRAB_JOB is already outstanding
			// (a wake-up racing our own request) needs no second one.
			if sleeping {
				sleeping = false
				if err := c.send(gearman.GrabJob); err != nil {
					return nil, nil, err
				}
			}
		default:
			return nil, nil, fmt.Errorf("gearman: unexpected %s while waiting for a job", p.String())
		}
	}
}

// reverse returns b reversed byte by byte (so a multi-byte UTF-8 character
// comes out scrambled: payloads are bytes, not text, to Gearman).
func reverse(b []byte) []byte {
	r := make([]byte, len(b))
	for i, c := range b {
		r[len(b)-1-i] = c
	}
	return r
}
