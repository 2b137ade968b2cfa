package gmexample

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/jobgate/jobgate/codec/gearman"
)

// ErrJobFailed is returned by Submit when the worker gave up on the job
// (WORK_FAIL, or WORK_EXCEPTION for a client that asked for exceptions).
var ErrJobFailed = errors.New("gearman: job failed")

// ClientConfig configures RunClient: what the example client's flags ask for.
type ClientConfig struct {
	// Addr is the server's host:port.
	Addr string
	// Function is the function to submit jobs to. Default "reverse".
	Function string
	// Payload is the job's workload.
	Payload []byte
	// Background submits a background job instead of a foreground one.
	Background bool
	// StatusOf, when set, is the handle of a job to report the status of;
	// nothing is submitted.
	StatusOf string
}

// RunClient does what cfg asks and prints to out:
//   - by default, a foreground job and what its worker streams back (Submit);
//   - with Background, a background job's handle ("created H:host:1") and
//     then its status (SubmitBackground, GetStatus);
//   - with StatusOf, that job's status (GetStatus).
func RunClient(ctx context.Context, cfg ClientConfig, out io.Writer) error {
	if cfg.Function == "" {
		cfg.Function = "reverse"
	}
	switch {
	case cfg.StatusOf != "":
		st, err := GetStatus(ctx, cfg.Addr, cfg.StatusOf)
		if err != nil {
			return err
		}
		fmt.Fprintln(out, st)
	case cfg.Background:
		h, err := SubmitBackground(ctx, cfg.Addr, cfg.Function, cfg.Payload)
		if err != nil {
			return err
		}
		fmt.Fprintln(out, "created", h)
		st, err := GetStatus(ctx, cfg.Addr, h)
		if err != nil {
			return err
		}
		fmt.Fprintln(out, st)
	default:
		_, err := Submit(ctx, cfg.Addr, cfg.Function, cfg.Payload, out)
		return err
	}
	return nil
}

// Submit runs a foreground job: it sends SUBMIT_JOB and waits for the result,
// printing to out, one line each, the handle (JOB_CREATED) and everything the
// worker reports on the way (WORK_STATUS, WORK_DATA, WORK_WARNING) as it
// arrives, and last the whole result.
//
// The result is the WORK_DATA chunks followed by the WORK_COMPLETE data, as
// libgearman's gearman command line prints it: a worker that streams its
// output sends it in WORK_DATA packets and ends with WORK_COMPLETE carrying
// the rest (possibly nothing).
//
// A foreground job is tied to the client's connection: if the client goes
// away before the result, the job still runs but nobody gets the result.
func Submit(ctx context.Context, addr, function string, payload []byte, out io.Writer) (result []byte, err error) {
	c, err := dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	defer func() { err = cause(ctx, err) }()

	// The unique ID is left empty: the server then treats every submission
	// as a new job. A non-empty one lets the server coalesce identical jobs
	// and answer all their clients with one run.
	if err := c.send(gearman.SubmitJob, []byte(function), nil, payload); err != nil {
		return nil, err
	}
	for {
		p, err := c.recv()
		if err != nil {
			return nil, err
		}
		// Every packet but JOB_CREATED names the job's handle first. One
		// connection could have several jobs in flight and would tell them
		// apart by it; this one has only one.
		switch p.Type {
		case gearman.JobCreated:
			fmt.Fprintf(out, "created %s\n", p.Handle())
		case gearman.WorkStatus:
			fmt.Fprintf(out, "status %d/%d\n",
				atoi(p.Field(gearman.FieldNumerator)), atoi(p.Field(gearman.FieldDenominator)))
		case gearman.WorkData:
			fmt.Fprintf(out, "data %q\n", p.Data())
			result = append(result, p.Data()...) // a copy: p is reused by the next read
		case gearman.WorkWarning:
			fmt.Fprintf(out, "warning %q\n", p.Data())
		case gearman.WorkComplete:
			result = append(result, p.Data()...)
			fmt.Fprintf(out, "result %q\n", result)
			return result, nil
		case gearman.WorkFail:
			return nil, ErrJobFailed
		case gearman.WorkException:
			return nil, fmt.Errorf("%w: exception %q", ErrJobFailed, p.Data())
		default:
			return nil, fmt.Errorf("gearman: unexpected %s while waiting for a result", p.String())
		}
	}
}

// SubmitBackground queues a background job (SUBMIT_JOB_BG) and returns its
// handle as soon as the server has it. The client may then disconnect: the
// job runs anyway, and its progress can be asked for, from any connection,
// with GetStatus. Its result is dropped.
func SubmitBackground(ctx context.Context, addr, function string, payload []byte) (handle string, err error) {
	c, err := dial(ctx, addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	defer func() { err = cause(ctx, err) }()
	if err := c.send(gearman.SubmitJobBg, []byte(function), nil, payload); err != nil {
		return "", err
	}
	p, err := c.recv()
	if err != nil {
		return "", err
	}
	if p.Type != gearman.JobCreated {
		return "", fmt.Errorf("gearman: unexpected %s after SUBMIT_JOB_BG", p.String())
	}
	return string(p.Handle()), nil
}

// Status is a job's state as GET_STATUS reports it.
type Status struct {
	// Handle is the job handle asked about.
	Handle string
	// Known is whether the server has the job: false once it is done (or
	// for a handle it never issued).
	Known bool
	// Running is whether a worker has it now.
	Running bool
	// Numerator and Denominator are the progress of the worker's last
	// WORK_STATUS, 0/0 before any.
	Numerator, Denominator int
}

// String formats s as GetStatus's callers print it, e.g.
// "H:host:1 known=true running=false 0/0".
func (s Status) String() string {
	return fmt.Sprintf("%s known=%t running=%t %d/%d", s.Handle, s.Known, s.Running, s.Numerator, s.Denominator)
}

// GetStatus asks the server about the job with the given handle (GET_STATUS,
// answered by STATUS_RES).
func GetStatus(ctx context.Context, addr, handle string) (st Status, err error) {
	c, err := dial(ctx, addr)
	if err != nil {
		return Status{}, err
	}
	defer c.Close()
	defer func() { err = cause(ctx, err) }()
	if err := c.send(gearman.GetStatus, []byte(handle)); err != nil {
		return Status{}, err
	}
	p, err := c.recv()
	if err != nil {
		return Status{}, err
	}
	if p.Type != gearman.StatusRes {
		return Status{}, fmt.Errorf("gearman: unexpected %s after GET_STATUS", p.String())
	}
	return Status{
		Handle:      string(p.Handle()),
		Known:       string(p.Field(gearman.FieldKnown)) == "1",
		Running:     string(p.Field(gearman.FieldRunning)) == "1",
		Numerator:   atoi(p.Field(gearman.FieldNumerator)),
		Denominator: atoi(p.Field(gearman.FieldDenominator)),
	}, nil
}

// atoi parses a decimal argument such as a WORK_STATUS numerator; a
// malformed one reads as 0, since it is only displayed.
func atoi(b []byte) int {
	n, _ := strconv.Atoi(string(b))
	return n
}
