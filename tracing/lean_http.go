package tracing

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// httpSink posts the lean path's batches as OTLP/HTTP protobuf requests
// itself. The OTLP HTTP client would take them as a ResourceSpans message
// and proto.Marshal it: a copy of every batch (about 1.1 KB per job, most
// of the bytes the traced server allocates). This sends the encoded batch
// as it is, framed as an ExportTraceServiceRequest in room the encoder
// left in front of it (leanEncoder.request), and keeps what that client
// does and the README promises:
//
//   - OTEL_EXPORTER_OTLP_HEADERS / _TRACES_HEADERS (key=value, values
//     percent-decoded), _TIMEOUT (milliseconds per attempt, default 10 s),
//     _COMPRESSION (gzip or none), _CERTIFICATE (the CA bundle),
//     _CLIENT_CERTIFICATE and _CLIENT_KEY, the _TRACES_ form winning (the
//     client certificate and key as a pair, both from one level);
//   - TLS for an https endpoint, none for http (and an error if TLS files
//     are given for http, as the client's Start returns);
//   - the proxy from HTTPS_PROXY/HTTP_PROXY/NO_PROXY;
//   - retries of 429, 502, 503, 504 and temporary network errors with the
//     client's backoff (5 s growing 1.5× to 30 s, randomised ±50%, for at
//     most a minute, and at least any Retry-After), within the export's
//     deadline (not for a batch an event loop sent itself, which is not
//     kept: its spans count as failed, and the next batches go the
//     export goroutine's way until one succeeds; lean_inline.go);
//   - a 2xx reply's partial success reported as the upload's error, its
//     rejected spans (only those) counted as failed; any other reply's
//     status and body reported as the error; a reply body over 4 MiB is
//     an error too.
//
// It is used by one goroutine at a time (the export goroutine, or one
// sending a batch inline: lean_inline.go), so it reuses its buffers.
type httpSink struct {
	url     string
	client  *http.Client
	headers http.Header
	gzip    bool
	retry   httpRetry

	gzBuf bytes.Buffer
	gzW   *gzip.Writer

	// direct posts on a connection of the export goroutine's own
	// (lean_http_conn.go); nil: through client (see newHTTPSink).
	direct *connPoster
	reply  bytes.Buffer
	// report is told of replies to batches sent inline (onReply).
	report func(n int, err error)
	// inlinePaused stops inline sends after a retryable reply to one, until
	// an upload of the export goroutine succeeds.
	inlinePaused bool
}

// httpRetry is the retry policy: the OTLP exporters' defaults.
type httpRetry struct {
	initial, max, elapsed time.Duration
}

var defaultHTTPRetry = httpRetry{initial: 5 * time.Second, max: 30 * time.Second, elapsed: time.Minute}

// defaultHTTPTimeout bounds one request when OTEL_EXPORTER_OTLP_TIMEOUT
// does not say.
const defaultHTTPTimeout = 10 * time.Second

// maxHTTPResponse caps the reply body read, as the OTLP client's default
// does; a longer reply fails the upload.
const maxHTTPResponse = 4 << 20

// otlpEnv returns the signal-specific variable OTEL_EXPORTER_OTLP_TRACES_x
// if set, else OTEL_EXPORTER_OTLP_x, trimmed; empty counts as unset, as
// for the OTLP client.
func otlpEnv(x string) (string, bool) {
	if v := strings.TrimSpace(os.Getenv("OTEL_EXPORTER_OTLP_TRACES_" + x)); v != "" {
		return v, true
	}
	v := strings.TrimSpace(os.Getenv("OTEL_EXPORTER_OTLP_" + x))
	return v, v != ""
}

// otlpVar returns OTEL_EXPORTER_OTLP_x alone, trimmed; empty counts as
// unset.
func otlpVar(x string) (string, bool) {
	v := strings.TrimSpace(os.Getenv("OTEL_EXPORTER_OTLP_" + x))
	return v, v != ""
}

// newHTTPSink returns the sink for the resolved OTLP/HTTP endpoint.
func newHTTPSink(endpoint string) (*httpSink, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, err
	}
	if u.Path == "" {
		u.Path = "/"
	}
	s := &httpSink{url: u.String(), headers: http.Header{}, retry: defaultHTTPRetry}
	s.headers.Set("User-Agent", "OTel OTLP Exporter Go/"+otlptrace.Version())
	if v, ok := otlpEnv("HEADERS"); ok {
		for k, v := range parseOTLPHeaders(v) {
			s.headers.Set(k, v)
		}
	}
	s.headers.Set("Content-Type", "application/x-protobuf")
	timeout := defaultHTTPTimeout
	if v, ok := otlpEnv("TIMEOUT"); ok {
		if ms, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && ms >= 0 {
			timeout = time.Duration(ms) * time.Millisecond
		}
	}
	if v, ok := otlpEnv("COMPRESSION"); ok && v == "gzip" {
		s.gzip = true
		s.gzW = gzip.NewWriter(&s.gzBuf)
		s.headers.Set("Content-Encoding", "gzip")
	}
	tlsConf := otlpTLSConfig(otel.Handle)
	// The OTLP client's transport: net/http's defaults, kept apart from
	// http.DefaultTransport so nothing else can change it.
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	if tlsConf != nil {
		if u.Scheme != "https" {
			return nil, errors.New("insecure HTTP endpoint cannot use TLS client configuration")
		}
		tr.TLSClientConfig = tlsConf
	}
	s.client = &http.Client{Transport: tr, Timeout: timeout}
	// A proxy, credentials in the URL (which net/http sends as basic
	// auth), or a platform where an idle connection's close cannot be
	// seen keep the requests on net/http.
	if proxy, err := tr.Proxy(&http.Request{URL: u}); canPeek && err == nil && proxy == nil && u.User == nil {
		s.direct = newConnPoster(u, s.headers, tlsConf, timeout)
	}
	return s, nil
}

// parseOTLPHeaders reads an OTEL_EXPORTER_OTLP_HEADERS value: comma
// separated key=value pairs, values percent-decoded, both trimmed;
// malformed pairs are skipped.
func parseOTLPHeaders(v string) map[string]string {
	h := map[string]string{}
	for pair := range strings.SplitSeq(v, ",") {
		k, val, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" || strings.ContainsAny(k, " \t\r\n:") {
			continue
		}
		val, err := url.PathUnescape(val)
		if err != nil {
			continue
		}
		h[k] = strings.TrimSpace(val)
	}
	return h
}

// otlpTLSConfig builds the TLS settings the certificate variables ask
// for, or nil when they ask for none. A file that cannot be read or holds
// no certificate is given to report (otel.Handle) and left out, as the
// OTLP clients (and so the gRPC exporter here) do: the job server starts,
// and exports fail visibly if the receiver needed that file.
func otlpTLSConfig(report func(error)) *tls.Config {
	var conf *tls.Config
	if file, ok := otlpEnv("CERTIFICATE"); ok {
		if pool, err := readCAFile(file); err != nil {
			report(err)
		} else {
			conf = &tls.Config{RootCAs: pool}
		}
	}
	// The certificate and its key come from the same level, the _TRACES_
	// pair if both are set, as the OTLP client takes them: a _TRACES_
	// certificate never pairs with the general key.
	certFile, okC := otlpVar("TRACES_CLIENT_CERTIFICATE")
	keyFile, okK := otlpVar("TRACES_CLIENT_KEY")
	if !okC || !okK {
		certFile, okC = otlpVar("CLIENT_CERTIFICATE")
		keyFile, okK = otlpVar("CLIENT_KEY")
	}
	if okC && okK {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			report(fmt.Errorf("tracing: OTLP client certificate: %w", err))
		} else {
			if conf == nil {
				conf = &tls.Config{}
			}
			conf.Certificates = []tls.Certificate{cert}
		}
	}
	return conf
}

// readCAFile reads a PEM bundle of CA certificates.
func readCAFile(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP certificate: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("tracing: OTLP certificate %s: no PEM certificate", file)
	}
	return pool, nil
}

// requestUploader is a sink that takes the batch as the whole
// ExportTraceServiceRequest (leanEncoder.request), framed in place.
type requestUploader interface {
	uploadRequest(ctx context.Context, request []byte, n int) error
}

var _ requestUploader = (*httpSink)(nil)

// upload posts one batch given as the body of a ResourceSpans message,
// framing it in a copy; the export goroutine uses uploadRequest instead.
func (s *httpSink) upload(ctx context.Context, resourceSpans []byte, n int) error {
	req := protowire.AppendTag(nil, 1, protowire.BytesType)
	req = protowire.AppendBytes(req, resourceSpans)
	return s.uploadRequest(ctx, req, n)
}

// uploadRequest posts one encoded ExportTraceServiceRequest, retrying as
// the policy says until ctx ends.
func (s *httpSink) uploadRequest(ctx context.Context, body []byte, _ int) error {
	if s.gzip {
		s.gzBuf.Reset()
		s.gzW.Reset(&s.gzBuf)
		_, _ = s.gzW.Write(body)
		if err := s.gzW.Close(); err != nil {
			return err
		}
		body = s.gzBuf.Bytes()
	}
	// ctx ends an upload in progress: the export's timeout, or the end of
	// Shutdown's context (leanPipe.shutdown), as the OTLP client's Stop.
	begin := time.Now()
	interval := s.retry.initial
	for {
		throttle, err := s.post(ctx, body)
		if err == nil {
			return nil
		}
		var rerr retryable
		if !errors.As(err, &rerr) {
			return err
		}
		// Randomised ±50%, as the OTLP client's backoff.
		delay := time.Duration(float64(interval) * (0.5 + rand.Float64()))
		interval = min(time.Duration(float64(interval)*1.5), s.retry.max)
		delay = max(delay, throttle)
		if time.Since(begin)+delay > s.retry.elapsed {
			return fmt.Errorf("max retry time would elapse: %w", err)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(ctx.Err(), err)
		case <-t.C:
		}
	}
}

// retryable marks an attempt's error as worth another attempt.
type retryable struct{ err error }

func (r retryable) Error() string { return r.err.Error() }
func (r retryable) Unwrap() error { return r.err }

// post makes one attempt. A retryable failure is a retryable error, with
// the reply's Retry-After as throttle.
func (s *httpSink) post(ctx context.Context, body []byte) (throttle time.Duration, err error) {
	if s.direct == nil {
		return s.postClient(ctx, body)
	}
	if s.direct.pending > 0 {
		s.settle(ctx) // the connection is free once the inline request's reply is read
	}
	s.reply.Reset()
	resp, err := s.direct.do(ctx, body, &s.reply)
	if err != nil {
		if ctx.Err() == nil && temporaryNetError(err) {
			return 0, retryable{err}
		}
		return 0, err
	}
	throttle, err = s.status(resp, s.reply.Bytes())
	if err == nil {
		s.inlinePaused = false
	}
	return throttle, err
}

// postClient is post through the net/http client, for endpoints behind a
// proxy or with credentials in the URL.
func (s *httpSink) postClient(ctx context.Context, body []byte) (throttle time.Duration, err error) {
	// body is reused for the next batch: the transport may read it after
	// Do returns, so no return before it let go of it (lean_http_body.go).
	sent := newSentBody(body)
	defer sent.release(ctx)
	rc, _ := sent.reader()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, rc)
	if err != nil {
		_ = rc.Close()
		return 0, err
	}
	req.GetBody = sent.reader
	req.ContentLength = int64(len(body))
	if s.gzip {
		req.ContentLength = -1 // as the OTLP client sends gzip: chunked
	}
	req.Header = s.headers.Clone()
	resp, err := s.client.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) && uerr.Temporary() {
			return 0, retryable{err}
		}
		return 0, err
	}
	defer resp.Body.Close()
	var reply bytes.Buffer
	if err := readReply(&reply, resp.Body); err != nil {
		return 0, err
	}
	return s.status(resp, reply.Bytes())
}

// status turns a reply into post's result: nil or a partial success for
// 2xx, a retryable error for 429, 502, 503 and 504, an error otherwise.
func (s *httpSink) status(resp *http.Response, reply []byte) (throttle time.Duration, err error) {
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		return 0, partialSuccess(resp.Header.Get("Content-Type"), reply)
	}
	text := strings.TrimSpace(string(reply))
	if text == "" {
		text = "(empty)"
	}
	err = fmt.Errorf("failed to send to %s: %s (body: %s)", s.url, resp.Status, text)
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return retryAfter(resp.Header.Get("Retry-After")), retryable{err}
	}
	return 0, err
}

// readReply reads a reply body of at most maxHTTPResponse bytes into
// dst; a longer one is an error, as for the OTLP client, rather than a
// truncated body.
func readReply(dst *bytes.Buffer, body io.Reader) error {
	n, err := io.Copy(dst, io.LimitReader(body, maxHTTPResponse+1))
	if err != nil {
		return err
	}
	if n > maxHTTPResponse {
		dst.Truncate(maxHTTPResponse)
		return fmt.Errorf("response body too large: exceeded %d bytes", maxHTTPResponse)
	}
	return nil
}

// partialSuccess returns the error a successful reply's body reports:
// spans the receiver rejected, or its message.
func partialSuccess(contentType string, body []byte) error {
	if len(body) == 0 || contentType != "application/x-protobuf" {
		return nil
	}
	var r collectortrace.ExportTraceServiceResponse
	if err := proto.Unmarshal(body, &r); err != nil {
		return err
	}
	ps := r.GetPartialSuccess()
	if n, msg := ps.GetRejectedSpans(), ps.GetErrorMessage(); n != 0 || msg != "" {
		return &partialSuccessError{rejected: max(n, 0), msg: msg}
	}
	return nil
}

// partialSuccessError is a receiver's report that it took a batch but
// rejected some of its spans: only those count as failed.
type partialSuccessError struct {
	rejected int64
	msg      string
}

func (e *partialSuccessError) Error() string {
	return fmt.Sprintf("OTLP partial success: %s (%d spans rejected)", e.msg, e.rejected)
}

// retryAfter reads a Retry-After header: seconds or an HTTP date.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
		return time.Duration(min(n, int64(1<<62)/int64(time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// stop lets idle connections go. It runs after the last upload, on the
// export goroutine; the pipe's context cancels an upload in progress.
func (s *httpSink) stop(context.Context) error {
	if s.direct != nil {
		s.direct.close()
	}
	s.client.CloseIdleConnections()
	return nil
}
