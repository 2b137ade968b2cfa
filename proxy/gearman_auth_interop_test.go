package proxy

import (
	"context"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/internal/testutil/authtest"
	"github.com/jobgate/jobgate/proxy/auth"
)

// gmInteropAuthConfig lets loopback clients produce to and consume "jobs"
// only, a token client produce to "perl.*", a token worker consume it.
func gmInteropAuthConfig() config.Auth {
	return config.Auth{
		Enabled: true,
		Identities: []config.Identity{
			{Name: "perlworker", Token: authtest.TokWorker},
			{Name: "admin", Token: authtest.TokAdmin},
			{Name: "perlclient", Token: "perl-client-token-0123"},
			{Name: "local", CIDRs: []string{"127.0.0.1/32"}},
		},
		Rules: []config.Rule{
			{Identity: "local", Produce: []string{"jobs"}, Consume: []string{"jobs"}},
			{Identity: "perlworker", Consume: []string{"perl.*"}},
			{Identity: "perlclient", Produce: []string{"perl.*"}},
			{Identity: "admin", Admin: true},
		},
	}
}

// runToolErr runs a command to completion and returns its combined output
// and error.
func runToolErr(t *testing.T, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("%s %q hung:\n%s", name, args, out)
	}
	return string(out), err
}

// waitAdmin polls an admin command, on a connection identified as admin,
// until its reply satisfies ok.
func waitAdmin(t *testing.T, adm *gmAuthClient, line string, ok func(string) bool) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := adm.admin(line)
		if ok(got) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never became as expected:\n%s", line, got)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestGearmanAuthCLI: gearmand's own tools, unmodified, against a server
// with auth: the gearman CLI's allowed submit runs through a CLI worker,
// its denied submit fails with the PERMISSION_DENIED error, a CLI worker's
// denied function is not registered, and gearadmin shows the admin denial.
func TestGearmanAuthCLI(t *testing.T) {
	gearmanBin := testutil.RequireBinary(t, "gearman")
	gearadmin := testutil.RequireBinary(t, "gearadmin")
	addr := startJobgateGearmanServer(t, GearmanConfig{Engine: gearmanConfigForTest(), Auth: authtest.Policy(t, gmInteropAuthConfig())})
	host, port, _ := net.SplitHostPort(addr)
	hp := []string{"-h", host, "-p", port}
	adm := gmAuthDial(t, addr, nil)
	adm.send(codec.OptionReq, "auth="+authtest.TokAdmin)
	adm.expect(codec.OptionRes)

	startTool(t, gearmanBin, append(append([]string{}, hp...), "-w", "-f", "jobs", "-f", "secret", "--", "rev")...)
	waitAdmin(t, adm, "workers", func(s string) bool { return strings.Contains(s, " : jobs\n") })
	if got := runTool(t, gearmanBin, append(append([]string{}, hp...), "-f", "jobs", "abc")...); got != "cba" {
		t.Fatalf("allowed job: %q", got)
	}
	// The worker is in its grab loop, so every CAN_DO it sent was handled.
	if w := adm.admin("workers"); strings.Contains(w, "secret") {
		t.Fatalf("denied CAN_DO registered:\n%s", w)
	}

	out, err := runToolErr(t, gearmanBin, append(append([]string{}, hp...), "-f", "secret", "x")...)
	t.Logf("gearman -f secret: %v\n%s", err, out)
	if !strings.Contains(out, string(auth.GearmanDeniedCode)) {
		t.Errorf("denied submit: no %s in %q", auth.GearmanDeniedCode, out)
	}
	out, err = runToolErr(t, gearmanBin, append(append([]string{}, hp...), "-b", "-f", "secret", "x")...)
	t.Logf("gearman -b -f secret: %v\n%s", err, out)
	if !strings.Contains(out, string(auth.GearmanDeniedCode)) {
		t.Errorf("denied background submit: no %s in %q", auth.GearmanDeniedCode, out)
	}
	if s := adm.admin("status"); strings.Contains(s, "secret\t") {
		t.Fatalf("denied submit queued a job:\n%s", s)
	}

	out, err = runToolErr(t, gearadmin, append(append([]string{}, hp...), "--status")...)
	t.Logf("gearadmin --status: %v\n%s", err, out)
	if !strings.Contains(out, string(auth.GearmanDeniedCode)) {
		t.Errorf("gearadmin --status: no %s in %q", auth.GearmanDeniedCode, out)
	}
}

// TestGearmanAuthPerl: Perl's Gearman::Worker sends its token as its
// client_id (SET_CLIENT_ID), Gearman::Client its token by OPTION_REQ; the
// allowed job runs, the denied one dies with PERMISSION_DENIED.
func TestGearmanAuthPerl(t *testing.T) {
	perl := testutil.RequireBinary(t, "perl")
	if out, err := exec.Command(perl, "-MGearman::Client", "-MGearman::Worker", "-e", "1").CombinedOutput(); err != nil {
		t.Skipf("Perl Gearman library not installed: %s", out)
	}
	addr := startJobgateGearmanServer(t, GearmanConfig{Engine: gearmanConfigForTest(), Auth: authtest.Policy(t, gmInteropAuthConfig())})
	adm := gmAuthDial(t, addr, nil)
	adm.send(codec.OptionReq, "auth="+authtest.TokAdmin)
	adm.expect(codec.OptionRes)

	startTool(t, perl, "-e", `
use Gearman::Worker;
my $w = Gearman::Worker->new(job_servers => [$ARGV[0]], client_id => $ARGV[1]);
$w->register_function("perl.upper" => sub { uc ${$_[0]->argref} });
$w->register_function("secret" => sub { "leak" });
$w->work while 1;
`, addr, auth.TokenPrefix+authtest.TokWorker)
	waitAdmin(t, adm, "workers", func(s string) bool { return strings.Contains(s, " : perl.upper\n") })

	out, err := runToolErr(t, perl, "-e", `
use Gearman::Client;
my $c = Gearman::Client->new(job_servers => [$ARGV[0]]);
my $js = $c->{job_servers}[0];
my $sock = $c->_get_js_sock($js);
print "bad token: ", $c->_option_request($sock, "auth=wrong-token-0123456789"), "\n";
print "good token: ", $c->_option_request($sock, "auth=" . $ARGV[1]), "\n";
$c->_sock_cache($js, $sock);
my $r = $c->do_task("perl.upper", "hello");
print "allowed: ", (ref $r ? $$r : "undef"), "\n";
my $denied = eval { $c->do_task("secret", "x") };
print "denied: ", ($@ ? "died: $@" : (defined $denied ? "got a result" : "undef")), "\n";
`, addr, "perl-client-token-0123")
	t.Logf("perl client: %v\n%s", err, out)
	for _, want := range []string{"bad token: 0\n", "good token: 1\n", "allowed: HELLO\n", "PERMISSION_DENIED\x00" + auth.GearmanDeniedText} {
		if !strings.Contains(out, want) {
			t.Errorf("perl client output lacks %q", want)
		}
	}
	if w := adm.admin("workers"); strings.Contains(w, "secret") || strings.Contains(w, "jobgate-auth") {
		t.Errorf("workers:\n%s", w)
	}
}
