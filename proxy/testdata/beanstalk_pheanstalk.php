<?php
// Drives a Beanstalk server with PHP's Pheanstalk 4 (Debian
// php-pda-pheanstalk), the client Laravel's and Symfony's beanstalkd queues
// use. Usage: php beanstalk_pheanstalk.php HOST:PORT
//
// Prints a transcript of what the client saw, one line per step. Job ids
// are printed relative to the first put, so a server whose ids start
// elsewhere prints the same lines. The test compares the transcript with
// the one a real beanstalkd gives.
require_once '/usr/share/php/Pheanstalk/autoload.php';

use Pheanstalk\Connection;
use Pheanstalk\Job;
use Pheanstalk\JobId;
use Pheanstalk\Pheanstalk;
use Pheanstalk\SocketFactory;

[$host, $port] = explode(':', $argv[1]);
$port = (int) $port;
$p = Pheanstalk::create($host, $port, 5);
$base = null;

function say(string $line): void
{
    echo $line, "\n";
}

// rel names a job by its id's distance from the first put.
function rel(?Job $job): string
{
    global $base;
    return $job === null ? 'none' : 'job+' . ($job->getId() - $base);
}

// outcome runs $f and names what it gave: its result, or the class of the
// exception it threw.
function outcome(callable $f): string
{
    try {
        $r = $f();
        return $r instanceof Job ? rel($r) . ' ' . json_encode($r->getData()) : json_encode($r);
    } catch (\Throwable $e) {
        return (new \ReflectionClass($e))->getShortName();
    }
}

// A binary body with CRLF and NUL inside survives the round trip.
$body = "bin\r\nary\x00\xff\r\n";
$first = $p->put($body, 10, 0, 60);
$base = $first->getId();
$job = $p->reserveWithTimeout(0);
say('binary ' . rel($job) . ' ' . ($job->getData() === $body ? 'same' : 'changed'));
$p->delete($job);
say('delete again ' . outcome(fn () => $p->delete($job)));

// Tubes: use, watch, ignore, and what the server says of them. Both jobs
// go to one tube: through a gateway sharding tubes over several servers,
// priority order holds within each server, not across them.
$p->useTube('ph-lo');
say('used ' . $p->listTubeUsed(true));
$p->useTube('ph-hi')->put('lo', 100);
$p->put('hi', 1);
$p->watch('ph-lo')->watch('ph-hi')->ignore('default');
$watched = $p->listTubesWatched(true);
sort($watched);
say('watched ' . implode(',', $watched));
say('ignore last ' . outcome(fn () => $p->watchOnly('ph-lo')->ignore('ph-lo')));
$p->watch('ph-hi');
$job = $p->reserveWithTimeout(1);
say('urgent first ' . $job->getData());

// release with a delay, peek-delayed, kick-job.
$p->release($job, 5, 3600);
say('peek delayed ' . outcome(fn () => $p->peekDelayed()));
say('peek ready hi ' . outcome(fn () => $p->peekReady()));
$p->kickJob($job);
say('after kick-job ' . outcome(fn () => $p->peekReady()));
say('stats-job ' . implode(' ', array_map(
    fn ($k) => $k . '=' . $p->statsJob($job)[$k],
    ['tube', 'state', 'pri', 'delay', 'ttr', 'reserves', 'releases', 'kicks']
)));

// bury, peek-buried, kick.
$job = $p->reserveWithTimeout(1);
$p->bury($job, 7);
say('buried ' . outcome(fn () => $p->peekBuried()) . ' pri ' . $p->statsJob($job)['pri']);
say('kick ' . $p->kick(10));
say('kick none ' . $p->kick(10));
$p->delete($p->reserveWithTimeout(1));
$p->delete($p->reserveWithTimeout(1));
say('empty ' . outcome(fn () => $p->reserveWithTimeout(0)));

// A delayed job becomes ready on its own.
$p->put('soon', 0, 1);
$t0 = microtime(true);
$job = $p->reserveWithTimeout(5);
say('delayed ' . $job->getData() . ' ' . (microtime(true) - $t0 >= 0.5 ? 'waited' : 'too early'));
say('touch ' . outcome(fn () => $p->touch($job)));
$p->delete($job);

// TTR: inside the last second a reserve answers DEADLINE_SOON. The job's
// one second may run out before the delete on a loaded machine; then it
// is ready again, and is taken and deleted, so the transcript is the same.
$p->put('ttr', 0, 0, 1);
$job = $p->reserveWithTimeout(1);
say('deadline ' . outcome(fn () => $p->reserveWithTimeout(1)));
try {
    $p->delete($job);
} catch (Pheanstalk\Exception\JobNotFoundException $e) {
    $p->delete($p->reserveWithTimeout(5));
}

// A reservation goes back to ready when its connection closes.
$p->put('orphan');
$conn = new Connection(new SocketFactory($host, $port, 5));
$other = new Pheanstalk($conn);
$other->watch('ph-hi');
$taken = $other->reserveWithTimeout(1);
say('other took ' . rel($taken));
say('foreign release ' . outcome(fn () => $p->release($taken)));
$conn->disconnect();
$back = null;
for ($i = 0; $i < 20 && $back === null; $i++) {
    $back = $p->reserveWithTimeout(1);
}
say('returned ' . rel($back) . ' ' . $p->statsJob($back)['reserves']);
$p->delete($back);

// Errors the client maps to its own exceptions.
say('too big ' . outcome(fn () => $p->put(str_repeat('x', 65536))));
say('peek missing ' . outcome(fn () => $p->peek(new JobId(999999))));
say('stats-job missing ' . outcome(fn () => $p->statsJob(new JobId(999999))));
say('stats-tube missing ' . outcome(fn () => $p->statsTube('ph-nope')));
say('pause missing ' . outcome(fn () => $p->pauseTube('ph-nope', 1)));

// Stats: the fields a YAML dictionary holds, and a few values.
$p->put('counted');
$stats = $p->stats();
$keys = array_keys($stats->getArrayCopy());
sort($keys);
say('stats keys ' . implode(',', $keys));
say('stats ready ' . $stats['current-jobs-ready'] . ' max ' . $stats['max-job-size']);
$tube = $p->statsTube('ph-hi');
$keys = array_keys($tube->getArrayCopy());
sort($keys);
say('stats-tube keys ' . implode(',', $keys));
$p->pauseTube('ph-hi', 60);
$tube = $p->statsTube('ph-hi');
say('paused ' . $tube['pause'] . ' ready ' . $tube['current-jobs-ready'] . ' cmd-pause-tube ' . $tube['cmd-pause-tube'] . ' watching ' . $tube['current-watching']);
say('paused reserve ' . outcome(fn () => $p->reserveWithTimeout(0)));
$p->resumeTube('ph-hi');
$job = $p->reserveWithTimeout(1);
$keys = array_keys($p->statsJob($job)->getArrayCopy());
sort($keys);
say('stats-job keys ' . implode(',', $keys));
$p->delete($job);
$tubes = $p->listTubes();
sort($tubes);
say('tubes ' . implode(',', $tubes));
say('done');
