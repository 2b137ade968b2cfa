package examples_test

import (
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/jobgate/jobgate/config"
)

// Every example configuration loads without error.
func TestConfigExamplesLoad(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("config", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no config/*.yaml")
	}
	for _, f := range files {
		if _, err := config.Load(f); err != nil {
			t.Errorf("%s:\n%v", f, err)
		}
	}
}

// config/default.yaml is config.Default written out: it sets every field
// but loop_spin, and loading it gives the defaults. A new field in package
// config fails this test until it is added to the file. loop_spin is only
// shown: its default depends on the backends (Config.EventLoopSpin), and
// a copy of the file that set it would keep it with upstreams on loopback.
func TestConfigDefaultIsDefault(t *testing.T) {
	t.Parallel()
	c, err := config.Load(filepath.Join("config", "default.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range config.Fields() {
		// A list's elements have no defaults to write; the list itself
		// ("backends[]" is the list "backends") must be there.
		if strings.Contains(path, "[].") {
			continue
		}
		path = strings.TrimSuffix(path, "[]")
		if path == "loop_spin" {
			if c.IsSet(path) {
				t.Error("default.yaml sets loop_spin; it should only show it")
			}
			continue
		}
		if !c.IsSet(path) {
			t.Errorf("default.yaml does not set %s", path)
		}
	}
	if diff := diffExported(reflect.ValueOf(*c), reflect.ValueOf(*config.Default()), "config"); diff != "" {
		t.Errorf("default.yaml differs from config.Default(): %s", diff)
	}
}

// diffExported compares the exported fields of a and b recursively (the
// unexported ones of config.Config record where values came from) and
// describes the first difference, or returns "". A nil slice equals an
// empty one: the file writes "[]" for an empty list.
func diffExported(a, b reflect.Value, path string) string {
	switch a.Kind() {
	case reflect.Struct:
		for i := range a.NumField() {
			f := a.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			if d := diffExported(a.Field(i), b.Field(i), path+"."+f.Name); d != "" {
				return d
			}
		}
		return ""
	case reflect.Slice:
		if a.Len() != b.Len() {
			return fmt.Sprintf("%s: %d elements, want %d", path, a.Len(), b.Len())
		}
		for i := range a.Len() {
			if d := diffExported(a.Index(i), b.Index(i), fmt.Sprintf("%s[%d]", path, i)); d != "" {
				return d
			}
		}
		return ""
	case reflect.Pointer, reflect.Map, reflect.Interface, reflect.Func, reflect.Chan:
		if !reflect.DeepEqual(a.Interface(), b.Interface()) {
			return fmt.Sprintf("%s: %v, want %v", path, a, b)
		}
		return ""
	default:
		if a.Interface() != b.Interface() {
			return fmt.Sprintf("%s: %v, want %v", path, a, b)
		}
		return ""
	}
}
