package proxy_test

import (
	"context"
	"net"
	"os/exec"
	"strings"
	"testing"

	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/internal/testutil"
)

// perlWorker is a Gearman::Worker over TLS (IO::Socket::SSL, that is
// OpenSSL) that reverses strings, presenting a client certificate, and
// exits after one job.
const perlWorker = `
use Gearman::Worker;
my %js = (host => $ARGV[0], port => $ARGV[1], use_ssl => 1, ca_file => $ARGV[2], cert_file => $ARGV[3], key_file => $ARGV[4]);
my $w = Gearman::Worker->new(job_servers => [\%js]);
my $done = 0;
$w->register_function(reverse => sub { $done++; return scalar reverse $_[0]->arg });
$w->work(stop_if => sub { $done });
print "worker done\n";
`

// perlClient is a Gearman::Client over TLS submitting one job.
const perlClient = `
use Gearman::Client;
my %js = (host => $ARGV[0], port => $ARGV[1], use_ssl => 1, ca_file => $ARGV[2], cert_file => $ARGV[3], key_file => $ARGV[4]);
my $c = Gearman::Client->new(job_servers => [\%js]);
my $r = $c->do_task("reverse", "jobgate over tls", {timeout => 8});
print ref $r ? "result: $$r\n" : "no result\n";
`

// TestTLSPerlGearman runs a real Gearman client and worker library, Perl's
// Gearman::Client and Gearman::Worker (Debian's libgearman-client-perl,
// over IO::Socket::SSL/OpenSSL), against the TLS Gearman listener with
// client_auth require: both verify the server against the CA and present
// client certificates; the job goes from client to worker and back.
func TestTLSPerlGearman(t *testing.T) {
	t.Parallel()
	if out, err := exec.Command("perl", "-e", "use Gearman::Client; use Gearman::Worker; use IO::Socket::SSL; 1").CombinedOutput(); err != nil {
		t.Skipf("Perl Gearman with SSL not installed: %s", out)
	}
	f := startTLSFixture(t, tlsFixtureOptions{clientAuth: config.ClientAuthRequire})
	host, port, _ := net.SplitHostPort(f.gearmanTLS)
	caFile := testutil.WriteFile(t, f.dir, "server-ca.pem", f.serverCA.PEM)
	c, k := f.clientCA.Issue(t, testutil.Leaf{CN: "perl", Client: true})
	certFile, keyFile := testutil.WriteFile(t, f.dir, "perl.pem", c), testutil.WriteFile(t, f.dir, "perl.key", k)
	args := []string{host, port, caFile, certFile, keyFile}

	ctx, cancel := context.WithTimeout(context.Background(), tlsTimeout)
	defer cancel()
	worker := exec.CommandContext(ctx, "perl", append([]string{"-e", perlWorker}, args...)...)
	var wout strings.Builder
	worker.Stdout, worker.Stderr = &wout, &wout
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	werr := make(chan error, 1)
	go func() { werr <- worker.Wait() }()

	// The client may submit before the worker has registered: the job
	// waits in the queue, as with gearmand.
	out, _ := exec.CommandContext(ctx, "perl", append([]string{"-e", perlClient}, args...)...).CombinedOutput()
	if !strings.Contains(string(out), "result: slt revo etagboj\n") {
		cancel() // kills the worker (by its PID) before reading its output
		<-werr
		t.Fatalf("client: %q (worker: %q)", out, wout.String())
	}
	if err := <-werr; err != nil || !strings.Contains(wout.String(), "worker done") {
		t.Fatalf("worker: %v %q", err, wout.String())
	}
}
