// Package tlsconf builds jobgate's TLS configurations from the config's tls
// section: the server side shared by every TLS listener (certificates from
// PEM files reloaded when they change, or obtained and renewed over ACME by
// certmagic; TLS 1.2 or later with forward-secret AEAD suites; client
// certificate verification for mTLS), and the client side used to dial
// upstream servers over TLS ([ClientConfig]).
//
// Lifecycle: [New] reads and checks every file and builds the certmagic
// state; [Manager.Start] starts the HTTP-01 challenge listener, ACME
// management and the file watcher; [Manager.Close] stops them. Listeners
// wrap their net.Listener with tls.NewListener(ln, m.ServerConfig()) and
// take the client's identity evidence from [VerifiedLeaf] after the
// handshake.
//
// Certificates are chosen by SNI among the PEM pairs and the ACME names.
// Many Gearman and Beanstalk clients dial an IP and send no SNI; they get
// the first PEM pair (or the first ACME name's certificate).
//
// The PEM files (certificate pairs and the client CA bundle) are checked
// every Options.ReloadInterval and whatever changed is used from the next
// handshake on; a pair that fails to load (say the certificate is replaced
// before its key) keeps the previous one in service until it loads.
// [Manager.Reload] checks at once (for a SIGHUP handler, or tests).
//
// ACME: certmagic keeps accounts, keys and certificates under
// <data dir>/certmagic and renews them in the background. HTTP-01 is
// answered on tls.acme.challenge_listen (which must be reachable on port 80
// of every name), TLS-ALPN-01 on any jobgate TLS listener (which must be
// port 443 for the CA to reach it; otherwise certmagic binds :443 itself
// while it solves; Options.TLSALPNPort names another port). A private CA
// is reached through tls.acme.ca, trusting tls.acme.ca_root_file.
// Configuring ACME agrees to the CA's terms of service on the operator's
// behalf, as every automatic client does.
package tlsconf

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/mholt/acmez/v3"

	"github.com/jobgate/jobgate/config"
)

// Options are what New needs besides the tls section.
type Options struct {
	// DataDir is jobgate's data directory (data.dir); certmagic's storage
	// is its "certmagic" subdirectory. Empty uses certmagic's default
	// (under the user's data directory), since ACME state must persist:
	// CAs rate-limit accounts and certificates obtained again at every
	// start.
	DataDir string
	// Logger receives TLS and certmagic logs; nil means slog.Default().
	Logger *slog.Logger
	// ReloadInterval is how often the PEM files (certificates and client
	// CAs) are checked for changes. 0 means 5s; negative disables the
	// watcher (Reload can still be called).
	ReloadInterval time.Duration
	// ChallengeListener, when set, serves HTTP-01 challenges instead of a
	// listener Start would open on tls.acme.challenge_listen (tests,
	// socket activation). The Manager closes it.
	ChallengeListener net.Listener
	// TLSALPNPort is the port the ACME CA connects to for TLS-ALPN-01,
	// where a jobgate TLS listener built from ServerConfig answers it. 0
	// means 443.
	TLSALPNPort int
}

// Manager owns the server-side TLS state. Its methods are safe for
// concurrent use.
type Manager struct {
	cfg  config.TLS
	opts Options
	log  *slog.Logger

	cache  *certmagic.Cache
	magic  *certmagic.Config
	issuer *certmagic.ACMEIssuer // nil without ACME

	// base is what ServerConfig clones; conf is the per-handshake config
	// GetConfigForClient returns, rebuilt when the client CAs change;
	// alpnConf is conf answering only acme-tls/1 (TLS-ALPN-01).
	base     *tls.Config
	conf     atomic.Pointer[tls.Config]
	alpnConf atomic.Pointer[tls.Config]

	// mu serialises Reload; files is owned by it.
	mu       sync.Mutex
	files    []*certFile
	caSum    [32]byte
	fallback atomic.Pointer[tls.Certificate] // for clients without SNI

	challengeLn  net.Listener
	challengeSrv *http.Server

	// Start and Close are not called concurrently with each other.
	stop      context.CancelFunc
	wg        sync.WaitGroup
	started   bool
	closeOnce sync.Once
	closeErr  error
}

// New checks cfg (which should have passed config.Validate), reads the PEM
// files and the CA bundles, and prepares certmagic. It starts nothing.
func New(cfg config.TLS, opts Options) (*Manager, error) {
	m := &Manager{cfg: cfg, opts: opts, log: opts.Logger}
	if m.log == nil {
		m.log = slog.Default()
	}
	if m.opts.ReloadInterval == 0 {
		m.opts.ReloadInterval = 5 * time.Second
	}
	if len(cfg.Certificates) == 0 && !cfg.ACME.Enabled() {
		return nil, errors.New("tls: no certificate: set tls.certificates or tls.acme.domains")
	}

	// A nil Storage makes certmagic use its default file storage.
	var storage certmagic.Storage
	if opts.DataDir != "" {
		storage = &certmagic.FileStorage{Path: filepath.Join(opts.DataDir, "certmagic")}
	}
	zl := zapToSlog(m.log)
	m.cache = certmagic.NewCache(certmagic.CacheOptions{
		GetConfigForCert: func(certmagic.Certificate) (*certmagic.Config, error) { return m.magic, nil },
		Logger:           zl,
	})
	m.magic = certmagic.New(m.cache, certmagic.Config{Storage: storage, Logger: zl})

	if cfg.ACME.Enabled() {
		iss := certmagic.ACMEIssuer{
			CA:                   cfg.ACME.CA,
			Email:                cfg.ACME.Email,
			Agreed:               true,
			DisableHTTPChallenge: cfg.ACME.ChallengeListen == "" && opts.ChallengeListener == nil,
			AltTLSALPNPort:       opts.TLSALPNPort,
			Logger:               zl,
		}
		if iss.CA == "" {
			iss.CA = certmagic.LetsEncryptProductionCA
		}
		if cfg.ACME.CARootFile != "" {
			pool, err := loadPool(cfg.ACME.CARootFile)
			if err != nil {
				m.cache.Stop()
				return nil, fmt.Errorf("tls: acme ca_root_file: %w", err)
			}
			iss.TrustedRoots = pool
		}
		// certmagic's own HTTP-01 solver binds the challenge address only
		// if it is free; pointing it at ours makes it find our listener
		// there and leave the answering to it.
		if !iss.DisableHTTPChallenge {
			host, port, err := challengeHostPort(cfg.ACME.ChallengeListen, opts.ChallengeListener)
			if err != nil {
				m.cache.Stop()
				return nil, err
			}
			iss.ListenHost, iss.AltHTTPPort = host, port
		}
		m.issuer = certmagic.NewACMEIssuer(m.magic, iss)
		m.magic.Issuers = []certmagic.Issuer{m.issuer}
	}

	if err := m.Reload(); err != nil {
		m.cache.Stop()
		return nil, err
	}
	m.base = &tls.Config{
		MinVersion:         minVersion(cfg.MinVersion),
		CipherSuites:       modernCipherSuites,
		GetConfigForClient: m.configForClient,
	}
	return m, nil
}

// challengeHostPort returns the host and port HTTP-01 is answered on.
func challengeHostPort(addr string, ln net.Listener) (string, int, error) {
	if ln != nil {
		addr = ln.Addr().String()
	}
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("tls: acme challenge_listen %q: %w", addr, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return "", 0, fmt.Errorf("tls: acme challenge_listen %q: bad port", addr)
	}
	if port == 0 {
		port = 80
	}
	return host, port, nil
}

func minVersion(v string) uint16 {
	if v == config.TLS13 {
		return tls.VersionTLS13
	}
	return tls.VersionTLS12
}

// ServerConfig returns the configuration for a TLS listener. Each call
// returns a new *tls.Config sharing the Manager's state, so a caller may
// set fields such as NextProtos (an HTTPS admin server wants "h2" and
// "http/1.1") without affecting others; the certificate, version and
// client-certificate settings come from the Manager at each handshake.
func (m *Manager) ServerConfig() *tls.Config {
	return m.base.Clone()
}

// configForClient picks the per-handshake config: the TLS-ALPN-01 one when
// the ACME CA is validating, the regular one otherwise. Keeping acme-tls/1
// out of the regular NextProtos matters: a Go server with NextProtos set
// refuses clients whose ALPN list does not overlap it.
func (m *Manager) configForClient(hello *tls.ClientHelloInfo) (*tls.Config, error) {
	if m.issuer != nil && len(hello.SupportedProtos) == 1 && hello.SupportedProtos[0] == acmez.ACMETLS1Protocol {
		return m.alpnConf.Load(), nil
	}
	return m.conf.Load(), nil
}

// getCertificate is certmagic's selection by SNI, falling back to the
// default certificate for clients that send no (or an unknown) server name.
func (m *Manager) getCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	cert, err := m.magic.GetCertificate(hello)
	if err == nil && cert != nil {
		return cert, nil
	}
	if len(hello.SupportedProtos) == 1 && hello.SupportedProtos[0] == acmez.ACMETLS1Protocol {
		return nil, err // a challenge must get the challenge certificate or nothing
	}
	if fb := m.fallback.Load(); fb != nil {
		return fb, nil
	}
	if m.cfg.ACME.Enabled() && hello.ServerName != m.cfg.ACME.Domains[0] {
		h := *hello
		h.ServerName = m.cfg.ACME.Domains[0]
		return m.magic.GetCertificate(&h)
	}
	return nil, err
}

// buildConfs rebuilds the per-handshake configs for a client CA pool.
func (m *Manager) buildConfs(pool *x509.CertPool) {
	c := &tls.Config{
		MinVersion:     minVersion(m.cfg.MinVersion),
		CipherSuites:   modernCipherSuites,
		GetCertificate: m.getCertificate,
		ClientCAs:      pool,
	}
	switch m.cfg.ClientAuth {
	case config.ClientAuthRequest:
		c.ClientAuth = tls.VerifyClientCertIfGiven
	case config.ClientAuthRequire:
		c.ClientAuth = tls.RequireAndVerifyClientCert
	default:
		c.ClientAuth = tls.NoClientCert
	}
	a := c.Clone()
	a.NextProtos = []string{acmez.ACMETLS1Protocol}
	a.ClientAuth = tls.NoClientCert // the CA has no client certificate
	m.conf.Store(c)
	m.alpnConf.Store(a)
}

// Start opens the HTTP-01 challenge listener (when ACME uses it), starts
// obtaining and renewing the ACME certificates in the background, and
// starts the file watcher. Handshakes for an ACME name fail until its
// certificate is obtained (or loaded from storage).
func (m *Manager) Start(ctx context.Context) error {
	if m.started {
		return errors.New("tls: Start called twice")
	}
	m.started = true
	ctx, m.stop = context.WithCancel(ctx)
	if m.issuer != nil && !m.issuer.DisableHTTPChallenge {
		ln := m.opts.ChallengeListener
		if ln == nil {
			var err error
			if ln, err = net.Listen("tcp", m.cfg.ACME.ChallengeListen); err != nil {
				m.stop()
				return fmt.Errorf("tls: acme challenge listener: %w", err)
			}
		}
		m.challengeLn = ln
		m.challengeSrv = &http.Server{
			Handler:           m.issuer.HTTPChallengeHandler(http.NotFoundHandler()),
			ReadHeaderTimeout: 10 * time.Second,
			ErrorLog:          slog.NewLogLogger(m.log.Handler(), slog.LevelDebug),
		}
		m.wg.Go(func() {
			if err := m.challengeSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				m.log.Error("tls: acme challenge listener stopped", "err", err)
			}
		})
	}
	if m.cfg.ACME.Enabled() {
		if err := m.magic.ManageAsync(ctx, m.cfg.ACME.Domains); err != nil {
			m.Close()
			return fmt.Errorf("tls: acme: %w", err)
		}
	}
	if m.opts.ReloadInterval > 0 && (len(m.cfg.Certificates) > 0 || m.cfg.ClientCAFile != "") {
		m.wg.Go(func() { m.watch(ctx) })
	}
	return nil
}

// ChallengeAddr returns the HTTP-01 challenge listener's address, or nil
// when there is none (before Start, or ACME off or without HTTP-01).
func (m *Manager) ChallengeAddr() net.Addr {
	if m.challengeLn == nil {
		return nil
	}
	return m.challengeLn.Addr()
}

// Close stops the challenge listener, ACME maintenance and the watcher, and
// waits for them. Established TLS connections are not affected. Calls
// after the first return its result.
func (m *Manager) Close() error {
	m.closeOnce.Do(func() {
		if m.stop != nil {
			m.stop()
		}
		if m.challengeSrv != nil {
			m.closeErr = m.challengeSrv.Close()
		} else if m.opts.ChallengeListener != nil {
			m.closeErr = m.opts.ChallengeListener.Close()
		}
		m.wg.Wait()
		m.cache.Stop()
	})
	return m.closeErr
}

// watch polls the files until ctx ends. Polling rather than inotify: it
// works on every filesystem and platform, follows the symlink swaps that
// Kubernetes secrets and certbot use, and a few small reads every few
// seconds cost nothing.
func (m *Manager) watch(ctx context.Context) {
	t := time.NewTicker(m.opts.ReloadInterval)
	defer t.Stop()
	var last string // the last error logged, so a broken file is logged once, not every tick
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			err := m.Reload()
			switch {
			case err != nil && err.Error() != last:
				last = err.Error()
				m.log.Error("tls: reload failed; keeping the previous certificates", "err", err)
			case err == nil && last != "":
				last = ""
				m.log.Info("tls: files load again")
			}
		}
	}
}
