package config

import "testing"

func TestErrorAtPlacesSectionsAndFields(t *testing.T) {
	c, err := Parse("j.yaml", []byte("gearman:\n  listen: \":4731\"\ndata:\n  dir: /tmp/x\n"))
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"data":           "j.yaml:4:3: data: no",
		"gearman.listen": "j.yaml:2:11: gearman.listen: no",
	} {
		if got := c.ErrorAt(path, "no").Error(); got != want {
			t.Errorf("ErrorAt(%q) = %q, want %q", path, got, want)
		}
	}
	if err := c.Set("data.dir", ""); err != nil {
		t.Fatal(err)
	}
	if got := c.ErrorAt("data.dir", "no").Error(); got != "command line: data.dir: no" {
		t.Errorf("after Set: %q", got)
	}
	if got := Default().ErrorAt("tls", "no").Error(); got != "tls: no" {
		t.Errorf("code-built config: %q", got)
	}
}
