package gearman

import (
	"math"
	"testing"
)

// TestParseLeadingInt checks strtoll's reading: white space, sign, digits
// up to the first other byte, saturation at the int64 limits.
func TestParseLeadingInt(t *testing.T) {
	for in, want := range map[string]int64{
		"":                      0,
		"x":                     0,
		"12abc":                 12,
		" \t\n+7":               7,
		"-1":                    -1,
		"4294967296":            4294967296,
		"9223372036854775807":   math.MaxInt64,
		"9223372036854775808":   math.MaxInt64,
		"99999999999999999999":  math.MaxInt64,
		"-9223372036854775808":  math.MinInt64,
		"-9223372036854775809":  math.MinInt64,
		"-99999999999999999999": math.MinInt64,
	} {
		if got := parseLeadingInt([]byte(in)); got != want {
			t.Errorf("parseLeadingInt(%q) = %d, want %d", in, got, want)
		}
	}
}
