package beanstalk_test

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/jobgate/jobgate/codec/beanstalk"
)

// A server's read loop: decode, answer, and flush only when the client has
// no more pipelined commands buffered.
func Example() {
	conn := strings.NewReader("use jobs\r\nput 0 0 60 5\r\nhello\r\ndelete x\r\nquit\r\n")
	r := beanstalk.NewReader(conn, beanstalk.Limits{MaxJobSize: 1 << 20})
	w := beanstalk.NewWriter(printWriter{})
	defer w.Flush()
	var nextID uint64
	for {
		cmd, err := r.ReadCommand()
		var ce *beanstalk.ClientError
		switch {
		case errors.As(err, &ce):
			w.WriteReply(&beanstalk.Reply{Kind: ce.Kind})
		case err == io.EOF:
			return
		case err != nil:
			fmt.Println("close:", err)
			return
		case cmd.Verb == beanstalk.Quit:
			return
		case cmd.Verb == beanstalk.Use:
			w.WriteReply(&beanstalk.Reply{Kind: beanstalk.Using, Tube: cmd.Tube})
		case cmd.Verb == beanstalk.Put:
			nextID++ // an engine would copy cmd.Body: it is valid only until the next call
			w.WriteReply(&beanstalk.Reply{Kind: beanstalk.Inserted, ID: nextID})
		}
		if r.Buffered() == 0 {
			w.Flush()
		}
	}
	// All three replies go out in one write:
	//
	// Output:
	// write "USING jobs\r\nINSERTED 1\r\nBAD_FORMAT\r\n"
}

// printWriter shows each write to the connection.
type printWriter struct{}

func (printWriter) Write(p []byte) (int, error) {
	fmt.Printf("write %q\n", p)
	return len(p), nil
}

// Building a stats-tube reply with the typed struct, and reading it back as
// a gateway would.
func ExampleTubeStats() {
	var b beanstalk.YAMLBuilder
	st := beanstalk.TubeStats{Name: "jobs", CurrentJobsReady: 3, TotalJobs: 7}
	st.AppendYAML(&b)
	reply := beanstalk.Reply{Kind: beanstalk.OK, Body: b.Bytes()}
	wire := reply.AppendTo(nil)
	fmt.Printf("%.60q...\n", wire)

	rr := beanstalk.NewReplyReader(strings.NewReader(string(wire)), beanstalk.Limits{})
	got, _ := rr.ReadReply()
	var back beanstalk.TubeStats
	back.ParseYAML(got.Body)
	fmt.Println(back.Name, back.CurrentJobsReady, back.TotalJobs)
	// Output:
	// "OK 264\r\n---\nname: \"jobs\"\ncurrent-jobs-urgent: 0\ncurrent-jobs"...
	// jobs 3 7
}
