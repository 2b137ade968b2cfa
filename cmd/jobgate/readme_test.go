package main

import (
	"os"
	"strings"
	"testing"

	"github.com/jobgate/jobgate/config"
)

// TestReadmeDocumentsEveryFlag checks the README's flag table against the
// flags the command defines: each flag with its config field and default.
func TestReadmeDocumentsEveryFlag(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(string(readme), "\n") {
		if strings.HasPrefix(line, "| `-") {
			name := strings.TrimPrefix(strings.Fields(line)[1], "`-")
			rows[strings.TrimSuffix(name, "`")] = line
		}
	}
	paths := config.FlagFields()
	def := config.Default()
	for _, spec := range flagSpecs {
		row, ok := rows[spec.name]
		if !ok {
			t.Errorf("README has no row for -%s", spec.name)
			continue
		}
		if !strings.Contains(row, "`"+paths[spec.name]+"`") {
			t.Errorf("README row for -%s does not name its field %s", spec.name, paths[spec.name])
		}
		value, _ := def.Get(paths[spec.name])
		if value != "" && !strings.Contains(row, "`"+value+"`") {
			t.Errorf("README row for -%s does not show its default %q", spec.name, value)
		}
		delete(rows, spec.name)
	}
	delete(rows, "config") // not config fields: parsed by main itself
	delete(rows, "gearman-upstream")
	delete(rows, "beanstalk-upstream")
	for name := range rows {
		t.Errorf("README documents -%s, which the command does not define", name)
	}
}

// TestReadmeDocumentsEveryField checks the README's field table ("Every
// field") against config.Fields: the same set of fields, each top-level
// one with its default.
func TestReadmeDocumentsEveryField(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n### Every field\n")
	if !ok {
		t.Fatal("README has no \"### Every field\" section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	rows := map[string]string{}
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(line, " | ")
		path := strings.Trim(strings.TrimPrefix(cells[0], "| "), "`")
		if _, dup := rows[path]; dup {
			t.Errorf("README documents %s twice", path)
		}
		rows[path] = line
	}
	def := config.Default()
	for _, path := range config.Fields() {
		row, ok := rows[path]
		if !ok {
			t.Errorf("README's field table has no row for %s", path)
			continue
		}
		delete(rows, path)
		if strings.Contains(path, "[]") {
			continue // list elements have no value in Default
		}
		value, err := def.Get(path)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		cells := strings.Split(row, " | ")
		if got := strings.TrimSpace(cells[1]); value == "" && got != "" || value != "" && got != "`"+value+"`" {
			t.Errorf("README gives %s the default %s, the code %q", path, got, value)
		}
	}
	for path := range rows {
		t.Errorf("README documents %s, which is not a config field", path)
	}
}
