package tlsconf

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"os"

	"github.com/jobgate/jobgate/config"
)

// certFile is one configured PEM pair as last loaded.
type certFile struct {
	ck       config.CertKey
	sum      [32]byte // SHA-256 of cert and key contents, to spot changes
	hash     string   // certmagic cache key, to remove it when replaced
	cert     *tls.Certificate
	loadedOK bool
}

// Reload reads the PEM certificate/key pairs and the client CA bundle and
// puts whatever changed into service: the next handshake uses it. A pair
// or bundle that fails to load keeps its previous version in service, and
// Reload reports every such failure at once (at New, any failure is fatal).
// The watcher calls it periodically; tests and a SIGHUP handler may call
// it directly.
func (m *Manager) Reload() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.files == nil {
		for _, ck := range m.cfg.Certificates {
			m.files = append(m.files, &certFile{ck: ck})
		}
	}
	var errs []error
	for i, f := range m.files {
		if err := m.reloadPair(f); err != nil {
			errs = append(errs, fmt.Errorf("tls.certificates[%d]: %w", i, err))
		}
	}
	// The first pair that loaded is the certificate for clients without
	// SNI.
	for _, f := range m.files {
		if f.cert != nil {
			m.fallback.Store(f.cert)
			break
		}
	}
	if err := m.reloadClientCAs(); err != nil {
		errs = append(errs, fmt.Errorf("tls.client_ca_file: %w", err))
	}
	return errors.Join(errs...)
}

func (m *Manager) reloadPair(f *certFile) error {
	certPEM, err := os.ReadFile(f.ck.CertFile)
	if err != nil {
		return err
	}
	keyPEM, err := os.ReadFile(f.ck.KeyFile)
	if err != nil {
		return err
	}
	h := sha256.New()
	h.Write(certPEM)
	h.Write([]byte{0})
	h.Write(keyPEM)
	var sum [32]byte
	h.Sum(sum[:0])
	if f.loadedOK && sum == f.sum {
		return nil
	}
	// Check the pair here (key matches certificate, leaf parses) so that
	// a half-written rotation, certificate updated but key not yet, is
	// refused and retried rather than put into service.
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("%s, %s: %w", f.ck.CertFile, f.ck.KeyFile, err)
	}
	hash, err := m.magic.CacheUnmanagedCertificatePEMBytes(context.Background(), certPEM, keyPEM, []string{"jobgate-file"})
	if err != nil {
		return fmt.Errorf("%s: %w", f.ck.CertFile, err)
	}
	if f.hash != "" && f.hash != hash {
		m.cache.Remove([]string{f.hash})
	}
	if f.loadedOK {
		m.log.Info("tls: certificate reloaded", "cert_file", f.ck.CertFile, "subject", cert.Leaf.Subject.String(),
			"not_after", cert.Leaf.NotAfter)
	}
	f.sum, f.hash, f.cert, f.loadedOK = sum, hash, &cert, true
	return nil
}

func (m *Manager) reloadClientCAs() error {
	if m.cfg.ClientCAFile == "" {
		if m.conf.Load() == nil {
			m.buildConfs(nil)
		}
		return nil
	}
	b, err := os.ReadFile(m.cfg.ClientCAFile)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(b)
	if m.conf.Load() != nil && sum == m.caSum {
		return nil
	}
	pool, err := parsePool(m.cfg.ClientCAFile, b)
	if err != nil {
		return err
	}
	if m.conf.Load() != nil {
		m.log.Info("tls: client CAs reloaded", "client_ca_file", m.cfg.ClientCAFile)
	}
	m.caSum = sum
	m.buildConfs(pool)
	return nil
}
