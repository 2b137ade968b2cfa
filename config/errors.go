package config

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
)

// FieldError is one problem with one field.
type FieldError struct {
	// File is the config file's name, or "command line" for a value set
	// with [Config.Set]; empty for a Config built in code.
	File string
	// Line and Col locate the value (or the key, for an unknown or
	// repeated field) in File, from 1; 0 when unknown.
	Line, Col int
	// Path is the field's path in the file's terms, e.g.
	// "backends[1].address"; empty for a problem with the file as a whole,
	// such as a YAML syntax error.
	Path string
	// Msg says what is wrong, and when it helps, what would be right.
	Msg string
}

// Error formats e as "file:line:col: path: msg", leaving out the parts that
// are unknown.
func (e *FieldError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(":")
	}
	if e.Line > 0 {
		if e.File != "" {
			b.WriteString(strconv.Itoa(e.Line))
		} else {
			b.WriteString("line " + strconv.Itoa(e.Line))
		}
		if e.Col > 0 {
			b.WriteString(":" + strconv.Itoa(e.Col))
		}
		b.WriteString(":")
	}
	if b.Len() > 0 {
		b.WriteString(" ")
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found in a configuration, sorted by position.
// It is the error type of [Load], [Parse], [Upstreams] and
// [Config.Validate], which return a nil error rather than an empty Errors.
type Errors []*FieldError

// Error prints one error per line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the errors, for [errors.Is] and [errors.As].
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// sort orders es by file position; errors without a line keep their
// relative order and come after those with one (they are about values set
// in code or on the command line, and about the whole of a list).
func (es Errors) sort() {
	slices.SortStableFunc(es, func(a, b *FieldError) int {
		if (a.Line == 0) != (b.Line == 0) {
			if a.Line == 0 {
				return 1
			}
			return -1
		}
		return cmp.Or(
			cmp.Compare(a.File, b.File),
			cmp.Compare(a.Line, b.Line),
			cmp.Compare(a.Col, b.Col),
		)
	})
}

// err returns es as an error: nil when es is empty, so that a caller's
// err != nil means what it says.
func (es Errors) err() error {
	if len(es) == 0 {
		return nil
	}
	es.sort()
	return es
}

// pos is a position in a file.
type pos struct{ line, col int }

// source records where a Config's fields came from.
type source struct {
	file string
	// at maps a field path ("gearman.listen", "backends[0]") to the
	// position of its value in file. A path set on the command line maps
	// to the zero pos.
	at map[string]pos
	// keys maps a field path to the position of its key, where a missing
	// field inside it is reported. List elements have no key.
	keys map[string]pos
	// cli holds the paths set with Config.Set.
	cli map[string]bool
}

// locate returns the FieldError fields for path: the position of path's
// value or, when the file does not set path itself, of the key of the
// nearest enclosing section it does set (a missing field is reported at
// its section's name; a list element's at its first line).
func (s *source) locate(path string) (file string, line, col int) {
	if s == nil {
		return "", 0, 0
	}
	for p := path; p != ""; p = parentPath(p) {
		if s.cli[p] {
			return "command line", 0, 0
		}
		if at, ok := s.keys[p]; ok && p != path {
			return s.file, at.line, at.col
		}
		if at, ok := s.at[p]; ok {
			return s.file, at.line, at.col
		}
	}
	return s.file, 0, 0
}

// parentPath strips the last element of a path: "a.b[2].c" -> "a.b[2]" ->
// "a.b" -> "a" -> "".
func parentPath(p string) string {
	i := strings.LastIndexAny(p, ".[")
	if i < 0 {
		return ""
	}
	return p[:i]
}

// ErrorAt returns an error about the field or section at path, placed where
// the file (or the command line) set it, for checks made outside this
// package, such as the command refusing a feature it does not run.
func (c *Config) ErrorAt(path, msg string) *FieldError {
	e := &FieldError{Path: path, Msg: msg}
	e.File, e.Line, e.Col = c.src.locate(path)
	return e
}
