package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Load reads the YAML file at path over [Default] and validates the result.
// The error is [Errors] for problems in the file, each naming its line and
// column, or the error of reading the file.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

// Parse is [Load] for a file already read: name is used in error messages
// (empty means "config").
func Parse(name string, data []byte) (*Config, error) {
	if name == "" {
		name = "config"
	}
	c := Default()
	d := &decoder{src: &source{file: name, at: map[string]pos{}, keys: map[string]pos{}}}
	d.document(data, reflect.ValueOf(c).Elem())
	c.src = d.src
	if len(d.errs) > 0 {
		// Decoding errors first: a value that did not decode has its
		// default, and validating that would mislead. Validation errors
		// are added only for fields that decoded.
		if verr, ok := c.Validate().(Errors); ok {
			for _, e := range verr {
				if !d.failed(e.Path) {
					d.errs = append(d.errs, e)
				}
			}
		}
		return nil, d.errs.err()
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// IsSet reports whether the file set the field at path (a path as in
// [Fields], with list indices: "gearman.listen", "backends[0].tls"), or
// anything inside it, or [Config.Set] did. False for a Config built in code.
func (c *Config) IsSet(path string) bool {
	if c.src == nil {
		return false
	}
	if _, ok := c.src.at[path]; ok || c.src.cli[path] {
		return true
	}
	for p := range c.src.at {
		if strings.HasPrefix(p, path) && len(p) > len(path) && (p[len(path)] == '.' || p[len(path)] == '[') {
			return true
		}
	}
	return false
}

// Set sets the field at path from its text form, as a command-line flag
// would: "gearman.listen" ":4730", "data.fsync_interval" "10ms",
// "gearman.max_packet_size" "1MiB", "tls.acme.domains" "a.example,b.example"
// (a list of strings is comma-separated). List elements are addressed with
// an index, "backends[0].address". Set does not validate the configuration
// as a whole; call [Config.Validate] after the last Set. Errors from
// Validate about a field Set last name "command line" as their file.
func (c *Config) Set(path, value string) error {
	v, err := fieldByPath(reflect.ValueOf(c).Elem(), path)
	if err == nil {
		err = setText(v, value)
	}
	if err != nil {
		return &FieldError{File: "command line", Path: path, Msg: err.Error()}
	}
	// Copy the source so that copies of c keep theirs.
	src := &source{at: map[string]pos{}, keys: map[string]pos{}, cli: map[string]bool{path: true}}
	if c.src != nil {
		src.file = c.src.file
		for p, at := range c.src.at {
			if p != path && !strings.HasPrefix(p, path+".") && !strings.HasPrefix(p, path+"[") {
				src.at[p] = at
			}
		}
		for p, at := range c.src.keys {
			src.keys[p] = at
		}
		for p := range c.src.cli {
			src.cli[p] = true
		}
	}
	c.src = src
	return nil
}

// maxNodes bounds the nodes one document may expand to through aliases, so
// that a small file cannot make decoding take forever ("billion laughs").
const maxNodes = 100_000

// decoder decodes a YAML node tree into a Config by reflection, recording
// each field's position and every error.
type decoder struct {
	src   *source
	errs  Errors
	nodes int
	// bad holds the paths whose values failed to decode.
	bad map[string]bool
	// merging holds the mappings being merged with "<<", to catch a
	// mapping that merges itself.
	merging map[*yaml.Node]bool
}

func (d *decoder) errorf(n *yaml.Node, path, format string, args ...any) {
	e := &FieldError{File: d.src.file, Path: path, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line, e.Col = n.Line, n.Column
	}
	d.errs = append(d.errs, e)
	if d.bad == nil {
		d.bad = map[string]bool{}
	}
	d.bad[path] = true
}

// failed reports whether path, or a path enclosing it, failed to decode.
func (d *decoder) failed(path string) bool {
	for p := path; p != ""; p = parentPath(p) {
		if d.bad[p] {
			return true
		}
	}
	return false
}

// budget counts one more value decoded and reports whether the document is
// still within maxNodes; it records the error once.
func (d *decoder) budget(n *yaml.Node, path string) bool {
	d.nodes++
	if d.nodes == maxNodes+1 {
		d.errorf(n, path, "the document expands to more than %d values through aliases", maxNodes)
	}
	return d.nodes <= maxNodes
}

// yamlLine matches the line number yaml.v3 puts in its syntax errors.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// document parses data and decodes its one document into v.
func (d *decoder) document(data []byte, v reflect.Value) {
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := safeDecode(dec, &root); err != nil {
		if err != io.EOF {
			d.syntax(err, data)
		}
		return
	}
	var extra yaml.Node
	switch err := safeDecode(dec, &extra); {
	case err == io.EOF:
	case err != nil:
		d.syntax(err, data)
		return
	default:
		d.errorf(&extra, "", "a config file holds one YAML document; this is a second one")
		return
	}
	if root.Kind != yaml.DocumentNode || len(root.Content) == 0 {
		return
	}
	d.value(root.Content[0], v, "")
}

// safeDecode decodes one document, turning a panic of the YAML parser into
// an error: a config file must never crash jobgate.
func safeDecode(dec *yaml.Decoder, n *yaml.Node) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("yaml: %v", r)
		}
	}()
	return dec.Decode(n)
}

// syntax records a YAML syntax error, with the line the parser names. That
// line is sometimes the start of the enclosing block rather than the line at
// fault, so for the commonest mistake, a tab in indentation, the position is
// found here instead.
func (d *decoder) syntax(err error, data []byte) {
	e := &FieldError{File: d.src.file, Msg: "YAML syntax: " + strings.TrimPrefix(err.Error(), "yaml: ")}
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		e.Line, _ = strconv.Atoi(m[1])
		e.Msg = "YAML syntax: " + m[2]
	}
	if strings.Contains(e.Msg, "tab character") {
		for i, line := range strings.Split(string(data), "\n") {
			indent := len(line) - len(strings.TrimLeft(line, " \t"))
			if col := strings.IndexByte(line[:indent], '\t'); col >= 0 {
				e.Line, e.Col = i+1, col+1
				e.Msg = "YAML syntax: a tab in indentation; YAML indents with spaces"
				break
			}
		}
	}
	d.errs = append(d.errs, e)
}

var (
	durationType = reflect.TypeFor[time.Duration]()
	sizeType     = reflect.TypeFor[Size]()
)

// value decodes n into v, the field at path.
func (d *decoder) value(n *yaml.Node, v reflect.Value, path string) {
	if !d.budget(n, path) {
		return
	}
	at := n
	if n.Kind == yaml.AliasNode {
		n = n.Alias
		if n == nil {
			d.errorf(at, path, "unknown alias")
			return
		}
	}
	if path != "" {
		d.src.at[path] = pos{at.Line, at.Column}
	}
	null := n.Kind == yaml.ScalarNode && n.Tag == "!!null"

	switch {
	case v.Kind() == reflect.Struct:
		if null {
			return // an empty section keeps its defaults
		}
		if n.Kind != yaml.MappingNode {
			d.errorf(at, path, "want a mapping of fields, got %s", describe(n))
			return
		}
		d.mapping(n, v, path)
	case v.Kind() == reflect.Slice:
		if null {
			v.Set(reflect.Zero(v.Type()))
			return
		}
		if n.Kind != yaml.SequenceNode {
			d.errorf(at, path, "want a list, got %s", describe(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, e := range n.Content {
			s.Index(i).Set(elementDefault(v.Type().Elem()))
			d.value(e, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
		v.Set(s)
	default:
		if n.Kind != yaml.ScalarNode {
			d.errorf(at, path, "want %s, got %s", want(v.Type()), describe(n))
			return
		}
		if null {
			v.Set(reflect.Zero(v.Type()))
			return
		}
		if err := setScalar(v, n.Value, n.Tag); err != nil {
			d.errorf(at, path, "%v", err)
		}
	}
}

// mapping decodes the fields of mapping n into struct v. Keys merged in with
// "<<: *anchor" come first, so that explicit keys override them.
func (d *decoder) mapping(n *yaml.Node, v reflect.Value, path string) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, m := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Tag != "!!merge" {
			continue
		}
		for _, src := range mergeSources(m) {
			if !d.budget(src, path) {
				return
			}
			switch {
			case src.Kind != yaml.MappingNode:
				d.errorf(m, path, "<< merges a mapping or a list of mappings, got %s", describe(src))
			case d.merging[src]:
				d.errorf(m, path, "<< merges a mapping into itself")
			default:
				if d.merging == nil {
					d.merging = map[*yaml.Node]bool{}
				}
				d.merging[src] = true
				d.mapping(src, v, path)
				delete(d.merging, src)
			}
		}
	}
	d.fields(n, v, path, structFields(v.Type()))
}

// mergeSources returns the mappings a "<<" value names.
func mergeSources(m *yaml.Node) []*yaml.Node {
	if m.Kind == yaml.AliasNode && m.Alias != nil {
		m = m.Alias
	}
	if m.Kind != yaml.SequenceNode {
		return []*yaml.Node{m}
	}
	out := make([]*yaml.Node, 0, len(m.Content))
	for _, e := range m.Content {
		if e.Kind == yaml.AliasNode && e.Alias != nil {
			e = e.Alias
		}
		out = append(out, e)
	}
	return out
}

// fields decodes the key/value pairs of mapping n, merge keys aside.
func (d *decoder) fields(n *yaml.Node, v reflect.Value, path string, fields map[string]int) {
	seen := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.Tag == "!!merge" {
			continue
		}
		if k.Kind != yaml.ScalarNode {
			d.errorf(k, path, "a field name must be a plain string, got %s", describe(k))
			continue
		}
		sub := joinPath(path, k.Value)
		idx, ok := fields[k.Value]
		if !ok {
			d.errorf(k, sub, "unknown field%s", suggest(k.Value, fields))
			continue
		}
		if first, dup := seen[k.Value]; dup {
			d.errorf(k, sub, "set twice (first at line %d)", first.Line)
			continue
		}
		seen[k.Value] = k
		d.src.keys[sub] = pos{k.Line, k.Column}
		d.value(val, v.Field(idx), sub)
	}
}

func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// structFields maps the yaml names of t's fields to their indexes.
func structFields(t reflect.Type) map[string]int {
	m := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		if name := yamlName(t.Field(i)); name != "" {
			m[name] = i
		}
	}
	return m
}

// yamlName is the field's name in a file, "" for fields not in files.
func yamlName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "-" {
		return ""
	}
	return name
}

// suggest returns ` (did you mean "x"?)` for the known field nearest to
// name, or "" when none is close.
func suggest(name string, fields map[string]int) string {
	best, bestD := "", 3
	for f := range fields {
		if dist := editDistance(strings.ToLower(name), f); dist < bestD || dist == bestD && f < best {
			best, bestD = f, dist
		}
	}
	if best == "" || bestD > 2 {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// editDistance is the Levenshtein distance between a and b, capped at 10.
func editDistance(a, b string) int {
	if len(a) > 40 || len(b) > 40 {
		return 10
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			cur[j] = min(c, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return min(prev[len(b)], 10)
}

// describe names the kind of node n for messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "nothing"
		}
		return strconv.Quote(n.Value)
	}
	return "something else"
}

// want names what a scalar of type t looks like, for messages.
func want(t reflect.Type) string {
	switch {
	case t == durationType:
		return "a duration"
	case t == sizeType:
		return "a size"
	case t.Kind() == reflect.Bool:
		return "true or false"
	case t.Kind() == reflect.Int:
		return "an integer"
	case t.Kind() == reflect.Float64:
		return "a number"
	}
	return "a string"
}

// setScalar sets the leaf v from a YAML scalar's text and tag. The tag is
// empty for text from the command line, which skips the tag checks.
func setScalar(v reflect.Value, s, tag string) error {
	switch {
	case v.Type() == durationType:
		dur, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("%q is not a duration: want a number and a unit, like 50ms, 2s or 1h30m", s)
		}
		v.SetInt(int64(dur))
	case v.Type() == sizeType:
		size, err := ParseSize(s)
		if err != nil {
			return err
		}
		v.SetInt(int64(size))
	case v.Kind() == reflect.String:
		v.SetString(s)
	case v.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil || tag != "" && tag != "!!bool" {
			return fmt.Errorf("want true or false, got %q", s)
		}
		v.SetBool(b)
	case v.Kind() == reflect.Int:
		i, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 0, 64)
		if err != nil || tag != "" && tag != "!!int" {
			return fmt.Errorf("want an integer, got %q", s)
		}
		if i > math.MaxInt || i < math.MinInt || v.OverflowInt(i) {
			return fmt.Errorf("%s is out of range", s)
		}
		v.SetInt(i)
	case v.Kind() == reflect.Float64:
		f, err := strconv.ParseFloat(strings.ReplaceAll(s, "_", ""), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || tag != "" && tag != "!!float" && tag != "!!int" {
			return fmt.Errorf("want a number, got %q", s)
		}
		v.SetFloat(f)
	default:
		return fmt.Errorf("cannot set a %s", v.Type())
	}
	return nil
}

// setText sets v from command-line text: a leaf as setScalar, a list of
// strings from a comma-separated list.
func setText(v reflect.Value, s string) error {
	if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.String {
		var items []string
		for item := range strings.SplitSeq(s, ",") {
			if item = strings.TrimSpace(item); item != "" {
				items = append(items, item)
			}
		}
		v.Set(reflect.ValueOf(items).Convert(v.Type()))
		return nil
	}
	if v.Kind() == reflect.Struct || v.Kind() == reflect.Slice {
		return errors.New("not a single value; set its fields one by one")
	}
	return setScalar(v, s, "")
}

// fieldByPath finds the field at path in struct v.
func fieldByPath(v reflect.Value, path string) (reflect.Value, error) {
	rest := path
	for rest != "" {
		var seg string
		seg, rest, _ = strings.Cut(rest, ".")
		name, idx, hasIdx := strings.Cut(seg, "[")
		if v.Kind() != reflect.Struct {
			return reflect.Value{}, errors.New("no such field")
		}
		i, ok := structFields(v.Type())[name]
		if !ok {
			return reflect.Value{}, errors.New("no such field")
		}
		v = v.Field(i)
		for hasIdx {
			var num string
			num, idx, _ = strings.Cut(idx, "]")
			n, err := strconv.Atoi(num)
			if v.Kind() != reflect.Slice || err != nil || n < 0 || n >= v.Len() {
				return reflect.Value{}, fmt.Errorf("no element [%s]", num)
			}
			v = v.Index(n)
			idx, hasIdx = strings.CutPrefix(idx, "[")
		}
	}
	return v, nil
}
