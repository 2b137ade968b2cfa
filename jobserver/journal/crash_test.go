package journal

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The crash and cross-process lock tests re-run this test binary as a
// helper process (TestHelperProcess) selected by these variables.
const (
	helperEnv     = "JOURNAL_TEST_HELPER"      // "append" or "lock"
	helperDirEnv  = "JOURNAL_TEST_DIR"         // the journal directory
	helperBaseEnv = "JOURNAL_TEST_BASE"        // first key of this run
	helperCompact = "JOURNAL_TEST_COMPACTION"  // "1": small segments and automatic compaction
	helperWorkers = 4                          // concurrent appenders in the helper
	helperSpan    = 1 << 20                    // keys per worker
	helperSegment = 4 << 10                    // segment size with compaction on
	helperMaxKeys = helperWorkers * helperSpan // keys per run
)

// helperBody is the state the helper gives key: recognisable, and of a
// length that varies with the key so frames straddle segment ends.
func helperBody(key uint64) []byte {
	s := strconv.FormatUint(key, 10) + "/"
	return []byte(strings.Repeat(s, 1+int(key%97)/len(s)+1))
}

func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		t.Skip("run only as a helper process")
	}
	dir := os.Getenv(helperDirEnv)
	switch mode {
	case "append":
		helperAppend(dir)
	case "lock":
		if _, _, err := Open(dir, Options{Logger: quietLogger}, nil); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Println("locked")
		select {} // hold the lock until killed
	}
	os.Exit(0)
}

// helperAppend appends with the Always policy from several goroutines and
// prints "p KEY" once a put is acknowledged, "D KEY" before it deletes a
// key and "d KEY" once the delete is acknowledged, until it is killed.
func helperAppend(dir string) {
	base, _ := strconv.ParseUint(os.Getenv(helperBaseEnv), 10, 64)
	opts := Options{Sync: Always, Logger: quietLogger}
	if os.Getenv(helperCompact) == "1" {
		opts.SegmentSize = helperSegment
	} else {
		opts.NoAutoCompact = true
	}
	m := newModel()
	opts.Snapshot = m.snapshot
	j, _, err := Open(dir, opts, m.apply)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	m.j = j
	var out sync.Mutex
	ack := func(op byte, key uint64) {
		out.Lock()
		defer out.Unlock()
		os.Stdout.Write([]byte(string(op) + " " + strconv.FormatUint(key, 10) + "\n"))
	}
	for w := range helperWorkers {
		go func() {
			rng := rand.New(rand.NewPCG(base, uint64(w)))
			var mine []uint64
			for i := uint64(0); i < helperSpan; i++ {
				key := base + uint64(w)*helperSpan + i
				if err := m.put(key, helperBody(key), key).Wait(); err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(2)
				}
				ack('p', key)
				mine = append(mine, key)
				if i%3 == 2 {
					k := mine[rng.IntN(len(mine))]
					ack('D', k) // intent: the delete may land unacknowledged
					if tk := m.del(k); tk != (Ticket{}) {
						if err := tk.Wait(); err != nil {
							fmt.Fprintln(os.Stderr, err)
							os.Exit(2)
						}
						ack('d', k)
					}
				}
			}
		}()
	}
	select {}
}

// helperCmd returns the command that runs this binary as a helper.
func helperCmd(t *testing.T, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	t.Cleanup(func() {
		if cmd.Process != nil {
			cmd.Process.Kill() // by pid; harmless if it already exited
			cmd.Wait()
		}
		if s := stderr.String(); strings.TrimSpace(s) != "" && t.Failed() {
			t.Logf("helper stderr:\n%s", s)
		}
	})
	return cmd
}

// TestCrash kills a helper that appends with the Always policy at a random
// moment, several times over one directory, and checks after each kill
// that every acknowledged put is present with its data, every
// acknowledged delete took effect, and the only damage is a torn tail.
func TestCrash(t *testing.T) {
	rounds := 8
	if testing.Short() {
		rounds = 3
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), 7))
	put := map[uint64]bool{}      // acknowledged puts
	deleting := map[uint64]bool{} // deletes attempted, maybe not acknowledged
	deleted := map[uint64]bool{}  // acknowledged deletes
	for round := range rounds {
		compaction := round%2 == 1
		base := uint64(round+1) * helperMaxKeys
		cmd := helperCmd(t, helperEnv+"=append", helperDirEnv+"="+dir,
			helperBaseEnv+"="+strconv.FormatUint(base, 10),
			helperCompact+"="+map[bool]string{true: "1", false: "0"}[compaction])
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		killAfter := 1 + rng.IntN(600)
		sc := bufio.NewScanner(stdout)
		n := 0
		for sc.Scan() {
			// Every line read, also after the kill, was printed after
			// its record was acknowledged.
			op, arg, _ := strings.Cut(sc.Text(), " ")
			key, err := strconv.ParseUint(arg, 10, 64)
			if err != nil {
				t.Fatalf("helper said %q", sc.Text())
			}
			switch op {
			case "p":
				put[key] = true
			case "D":
				deleting[key] = true
			case "d":
				deleted[key] = true
			}
			if n++; n == killAfter {
				if err := cmd.Process.Kill(); err != nil {
					t.Fatal(err)
				}
			}
		}
		err = cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != -1 {
			t.Fatalf("round %d: helper ended with %v before it was killed", round, err)
		}

		m := newModel()
		var fulls = map[uint64]int{}
		j, rep, err := Open(dir, Options{Logger: quietLogger, NoAutoCompact: true}, func(r Record) error {
			if r.Kind == Full {
				fulls[r.Key]++
			}
			return m.apply(r)
		})
		if err != nil {
			t.Fatalf("round %d: reopen: %v", round, err)
		}
		for i, d := range rep.Damage {
			if i != len(rep.Damage)-1 || !d.Truncated {
				t.Fatalf("round %d: damage beyond a torn tail: %v", round, rep.Damage)
			}
		}
		for key := range put {
			got, ok := m.state[key]
			switch {
			case deleted[key] && ok:
				t.Fatalf("round %d: key %d was deleted (acknowledged) but replayed", round, key)
			case !deleting[key] && !ok:
				t.Fatalf("round %d: acknowledged key %d lost", round, key)
			case ok && string(got[:len(got)-8]) != string(helperBody(key)):
				t.Fatalf("round %d: key %d replayed with wrong data", round, key)
			}
		}
		if !compaction {
			// Without compaction every put is one record: none may
			// be replayed twice.
			for key, c := range fulls {
				if c > 1 && key >= base {
					t.Fatalf("round %d: key %d replayed %d times", round, key, c)
				}
			}
		}
		files := segmentFiles(t, dir)
		t.Logf("round %d (compaction %v): killed after line %d of %d; segments %s..%s, %d live keys, damage %v",
			round, compaction, killAfter, n, filepath.Base(files[0]), filepath.Base(files[len(files)-1]),
			len(m.state), rep.Damage)
		j.Close()
	}
}

// TestLockOtherProcess: a second process cannot open a directory a first
// one holds, and the lock goes with the holder when it is killed.
func TestLockOtherProcess(t *testing.T) {
	dir := t.TempDir()
	cmd := helperCmd(t, helperEnv+"=lock", helperDirEnv+"="+dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() || sc.Text() != "locked" {
		t.Fatalf("helper did not lock: %q", sc.Text())
	}
	_, _, err = Open(dir, Options{Logger: quietLogger}, nil)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), strconv.Itoa(cmd.Process.Pid)) {
		t.Fatalf("Open while another process holds the lock: %v", err)
	}
	t.Log(err)
	cmd.Process.Kill()
	cmd.Wait()
	j, _, err := Open(dir, Options{Logger: quietLogger}, nil)
	if err != nil {
		t.Fatalf("Open after the holder died: %v", err)
	}
	j.Close()
}
