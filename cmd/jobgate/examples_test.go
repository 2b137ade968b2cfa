package main

import (
	"bytes"
	"path/filepath"
	"testing"
)

// TestCheckConfigAcceptsEveryExample runs "jobgate check-config" on every
// examples/config/*.yaml: each example must be a file this build runs with.
func TestCheckConfigAcceptsEveryExample(t *testing.T) {
	files, err := filepath.Glob("../../examples/config/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no examples/config/*.yaml")
	}
	for _, f := range files {
		var out, errs bytes.Buffer
		if code := run([]string{"check-config", f}, &out, &errs); code != 0 {
			t.Errorf("check-config %s: exit %d\n%s", f, code, errs.String())
		}
	}
}
