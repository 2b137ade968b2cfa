package beanstalk

// Defaults of Limits, as beanstalkd's.
const (
	// DefaultMaxLine is beanstalkd's LINE_BUF_SIZE: 224 bytes including "\r\n".
	DefaultMaxLine = 224
	// DefaultMaxJobSize is beanstalkd's default -z: 65535 bytes.
	DefaultMaxJobSize = 1<<16 - 1
	// DefaultMaxYAMLSize bounds the YAML body of an OK reply read from a
	// server. beanstalkd has no such limit (list-tubes grows with the number
	// of tubes); 16 MiB holds some 80,000 maximal tube names.
	DefaultMaxYAMLSize = 16 << 20
)

// Limits are the protocol limits a Reader or ReplyReader enforces before it
// allocates. A zero field means its default.
type Limits struct {
	// MaxLine is the longest command or reply line, in bytes including its
	// "\r\n". Default DefaultMaxLine.
	MaxLine int
	// MaxJobSize is the largest job body, in bytes (beanstalkd's -z): a put
	// with a larger one gets JOB_TOO_BIG, a RESERVED or FOUND reply with a
	// larger one a *ReplyTooBigError. Default DefaultMaxJobSize.
	MaxJobSize int
	// MaxYAMLSize is the largest body of an OK reply a ReplyReader accepts.
	// Default DefaultMaxYAMLSize.
	MaxYAMLSize int
}

// withDefaults returns l with every zero or negative field set to its
// default.
func (l Limits) withDefaults() Limits {
	if l.MaxLine <= 0 {
		l.MaxLine = DefaultMaxLine
	}
	if l.MaxJobSize <= 0 {
		l.MaxJobSize = DefaultMaxJobSize
	}
	if l.MaxYAMLSize <= 0 {
		l.MaxYAMLSize = DefaultMaxYAMLSize
	}
	return l
}
