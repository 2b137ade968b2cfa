package config

import "testing"

func TestGetRoundTripsEveryFlagField(t *testing.T) {
	def := Default()
	for flag, path := range FlagFields() {
		text, err := def.Get(path)
		if err != nil {
			t.Errorf("-%s: Get(%q): %v", flag, path, err)
			continue
		}
		c := Default()
		if err := c.Set(path, text); err != nil {
			t.Errorf("-%s: Set(%q, %q) of the default's own text: %v", flag, path, text, err)
			continue
		}
		again, _ := c.Get(path)
		if again != text {
			t.Errorf("-%s: %q after Set reads %q", flag, text, again)
		}
	}
}

func TestGetFormats(t *testing.T) {
	c := Default()
	for path, want := range map[string]string{
		"gearman.listen":          ":4730",
		"gearman.max_packet_size": "64MiB",
		"beanstalk.max_job_size":  "65535",
		"data.fsync_interval":     "50ms",
		"gearman.exceptions":      "false",
	} {
		if got, err := c.Get(path); err != nil || got != want {
			t.Errorf("Get(%q) = %q, %v; want %q", path, got, err, want)
		}
	}
	if _, err := c.Get("backends"); err == nil {
		t.Error("Get of a list of structs succeeded")
	}
	if _, err := c.Get("no.such"); err == nil {
		t.Error("Get of an unknown path succeeded")
	}
}
