package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Size is a number of bytes. In a file it is an integer ("65535") or an
// integer with a unit, with or without a space before it: B; KB, MB, GB, TB
// (powers of 1000); KiB, MiB, GiB, TiB (powers of 1024). Units are not case
// sensitive ("64mib" is 64MiB). Fractions are not accepted.
//
// Size implements [encoding.TextUnmarshaler] and [encoding.TextMarshaler],
// so it can back a flag with [flag.TextVar].
type Size int64

// Common sizes.
const (
	KiB Size = 1 << 10
	MiB Size = 1 << 20
	GiB Size = 1 << 30
	TiB Size = 1 << 40
)

// sizeUnits maps lower-case unit names to their multipliers.
var sizeUnits = map[string]int64{
	"b":  1,
	"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
}

// ParseSize parses a size as [Size] documents.
func ParseSize(s string) (Size, error) {
	t := strings.TrimSpace(s)
	i := 0
	if i < len(t) && (t[i] == '-' || t[i] == '+') {
		i++
	}
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '_') {
		i++
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	mult := int64(1)
	if strings.HasPrefix(unit, ".") {
		return 0, fmt.Errorf("%q is not a size: no fractions; use a smaller unit, as in 1536KiB", s)
	}
	if unit != "" {
		m, ok := sizeUnits[unit]
		if !ok {
			return 0, fmt.Errorf("%q is not a size: unknown unit %q (want B, KB, KiB, MB, MiB, GB, GiB, TB or TiB)", s, strings.TrimSpace(t[i:]))
		}
		mult = m
	}
	n, err := strconv.ParseInt(strings.ReplaceAll(num, "_", ""), 10, 64)
	if err != nil || num == "" || strings.HasPrefix(num, "_") || strings.HasSuffix(num, "_") {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return 0, fmt.Errorf("%q is too large a size", s)
		}
		return 0, fmt.Errorf("%q is not a size: want bytes as an integer, or an integer and a unit such as 64MiB", s)
	}
	if n > math.MaxInt64/mult || n < math.MinInt64/mult {
		return 0, fmt.Errorf("%q is too large a size", s)
	}
	return Size(n * mult), nil
}

// String formats s with the largest binary unit that divides it exactly,
// e.g. "64MiB", "65535" or "1536KiB"; ParseSize reads it back.
func (s Size) String() string {
	for _, u := range []struct {
		n    Size
		name string
	}{{TiB, "TiB"}, {GiB, "GiB"}, {MiB, "MiB"}, {KiB, "KiB"}} {
		if s != 0 && s%u.n == 0 {
			return strconv.FormatInt(int64(s/u.n), 10) + u.name
		}
	}
	return strconv.FormatInt(int64(s), 10)
}

// Int returns s as an int, saturating on 32-bit platforms.
func (s Size) Int() int {
	switch {
	case int64(s) > int64(math.MaxInt):
		return math.MaxInt
	case int64(s) < int64(math.MinInt):
		return math.MinInt
	}
	return int(s)
}

// MarshalText implements [encoding.TextMarshaler] with [Size.String].
func (s Size) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText implements [encoding.TextUnmarshaler] with [ParseSize].
func (s *Size) UnmarshalText(b []byte) error {
	v, err := ParseSize(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}
