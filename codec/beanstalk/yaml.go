package beanstalk

import (
	"bytes"
	"errors"
	"strconv"
	"time"
)

// YAMLBuilder builds the body of an OK reply in beanstalkd's exact form:
// "---\n", then a "key: value\n" line per entry of a dictionary (stats,
// stats-tube, stats-job) or a "- name\n" line per item of a list
// (list-tubes, list-tubes-watched). The body excludes the "\r\n" that
// follows it on the wire; Reply.AppendTo adds that.
//
// The zero value is ready to use. Reset keeps the memory, so a builder
// reused per connection formats with no allocation once it has grown.
type YAMLBuilder struct {
	buf []byte
}

// Reset starts a new document, keeping the memory.
func (b *YAMLBuilder) Reset() { b.buf = b.buf[:0] }

// Bytes returns the document: "---\n" and the lines so far. It aliases the
// builder's memory until the next Reset.
func (b *YAMLBuilder) Bytes() []byte {
	b.start()
	return b.buf
}

func (b *YAMLBuilder) start() {
	if len(b.buf) == 0 {
		b.buf = append(b.buf, "---\n"...)
	}
}

func (b *YAMLBuilder) key(k string) {
	b.start()
	b.buf = append(append(b.buf, k...), ": "...)
}

// Uint adds "key: v", as beanstalkd's %u and PRIu64.
func (b *YAMLBuilder) Uint(key string, v uint64) {
	b.key(key)
	b.buf = append(strconv.AppendUint(b.buf, v, 10), '\n')
}

// Int adds "key: v", as beanstalkd's %d and PRId64.
func (b *YAMLBuilder) Int(key string, v int64) {
	b.key(key)
	b.buf = append(strconv.AppendInt(b.buf, v, 10), '\n')
}

// Bool adds "key: true" or "key: false", as beanstalkd's draining.
func (b *YAMLBuilder) Bool(key string, v bool) {
	b.key(key)
	b.buf = append(strconv.AppendBool(b.buf, v), '\n')
}

// Raw adds "key: v" with v unquoted, as beanstalkd prints a job's state and
// the server id (and, before 1.13, names).
func (b *YAMLBuilder) Raw(key, v string) {
	b.key(key)
	b.buf = append(append(b.buf, v...), '\n')
}

// Quoted adds `key: "v"`, as beanstalkd 1.13 prints names, the version,
// hostname, os and platform, so that a name such as "123" or "true" stays a
// string. beanstalkd copies v verbatim (its values never need escaping);
// here '"', '\' and control bytes are escaped YAML's way, to stay valid.
func (b *YAMLBuilder) Quoted(key, v string) {
	b.key(key)
	b.buf = append(b.buf, '"')
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '"' || c == '\\':
			b.buf = append(b.buf, '\\', c)
		case c < 0x20 || c == 0x7f:
			b.buf = append(b.buf, '\\', 'x', hexDigits[c>>4], hexDigits[c&15])
		default:
			b.buf = append(b.buf, c)
		}
	}
	b.buf = append(b.buf, '"', '\n')
}

const hexDigits = "0123456789abcdef"

// Seconds adds "key: s.uuuuuu", d in seconds with six decimals, truncated
// to the microsecond: beanstalkd's "%d.%06d" of rusage-utime and
// rusage-stime.
func (b *YAMLBuilder) Seconds(key string, d time.Duration) {
	b.key(key)
	b.buf = appendSeconds(b.buf, d)
	b.buf = append(b.buf, '\n')
}

func appendSeconds(dst []byte, d time.Duration) []byte {
	u := uint64(d)
	if d < 0 {
		dst = append(dst, '-')
		u = -u
	}
	us := u / uint64(time.Microsecond)
	dst = strconv.AppendUint(dst, us/1e6, 10)
	frac := us % 1e6
	dst = append(dst, '.')
	for div := uint64(1e5); div > 0; div /= 10 {
		dst = append(dst, byte('0'+frac/div%10))
	}
	return dst
}

// Item adds the list item "- name".
func (b *YAMLBuilder) Item(name string) {
	b.start()
	b.buf = append(append(append(b.buf, "- "...), name...), '\n')
}

// ItemBytes is Item for a name held in a byte slice.
func (b *YAMLBuilder) ItemBytes(name []byte) {
	b.start()
	b.buf = append(append(append(b.buf, "- "...), name...), '\n')
}

var errNoDocStart = errors.New(`beanstalk: YAML body does not start with "---\n"`)

// ParseList calls fn with each item of a list body as beanstalkd writes it
// ("---\n", then "- name\n" lines), in order. The items alias body. An
// error reports a body not in that form; fn has then seen the items before
// the bad line.
func ParseList(body []byte, fn func(item []byte)) error {
	return yamlLines(body, func(n int, line []byte) error {
		item, ok := bytes.CutPrefix(line, []byte("- "))
		if !ok {
			return yamlError(n, "not a list item")
		}
		fn(item)
		return nil
	})
}

// ParseDict calls fn with each key and value of a dictionary body as
// beanstalkd writes it ("---\n", then "key: value\n" lines), in order. A
// value in double quotes comes without them (and with '\"', '\\' and '\xNN'
// escapes undone, which beanstalkd never writes). Keys and values alias
// body, except an unescaped value. An error reports a body not in that
// form; fn has then seen the entries before the bad line.
func ParseDict(body []byte, fn func(key, value []byte)) error {
	return yamlLines(body, func(n int, line []byte) error {
		key, value, ok := bytes.Cut(line, []byte(": "))
		if !ok || len(key) == 0 {
			return yamlError(n, "not a key: value line")
		}
		if len(value) >= 2 && value[0] == '"' && value[len(value)-1] == '"' {
			value = value[1 : len(value)-1]
			if bytes.IndexByte(value, '\\') >= 0 {
				var ok bool
				if value, ok = unescape(value); !ok {
					return yamlError(n, "bad escape in quoted value")
				}
			}
		}
		fn(key, value)
		return nil
	})
}

// yamlLines checks the document start and calls fn with each line after it,
// numbered from 2, without its "\n" (the last one may lack it).
func yamlLines(body []byte, fn func(n int, line []byte) error) error {
	rest, ok := bytes.CutPrefix(body, []byte("---\n"))
	if !ok {
		return errNoDocStart
	}
	for n := 2; len(rest) > 0; n++ {
		line, after, _ := bytes.Cut(rest, []byte("\n"))
		if err := fn(n, line); err != nil {
			return err
		}
		rest = after
	}
	return nil
}

func yamlError(line int, what string) error {
	return errors.New("beanstalk: YAML line " + strconv.Itoa(line) + ": " + what)
}

// unescape undoes the escapes Quoted writes, into a new slice.
func unescape(v []byte) ([]byte, bool) {
	out := make([]byte, 0, len(v))
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		if i+1 >= len(v) {
			return nil, false
		}
		switch i++; v[i] {
		case '"', '\\':
			out = append(out, v[i])
		case 'x':
			if i+2 >= len(v) {
				return nil, false
			}
			x, err := strconv.ParseUint(string(v[i+1:i+3]), 16, 8)
			if err != nil {
				return nil, false
			}
			out = append(out, byte(x))
			i += 2
		default:
			return nil, false
		}
	}
	return out, true
}
