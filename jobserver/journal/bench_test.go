package journal

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// BenchmarkAppend measures Append with 100-byte records under each policy
// with 1 and 16 concurrent writers. syncs/op shows group commit at work.
func BenchmarkAppend(b *testing.B) {
	data := make([]byte, 100)
	for _, pol := range []SyncPolicy{Always, Interval(50 * time.Millisecond), Never} {
		for _, writers := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/writers=%d", pol, writers), func(b *testing.B) {
				j, _, err := Open(b.TempDir(), Options{Sync: pol, Logger: quietLogger}, nil)
				if err != nil {
					b.Fatal(err)
				}
				defer j.Close()
				b.ReportAllocs()
				b.SetBytes(frameSize(len(data)))
				before := j.Stats()
				b.ResetTimer()
				var wg sync.WaitGroup
				for w := range writers {
					n := b.N / writers
					if w < b.N%writers {
						n++
					}
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := range n {
							if err := j.Append(Record{Key: uint64(i), Kind: Update, Data: data}); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				b.StopTimer()
				after := j.Stats()
				b.ReportMetric(float64(after.Syncs-before.Syncs)/float64(b.N), "syncs/op")
				b.ReportMetric(float64(after.Writes-before.Writes)/float64(b.N), "writes/op")
			})
		}
	}
}

// BenchmarkReplay measures Open replaying 1,000,000 records of 16 bytes
// (about 33 MB) into a callback that only counts them.
func BenchmarkReplay(b *testing.B) {
	const records = 1_000_000
	dir := b.TempDir()
	j, _, err := Open(dir, Options{Sync: Never, Logger: quietLogger}, nil)
	if err != nil {
		b.Fatal(err)
	}
	data := make([]byte, 16)
	for i := range records {
		if _, err := j.AppendAsync(Record{Key: uint64(i), Kind: Full, Data: data}); err != nil {
			b.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(records * frameSize(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		n := 0
		j, rep, err := Open(dir, Options{Logger: quietLogger}, func(Record) error { n++; return nil })
		if err != nil {
			b.Fatal(err)
		}
		if n != records || rep.Records != records {
			b.Fatalf("replayed %d", n)
		}
		j.Close()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/records, "ns/record")
}
