package config

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse feeds arbitrary bytes to Parse: it must never panic, a success
// must validate, and a failure must be a non-empty, sorted Errors whose every
// entry has a message. Seeds: testdata/*.yaml and testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.yaml")
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("fuzz.yaml", data)
		if err == nil {
			if c == nil {
				t.Fatal("nil Config and nil error")
			}
			if err := c.Validate(); err != nil {
				t.Fatalf("Parse succeeded but Validate fails: %v", err)
			}
			_ = c.Warnings().Error()
			return
		}
		var es Errors
		if !errors.As(err, &es) || len(es) == 0 {
			t.Fatalf("error %T %v is not a non-empty Errors", err, err)
		}
		for i, e := range es {
			if e.Msg == "" || e.File != "fuzz.yaml" {
				t.Errorf("bad FieldError %+v", e)
			}
			if i > 0 && e.Line != 0 && (es[i-1].Line > e.Line || es[i-1].Line == e.Line && es[i-1].Col > e.Col) {
				t.Errorf("not sorted: %v before %v", es[i-1], e)
			}
		}
	})
}
