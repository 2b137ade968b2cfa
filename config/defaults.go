package config

import (
	"reflect"
	"time"

	bscodec "github.com/jobgate/jobgate/codec/beanstalk"
	gmcodec "github.com/jobgate/jobgate/codec/gearman"
)

// This file is the one place defaults live: Default for the whole
// configuration and the element defaults that list entries in a file start
// from.

// Default returns the configuration jobgate runs with when there is no
// config file: Gearman on :4730 and Beanstalk on :11300 served by the local
// engines, the journal in ./jobgate-data, admin HTTP on 127.0.0.1:9090, no
// TLS, no auth, tracing only if the OTEL_* environment asks for it, and
// every name routed to the local backend. Each call returns a new Config.
func Default() *Config {
	return &Config{
		Gearman: Gearman{
			Listen:        ":4730",
			MaxPacketSize: gmcodec.DefaultMaxPacketSize,
			MaxAdminLine:  gmcodec.DefaultMaxLineSize,
		},
		Beanstalk: Beanstalk{
			Listen:     ":11300",
			MaxJobSize: bscodec.DefaultMaxJobSize,
		},
		Admin: Admin{Listen: "127.0.0.1:9090", MaxConnections: 64},
		Data: Data{
			Dir:           "./jobgate-data",
			Fsync:         FsyncInterval,
			FsyncInterval: 50 * time.Millisecond,
		},
		Limits: Limits{
			MaxConnections:   10000,
			WriteTimeout:     30 * time.Second,
			WriteBufferLimit: 16 * MiB,
			HandshakeTimeout: 10 * time.Second,
			MaxHandshakes:    1000,
		},
		Log:  Log{Level: LevelInfo, Format: FormatText},
		Auth: Auth{MaxBadTokens: 3},
		TLS: TLS{
			ACME:       ACME{ChallengeListen: ":80"},
			MinVersion: TLS12,
			ClientAuth: ClientAuthNone,
		},
		// Tracing stays zero: tracing.Config.WithEnv fills zero fields from
		// the OTEL_* variables, which a default here would shadow.
		Routes: Routes{
			GearmanDefault:   LocalName,
			BeanstalkDefault: LocalName,
		},
		ShutdownTimeout: 10 * time.Second,
		LoopWait:        LoopWaitAuto,
		LoopSpin:        DefaultLoopSpin,
		IOUring:         true,
	}
}

// LocalBackend returns the implicit local backend: the in-process engines,
// id 0.
func LocalBackend() Backend {
	return Backend{Name: LocalName, ID: LocalID, Type: TypeLocal}
}

// DefaultBackend returns what a backends entry in a file starts from: the
// timeouts and breaker settings documented on [Backend]; name, id, type and
// address have no defaults.
func DefaultBackend() Backend {
	return Backend{
		DialTimeout:    2 * time.Second,
		IOTimeout:      30 * time.Second,
		Keepalive:      30 * time.Second,
		HealthInterval: 5 * time.Second,
		Breaker: Breaker{
			Failures:         5,
			OpenTimeout:      30 * time.Second,
			HalfOpenRequests: 1,
		},
	}
}

// DefaultPool returns what a pools entry in a file starts from.
func DefaultPool() Pool {
	return Pool{Strategy: StrategyShard}
}

// elementDefault returns a new list element of type t with its defaults, for
// the decoder.
func elementDefault(t reflect.Type) reflect.Value {
	v := reflect.New(t).Elem()
	switch t {
	case reflect.TypeFor[Backend]():
		v.Set(reflect.ValueOf(DefaultBackend()))
	case reflect.TypeFor[Pool]():
		v.Set(reflect.ValueOf(DefaultPool()))
	}
	return v
}
