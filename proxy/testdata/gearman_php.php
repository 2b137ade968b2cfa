<?php
// Drives a Gearman server with PHP's PECL gearman extension (Debian
// php-gearman, built on libgearman). gearman_php_test.go runs one role per
// process and compares the lines printed with what a real gearmand gives.
//
// Usage: php gearman_php.php ROLE HOST:PORT DIR
//   worker    serves every function below until killed
//   prio      queues low, normal and high foreground tasks, prints completions
//   client    every other client scenario, one line per observed event
//   wtimeout  a worker with several functions and a timeout
//   longkey   status queries by over-long handles and unique IDs
//   holder    a worker that holds "hold" jobs until DIR/hold-go exists
//   holdc     a client waiting for a "hold" job
// DIR holds the files by which a client releases a job the worker holds.

if ($argc != 4) {
    fwrite(STDERR, "usage: gearman_php.php ROLE HOST:PORT DIR\n");
    exit(2);
}
[, $role, $server, $dir] = $argv;

// rc names a return code, so that the transcript reads as words.
function rc(int $code): string
{
    foreach (['GEARMAN_SUCCESS', 'GEARMAN_WORK_FAIL', 'GEARMAN_WORK_EXCEPTION',
        'GEARMAN_WORK_DATA', 'GEARMAN_WORK_WARNING', 'GEARMAN_WORK_STATUS',
        'GEARMAN_TIMEOUT', 'GEARMAN_IO_WAIT', 'GEARMAN_NO_JOBS',
        'GEARMAN_LOST_CONNECTION', 'GEARMAN_COULD_NOT_CONNECT',
        'GEARMAN_SERVER_ERROR', 'GEARMAN_UNKNOWN_STATE', 'GEARMAN_PAUSE',
        'GEARMAN_NO_ACTIVE_FDS', 'GEARMAN_ERRNO', 'GEARMAN_UNEXPECTED_PACKET',
        'GEARMAN_NO_REGISTERED_FUNCTIONS'] as $name) {
        if (defined($name) && constant($name) === $code) {
            return $name;
        }
    }
    return "rc$code";
}

// waitFile waits, bounded, until the client creates $name in DIR.
function waitFile(string $name): bool
{
    global $dir;
    for ($i = 0; $i < 1000; $i++) {
        if (file_exists("$dir/$name")) {
            return true;
        }
        usleep(5000);
    }
    return false;
}

function release(string $name): void
{
    global $dir;
    touch("$dir/$name");
}

// GEARMAN_CLIENT_EXCEPTION is libgearman's option bit (1 << 7) for the
// server's "exceptions" option; the extension does not export it.
const CLIENT_EXCEPTION = 128;

// newClient connects a client; $exceptions is addServers' own switch for
// the server's exceptions option.
function newClient(bool $exceptions = true): GearmanClient
{
    global $server;
    $c = new GearmanClient();
    $c->addServers($server, $exceptions);
    $c->setTimeout(10000); // never hang the test
    return $c;
}

// callbacks prints every task event with the tag.
function callbacks(GearmanClient $c): void
{
    $c->setCreatedCallback(function ($t) { print "created {$t->unique()}\n"; });
    $c->setDataCallback(function ($t) { print "data {$t->unique()} {$t->data()}\n"; });
    $c->setWarningCallback(function ($t) { print "warning {$t->unique()} {$t->data()}\n"; });
    $c->setStatusCallback(function ($t) {
        print "status {$t->unique()} {$t->taskNumerator()}/{$t->taskDenominator()}\n";
    });
    $c->setCompleteCallback(function ($t) { print "complete {$t->unique()} {$t->data()}\n"; });
    $c->setFailCallback(function ($t) { print "fail {$t->unique()}\n"; });
    $c->setExceptionCallback(function ($t) { print "exception {$t->unique()} {$t->data()}\n"; });
}

function runTasks(GearmanClient $c): void
{
    $ok = $c->runTasks();
    print "runTasks " . ($ok ? "true" : "false") . " " . rc($c->returnCode()) . "\n";
}

switch ($role) {
case 'worker':
    $w = new GearmanWorker();
    $w->addServers($server);
    $w->setId('php-worker');
    $w->addFunction('rev', function ($job) { return strrev($job->workload()); });
    $w->addFunction('order', function ($job) { return strrev($job->workload()); });
    $w->addFunction('data', function ($job) {
        $job->sendStatus(1, 3);
        $job->sendData('a');
        $job->sendWarning('careful');
        $job->sendStatus(2, 3);
        $job->sendData('b');
        return 'done';
    });
    $w->addFunction('fail', function ($job) {
        $job->setReturn(GEARMAN_WORK_FAIL);
        return null;
    });
    $w->addFunction('exc', function ($job) {
        $job->sendException('boom');
        return null;
    });
    $runs = 0;
    $w->addFunction('uniq', function ($job) use (&$runs) {
        $runs++;
        waitFile('uniq-go');
        return "run $runs";
    });
    $w->addFunction('slow', function ($job) {
        waitFile('slow-go');
        return 'late';
    });
    $w->addFunction('bgstatus', function ($job) {
        $job->sendStatus(1, 4);
        waitFile('bg-go');
        $job->sendStatus(4, 4);
        return 'ok';
    });
    // CAN_DO_TIMEOUT of one second: the server fails the job it holds.
    $w->addFunction('tmo', function ($job) {
        waitFile('tmo-go');
        return 'late';
    }, null, 1);
    $w->addFunction('args', function ($job) {
        return json_encode([$job->functionName(), $job->unique(), bin2hex($job->workload()),
            $job->workloadSize()]);
    });
    $w->addFunction('big', function ($job) {
        return strlen($job->workload()) . ' ' . md5($job->workload()) . ' ' . str_repeat('r', 300000);
    });
    $w->addFunction('explicit', function ($job) {
        $job->sendComplete('explicit');
        return 'ignored';
    });
    // work() is false after a failed job too; only a lost server ends
    // the loop (the test kills the worker otherwise).
    for (;;) {
        if ($w->work()) {
            continue;
        }
        $code = $w->returnCode();
        if (in_array($code, [GEARMAN_LOST_CONNECTION, GEARMAN_COULD_NOT_CONNECT, GEARMAN_NO_ACTIVE_FDS], true)) {
            fwrite(STDERR, "worker: " . $w->error() . "\n");
            exit(1);
        }
        fwrite(STDERR, "worker: work " . rc($code) . "\n");
    }

case 'prio':
    // Queued while no worker exists; the worker started later takes the
    // high one first and the low one last.
    $c = newClient();
    $c->setTimeout(15000);
    $c->setCompleteCallback(function ($t) { print "complete {$t->data()}\n"; });
    $c->addTaskLow('order', 'low', null, 'p-low');
    $c->addTask('order', 'normal', null, 'p-normal');
    $c->addTaskHigh('order', 'high', null, 'p-high');
    runTasks($c);
    break;

case 'client':
    $c = newClient();
    print "ping " . var_export($c->ping('hello'), true) . "\n";

    // Blocking calls of the three priorities.
    print "doNormal " . $c->doNormal('rev', 'normal') . " " . rc($c->returnCode()) . "\n";
    print "doHigh " . $c->doHigh('rev', 'high') . " " . rc($c->returnCode()) . "\n";
    print "doLow " . $c->doLow('rev', 'low') . " " . rc($c->returnCode()) . "\n";

    // Streaming: status, data and warning packets reach the callbacks in
    // the order the worker sent them.
    $c = newClient();
    callbacks($c);
    $c->addTask('data', 'x', null, 'd1');
    runTasks($c);

    // Failure and exception, as blocking calls and as tasks. The
    // extension (2.1) sends OPTION_REQ exceptions on every connection
    // whatever addServers is told, so all three clients get the exception.
    $c = newClient(false);
    callbacks($c);
    $r = $c->doNormal('fail', 'x');
    print "doNormal fail " . var_export($r, true) . " " . rc($c->returnCode()) . "\n";
    $c->addTask('fail', 'x', null, 'f1');
    runTasks($c);
    $r = $c->doNormal('exc', 'x');
    print "doNormal exc " . var_export($r, true) . " " . rc($c->returnCode()) . "\n";
    $c->addTask('exc', 'x', null, 'e1');
    runTasks($c);

    $c = newClient(false);
    $c->addOptions(CLIENT_EXCEPTION);
    callbacks($c);
    $r = $c->doNormal('exc', 'x');
    print "exceptions doNormal exc " . var_export($r, true) . " " . rc($c->returnCode()) . "\n";
    $c->addTask('exc', 'x', null, 'e2');
    runTasks($c);
    $c = newClient(); // the extension's default
    callbacks($c);
    $c->addTask('exc', 'x', null, 'e3');
    runTasks($c);

    // Two tasks with one unique id share one job and one run. The worker
    // holds the job until both are created.
    $c = newClient();
    $handles = [];
    $c->setCreatedCallback(function ($t) use (&$handles) {
        $handles[] = $t->jobHandle();
        if (count($handles) == 2) {
            release('uniq-go');
        }
    });
    $c->setCompleteCallback(function ($t) { print "complete {$t->unique()} {$t->data()}\n"; });
    $c->addTask('uniq', 'a', null, 'same');
    $c->addTask('uniq', 'b', null, 'same');
    runTasks($c);
    print "same handle " . var_export(count($handles) == 2 && $handles[0] === $handles[1], true) . "\n";

    // The client gives up on a job the worker holds; the job still ends.
    $c = newClient();
    $c->setTimeout(300);
    $r = $c->doNormal('slow', 'x');
    print "timeout " . var_export($r, true) . " " . rc($c->returnCode()) . "\n";
    release('slow-go');

    // A background job's status while the worker reports progress.
    $c = newClient();
    $h = $c->doBackground('bgstatus', 'x', 'bg-unique');
    print "doBackground " . rc($c->returnCode()) . "\n";
    $st = [];
    for ($i = 0; $i < 1000; $i++) {
        $st = $c->jobStatus($h);
        if ($st[2] == 1) {
            break;
        }
        usleep(5000);
    }
    print "jobStatus " . json_encode($st) . "\n";
    print "jobStatusByUniqueKey " . json_encode($c->jobStatusByUniqueKey('bg-unique')) . "\n";
    print "jobStatusByUniqueKey unknown " . json_encode($c->jobStatusByUniqueKey('no-such-unique')) . "\n";
    $s = newClient();
    $s->setStatusCallback(function ($t) {
        print "addTaskStatus known=" . var_export($t->isKnown(), true) . " running=" .
            var_export($t->isRunning(), true) . " {$t->taskNumerator()}/{$t->taskDenominator()}\n";
    });
    $s->addTaskStatus($h);
    runTasks($s);
    release('bg-go');
    for ($i = 0; $i < 1000; $i++) {
        $st = $c->jobStatus($h);
        if (!$st[0]) {
            break;
        }
        usleep(5000);
    }
    print "jobStatus done " . json_encode($st) . "\n";
    print "jobStatus unknown " . json_encode($c->jobStatus('H:nowhere:1')) . "\n";

    // What the worker sees of a job, a binary workload, a large
    // workload and result, an explicit sendComplete.
    $c = newClient();
    print "args " . $c->doNormal('args', "a\0b\xff") . " " . rc($c->returnCode()) . "\n";
    print "handle " . ($c->doJobHandle() !== '' ? 'set' : 'empty') . "\n";
    $big = str_repeat('0123456789', 100000);
    $r = $c->doNormal('big', $big);
    print "big " . substr($r, 0, 40) . " " . strlen($r) . " " . rc($c->returnCode()) . "\n";
    print "expected " . strlen($big) . " " . md5($big) . "\n";
    print "explicit " . $c->doNormal('explicit', 'x') . " " . rc($c->returnCode()) . "\n";

    // The worker asked for a one second timeout. The server takes the job
    // back and queues it again, but tells the waiting client nothing.
    $c = newClient();
    $c->setTimeout(1500);
    $r = $c->doNormal('tmo', 'x');
    print "CAN_DO_TIMEOUT " . var_export($r, true) . " " . rc($c->returnCode()) . "\n";
    release('tmo-go');

    // Background jobs of three priorities are accepted.
    $c = newClient();
    foreach (['doBackground', 'doHighBackground', 'doLowBackground'] as $m) {
        $h = $c->$m('rev', $m);
        print "$m " . ($h !== '' ? 'handle' : 'none') . " " . rc($c->returnCode()) . "\n";
    }
    break;

case 'holder':
    // A worker the test kills while it holds a job, and the one that
    // takes the job over.
    $w = new GearmanWorker();
    $w->addServers($server);
    $w->addFunction('hold', function ($job) {
        print "hold got {$job->workload()}\n";
        release('grabbed');
        waitFile('hold-go');
        return 'held';
    });
    while ($w->work()) {
    }
    exit(1);

case 'holdc':
    $c = newClient();
    $r = $c->doNormal('hold', 'x');
    print "hold $r " . rc($c->returnCode()) . "\n";
    break;

case 'longkey':
    // Status queries by keys too long for gearmand's buffers: the server
    // closes the connection, the call fails at once and the client
    // reconnects for its next request.
    $c = newClient();
    $c->setTimeout(3000);
    foreach (['jobStatus' => str_repeat('H', 200), 'jobStatus ' => str_repeat('H', 64),
        'jobStatusByUniqueKey' => str_repeat('u', 64)] as $m => $key) {
        $m = trim($m);
        $r = @$c->$m($key);
        print "$m " . strlen($key) . " " . json_encode($r) . " " . rc($c->returnCode()) . "\n";
        $h = $c->doBackground('rev', 'after');
        print "then doBackground " . ($h !== '' ? 'handle' : 'none') . " " . rc($c->returnCode()) . "\n";
    }
    break;

case 'wtimeout':
    $w = new GearmanWorker();
    $w->addServers($server);
    $w->setTimeout(200);
    $w->addFunction('wt-a', function ($job) { return 'a:' . $job->workload(); });
    $w->addFunction('wt-b', function ($job) {
        print "wt-b ran {$job->workload()}\n";
        return 'b:' . $job->workload();
    });
    $w->addFunction('wt-c', function ($job) {
        print "wt-c ran {$job->workload()}\n";
        return 'c';
    });
    print "worker ping " . var_export($w->ping('hi'), true) . "\n";
    $r = $w->work();
    print "idle work " . var_export($r, true) . " " . rc($w->returnCode()) . "\n";
    // wt-c is given up (CANT_DO) before its job is queued: the worker
    // skips it and runs the wt-b job queued after it.
    print "unregister " . var_export($w->unregister('wt-c'), true) . "\n";
    $c = newClient();
    $hc = $c->doBackground('wt-c', 'skipped');
    $c->doBackground('wt-b', 'one');
    $r = $w->work();
    print "work " . var_export($r, true) . " " . rc($w->returnCode()) . "\n";
    $r = $w->work();
    print "idle work " . var_export($r, true) . " " . rc($w->returnCode()) . "\n";
    print "wt-c job " . json_encode($c->jobStatus($hc)) . "\n";
    // With every function given up (RESET_ABILITIES) the worker has
    // nothing to ask for.
    print "unregisterAll " . var_export($w->unregisterAll(), true) . "\n";
    $r = @$w->work();
    print "no functions work " . var_export($r, true) . " " . rc($w->returnCode()) . "\n";
    break;

default:
    fwrite(STDERR, "unknown role $role\n");
    exit(2);
}
