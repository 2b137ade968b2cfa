#!/usr/bin/perl
# Drives a Gearman server with Perl's Gearman::Client and Gearman::Worker
# (Debian libgearman-client-perl). Usage: gearman_perl.pl HOST:PORT [gearmand]
# Prints one line per observed event; gearman_interop_test.go checks them.
# With "gearmand", the WORK_EXCEPTION to a client without the exceptions
# option is left out: gearmand 1.1 turns it into a WORK_FAIL with a NUL
# after the handle, which Gearman::Client takes for an unknown handle and
# dies on.
use strict;
use warnings;
use Gearman::Client;
use Gearman::Worker;

$| = 1;
my $server = shift or die "usage: $0 HOST:PORT [gearmand]\n";
my $gearmand = (shift // '') eq 'gearmand';

my $pid = fork();
die "fork: $!" unless defined $pid;
# The worker goes with the client, however the client ends.
my $parent = $$;
END { kill 'TERM', $pid if $pid && $$ == $parent }
if ($pid == 0) {
    my $w = Gearman::Worker->new(job_servers => [$server]);
    $w->register_function(rev => sub {
        my $job = shift;
        $job->set_status(1, 2); # Worker::send_work_status drops the denominator
        $w->send_work_data($job, "chunk");
        return scalar reverse $job->arg;
    });
    $w->register_function(fail => sub { return undef });
    $w->register_function(exc => sub {
        my $job = shift;
        $w->send_work_exception($job, "boom");
        return undef;
    });
    $w->work(stop_if => sub { 0 }) while 1;
    exit 0;
}

my $client = Gearman::Client->new(job_servers => [$server], exceptions => 1);
my $plain  = Gearman::Client->new(job_servers => [$server]);

sub run_task {
    my ($c, $func, $arg) = @_;
    my $ts = $c->new_task_set;
    $ts->add_task($func => $arg, {
        on_status    => sub { print "$func status $_[0]/$_[1]\n" },
        on_data      => sub { print "$func data ${$_[0]}\n" },
        on_complete  => sub { print "$func complete ${$_[0]}\n" },
        on_fail      => sub { print "$func fail\n" },
        on_exception => sub { print "$func exception $_[0]\n" },
    });
    $ts->wait(timeout => 20);
}

run_task($client, rev => "hello");
run_task($client, fail => "x");
run_task($client, exc => "x");
run_task($plain, exc => "x") unless $gearmand;

my $handle = $client->dispatch_background(nobody => "queued");
print "background ", ($handle ? "ok" : "failed"), "\n";
my $st = $client->get_status($handle);
printf "status known=%d running=%d\n", $st->known ? 1 : 0, $st->running ? 1 : 0;

kill 'TERM', $pid;
waitpid($pid, 0);
print "done\n";
