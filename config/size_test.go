package config

import (
	"flag"
	"io"
	"testing"
)

func TestParseSize(t *testing.T) {
	good := []struct {
		in   string
		want Size
	}{
		{"0", 0},
		{"65535", 65535},
		{"65_535", 65535},
		{"64MiB", 64 * MiB},
		{"64 MiB", 64 * MiB},
		{"64mib", 64 * MiB},
		{"8KiB", 8 * KiB},
		{"1KB", 1000},
		{"3MB", 3_000_000},
		{"1GB", 1_000_000_000},
		{"2GiB", 2 * GiB},
		{"1TiB", TiB},
		{"10B", 10},
		{" 7 ", 7},
		{"-1", -1},
		{"8388607TiB", 8388607 * TiB},
	}
	for _, tt := range good {
		got, err := ParseSize(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
	bad := map[string]string{
		"":                     `"" is not a size: want bytes as an integer, or an integer and a unit such as 64MiB`,
		"MiB":                  `"MiB" is not a size: want bytes as an integer, or an integer and a unit such as 64MiB`,
		"1.5MiB":               `"1.5MiB" is not a size: no fractions; use a smaller unit, as in 1536KiB`,
		"64 megs":              `"64 megs" is not a size: unknown unit "megs" (want B, KB, KiB, MB, MiB, GB, GiB, TB or TiB)`,
		"_1":                   `"_1" is not a size: want bytes as an integer, or an integer and a unit such as 64MiB`,
		"8388608TiB":           `"8388608TiB" is too large a size`,
		"99999999999999999999": `"99999999999999999999" is too large a size`,
		"0x10":                 `"0x10" is not a size: unknown unit "x10" (want B, KB, KiB, MB, MiB, GB, GiB, TB or TiB)`,
	}
	for in, want := range bad {
		if _, err := ParseSize(in); err == nil || err.Error() != want {
			t.Errorf("ParseSize(%q) error = %v, want %s", in, err, want)
		}
	}
}

func TestSizeString(t *testing.T) {
	for s, want := range map[Size]string{0: "0", 65535: "65535", 64 * MiB: "64MiB", 1536 * KiB: "1536KiB", 3 * GiB: "3GiB", 2 * TiB: "2TiB", -KiB: "-1KiB"} {
		if got := s.String(); got != want {
			t.Errorf("Size(%d).String() = %q, want %q", int64(s), got, want)
		}
		back, err := ParseSize(s.String())
		if err != nil || back != s {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", s.String(), back, err, int64(s))
		}
	}
}

// A Size backs a flag through flag.TextVar.
func TestSizeFlag(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var s Size
	fs.TextVar(&s, "max", 64*MiB, "")
	if err := fs.Parse([]string{"-max", "2KiB"}); err != nil || s != 2*KiB {
		t.Fatalf("Parse: %v, s = %v", err, s)
	}
	if got := fs.Lookup("max").DefValue; got != "64MiB" {
		t.Errorf("DefValue = %q", got)
	}
	if err := fs.Parse([]string{"-max", "lots"}); err == nil {
		t.Error("bad size accepted")
	}
	if (3 * GiB).Int() != int(3*GiB) {
		t.Error("Int")
	}
}
