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
