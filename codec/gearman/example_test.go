package gearman_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/jobgate/jobgate/codec/gearman"
)

// A server read loop: answer each frame, answer malformed input the way
// gearmand does, close only when the error is fatal, and flush when nothing
// more is buffered to read.
func Example() {
	conn := strings.NewReader(
		"\x00REQ\x00\x00\x00\x10\x00\x00\x00\x04ping" + // ECHO_REQ "ping"
			"version\r\n" + // admin line on the same connection
			"\x00REQ\x00\x00\x00\x07\x00\x00\x00\x46fn\x00" + strings.Repeat("u", 65) + "\x00d" + // unique too long
			"\x00REQ\x00\x00\x00\x63\x00\x00\x00\x00" + // unknown type 99
			"\x00XYZ") // out of sync
	var out bytes.Buffer
	r := gearman.NewReader(conn, gearman.Limits{})
	w := gearman.NewWriter(&out)
	for {
		f, err := r.ReadFrame()
		if err != nil {
			var pe *gearman.ProtocolError
			if errors.As(err, &pe) {
				fmt.Println("error:", err)
				w.WriteError(pe.Code, pe.Text)
			}
			if gearman.IsFatal(err) {
				break
			}
			continue
		}
		switch f.Kind {
		case gearman.KindPacket:
			fmt.Println("packet:", f.Packet.String())
			if f.Packet.Type == gearman.EchoReq {
				w.WritePacket(gearman.Res, gearman.EchoRes, f.Packet.Data())
			}
		case gearman.KindText:
			words := gearman.AppendAdminFields(nil, f.Text)
			fmt.Printf("admin: %q\n", words)
			if bytes.EqualFold(words[0], []byte("version")) {
				w.WriteString("OK 1.1.20\n")
			} else {
				w.WriteText(gearman.AppendAdminUnknownCommand(nil, words[0]))
			}
		}
		if r.Buffered() == 0 {
			w.Flush()
		}
	}
	w.Flush()
	fmt.Printf("%q\n", out.String())
	// Output:
	// packet: REQ ECHO_REQ ["ping"]
	// admin: ["version"]
	// error: gearman: unique ID too long (REQ SUBMIT_JOB): 65 bytes, limit 64
	// error: gearman: unknown packet type (REQ Type(99))
	// error: gearman: bad magic; stream out of sync
	// "\x00RES\x00\x00\x00\x11\x00\x00\x00\x04pingOK 1.1.20\n\x00RES\x00\x00\x00\x13\x00\x00\x00)ARGUMENT_TOO_LARGE\x00Unique value too large\x00RES\x00\x00\x00\x13\x00\x00\x00(INVALID_COMMAND\x00Invalid command expected\x00RES\x00\x00\x00\x13\x00\x00\x00!INVALID_MAGIC\x00Invalid magic value"
}
