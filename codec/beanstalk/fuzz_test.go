package beanstalk

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

var updateCorpus = flag.Bool("update", false, "rewrite the seed corpus under testdata/fuzz")

// Small limits, so the fuzzer reaches JOB_TOO_BIG and long lines cheaply.
var (
	fuzzLimits      = Limits{MaxJobSize: 512}
	fuzzReplyLimits = Limits{MaxJobSize: 512, MaxYAMLSize: 1024}
)

// commandSeeds are the command table's inputs, plus a few mixes.
func commandSeeds() [][]byte {
	var seeds [][]byte
	for _, tc := range cmdTable {
		seeds = append(seeds, tc.input())
	}
	seeds = append(seeds,
		[]byte("put 0 0 1 600\r\n"+x(600)+"\r\nstats\r\n"),
		[]byte("use a\r\nput 1 2 3 4\r\nabcd\r\nreserve-with-timeout 5\r\ndelete 1\r\nquit\r\n"),
	)
	return seeds
}

// replySeeds are the reply table's bytes, plus real bodies and some junk.
func replySeeds() [][]byte {
	var seeds [][]byte
	for _, tc := range replyTable {
		seeds = append(seeds, []byte(tc.wire))
	}
	all := ""
	for _, tc := range replyTable[:20] {
		all += tc.wire
	}
	seeds = append(seeds, []byte(all),
		[]byte("OK "+strconv.Itoa(len(jobStats112))+"\r\n"+jobStats112+"\r\n"),
		[]byte("RESERVED 1 600\r\n"+x(600)+"\r\nDELETED\r\n"),
		[]byte("INSERTED 5 \r\n"), []byte("USING -x\r\n"), []byte("FOUND 1 3\r\nabcXY"))
	return seeds
}

// FuzzReader checks the command Reader never panics, reads the same however
// the input is cut, ends only in io.EOF or io.ErrUnexpectedEOF, and that
// everything it decodes re-encodes to a line that decodes the same.
func FuzzReader(f *testing.F) {
	for _, s := range commandSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := decodeAll(bytes.NewReader(data), fuzzLimits)
		if err != io.EOF && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("ended in %v", err)
		}
		got1, err1 := decodeAll(iotest.OneByteReader(bytes.NewReader(data)), fuzzLimits)
		if !equalResults(got, got1) || errors.Is(err, io.ErrUnexpectedEOF) != errors.Is(err1, io.ErrUnexpectedEOF) {
			t.Fatalf("whole: %v %v; one byte at a time: %v %v", got, err, got1, err1)
		}
		for _, r := range got {
			if r.cmd == nil {
				continue
			}
			enc := r.cmd.AppendTo(nil)
			again, err := decodeAll(bytes.NewReader(enc), fuzzLimits)
			if err != io.EOF || !equalResults(again, []result{r}) {
				t.Fatalf("%v re-encodes to %q, which decodes to %v, %v", r, enc, again, err)
			}
		}
	})
}

// FuzzReplyReader is FuzzReader for the ReplyReader: besides io.EOF and
// io.ErrUnexpectedEOF it may end in a *ProtocolError.
func FuzzReplyReader(f *testing.F) {
	for _, s := range replySeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := decodeReplies(bytes.NewReader(data), fuzzReplyLimits)
		var pe *ProtocolError
		if err != io.EOF && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.As(err, &pe) {
			t.Fatalf("ended in %v", err)
		}
		got1, err1 := decodeReplies(iotest.OneByteReader(bytes.NewReader(data)), fuzzReplyLimits)
		if !equalReplyResults(got, got1) || fmt.Sprint(err) != fmt.Sprint(err1) {
			t.Fatalf("whole: %v %v; one byte at a time: %v %v", got, err, got1, err1)
		}
		for _, r := range got {
			if r.r == nil {
				continue
			}
			enc := r.r.AppendTo(nil)
			again, err := decodeReplies(bytes.NewReader(enc), fuzzReplyLimits)
			if err != io.EOF || !equalReplyResults(again, []replyResult{r}) {
				t.Fatalf("%v re-encodes to %q, which decodes to %v, %v", r, enc, again, err)
			}
		}
	})
}

// TestSeedCorpus checks the committed seed corpus under testdata/fuzz
// holds every seed; go test -run TestSeedCorpus -update rewrites it. Only
// seeds up to 1 KB are committed (the rest are f.Add seeds only), in files
// named seed-<hash>, beside anything the fuzzer found.
func TestSeedCorpus(t *testing.T) {
	for name, seeds := range map[string][][]byte{"FuzzReader": commandSeeds(), "FuzzReplyReader": replySeeds()} {
		dir := filepath.Join("testdata", "fuzz", name)
		want := map[string]string{}
		for _, s := range seeds {
			if len(s) > 1024 {
				continue
			}
			content := "go test fuzz v1\n[]byte(" + strconv.Quote(string(s)) + ")\n"
			want[fmt.Sprintf("seed-%x", sha256.Sum256(s))[:21]] = content
		}
		if *updateCorpus {
			old, _ := filepath.Glob(filepath.Join(dir, "seed-*"))
			for _, f := range old {
				os.Remove(f)
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for file, content := range want {
				if err := os.WriteFile(filepath.Join(dir, file), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			continue
		}
		for file, content := range want {
			got, err := os.ReadFile(filepath.Join(dir, file))
			if err != nil || string(got) != content {
				t.Fatalf("%s/%s missing or stale (%v): run go test -run TestSeedCorpus -update", name, file, err)
			}
		}
		files, _ := filepath.Glob(filepath.Join(dir, "seed-*"))
		for _, f := range files {
			if _, ok := want[filepath.Base(f)]; !ok && !strings.HasSuffix(f, "~") {
				t.Errorf("%s is no longer a seed: run go test -run TestSeedCorpus -update", f)
			}
		}
	}
}
