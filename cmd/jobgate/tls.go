package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"

	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/proxy"
	"github.com/jobgate/jobgate/proxy/tlsconf"
)

// wantsTLS reports whether any listener serves TLS.
func wantsTLS(cfg *config.Config) bool {
	return cfg.Gearman.TLSListen != "" || cfg.Beanstalk.TLSListen != "" || cfg.Admin.TLS && cfg.Admin.Listen != ""
}

// newTLS builds the one TLS Manager every TLS listener shares (PEM files
// watched for changes, ACME certificates and the HTTP-01 challenge
// listener); nil when no listener serves TLS. It reads every file now, so a
// missing one fails the start, but starts nothing: see tlsStarter. The
// caller closes it after the servers have stopped.
func newTLS(cfg *config.Config, log *slog.Logger) (*tlsconf.Manager, error) {
	if !wantsTLS(cfg) {
		return nil, nil
	}
	return tlsconf.New(cfg.TLS, tlsconf.Options{DataDir: cfg.Data.Dir, Logger: log.With("service", "tls")})
}

// tlsStarter returns what starts m (the file watcher, the challenge
// listener, ACME), for serve to call once every listener is bound: an ACME
// TLS-ALPN-01 solver binds port 443 itself unless it is taken, so starting
// earlier could take the port of a jobgate TLS listener on :443. Nil when m
// is nil.
func tlsStarter(m *tlsconf.Manager, cfg *config.Config, log *slog.Logger) func() error {
	if m == nil {
		return nil
	}
	return func() error {
		if err := m.Start(context.Background()); err != nil {
			return err
		}
		if a := m.ChallengeAddr(); a != nil {
			log.Info("listening", "service", "acme_challenge", "addr", a.String())
		}
		if cfg.TLS.ACME.Enabled() {
			log.Info("acme: obtaining and renewing certificates in the background", "domains", cfg.TLS.ACME.Domains, "ca", cfg.TLS.ACME.CA)
		}
		return nil
	}
}

// protocolServices returns the services of one protocol server: its plain
// listener and its TLS one, either of which may be off. Both serve the
// same server, so jobs are shared; the server is shut down once, by the
// first of them (Shutdown closes every listener it serves).
func protocolServices(name, plain, tlsAddr string, srv protocolServer, tm *tlsconf.Manager, log *slog.Logger) []service {
	var out []service
	if plain != "" {
		out = append(out, service{name, plain, srv})
	}
	if tlsAddr != "" {
		ts := &tlsServer{protocolServer: srv, tm: tm, log: log.With("service", name+"_tls"), owner: plain == ""}
		out = append(out, service{name + "_tls", tlsAddr, ts})
	}
	return out
}

// tlsServer serves a protocol server on a TLS listener: handshakes run
// before the server sees a connection (proxy.TLSListener), under the
// server's connection limits and limits.handshake_timeout.
type tlsServer struct {
	protocolServer
	tm    *tlsconf.Manager
	log   *slog.Logger
	owner bool // no plain listener: this service shuts the server down
}

// Serve serves l over TLS.
func (s *tlsServer) Serve(l net.Listener) error {
	tl := proxy.NewTLSListener(l, s.tm.ServerConfig(), proxy.TLSListenerOptions{Log: s.log})
	return s.protocolServer.Serve(tl)
}

// Shutdown shuts the server down when this service owns it; otherwise the
// plain listener's service does, closing this listener too.
func (s *tlsServer) Shutdown(ctx context.Context) error {
	if !s.owner {
		return nil
	}
	return s.protocolServer.Shutdown(ctx)
}

// adminTLS is the admin server's TLS configuration, nil for plain HTTP.
func adminTLS(cfg *config.Config, tm *tlsconf.Manager) (*tls.Config, error) {
	if !cfg.Admin.TLS {
		return nil, nil
	}
	if tm == nil {
		return nil, fmt.Errorf("admin.tls: no TLS configuration")
	}
	// HTTP/1.1 only: the per-handshake config from the Manager offers no
	// ALPN, which is all an admin endpoint needs.
	return tm.ServerConfig(), nil
}

// server is the protocol server behind s, for the optional interfaces
// (drainer, reloader, ...): a TLS listener's service answers for its
// server only when no plain listener's service does, so each server is
// asked once.
func (s service) server() protocolServer {
	if t, ok := s.srv.(*tlsServer); ok && t.owner {
		return t.protocolServer
	}
	return s.srv
}
