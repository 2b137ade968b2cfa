#!/usr/bin/env bash
# Replay time of a million queued jobs: beanstalkd -b against jobgate -data.
# Each server gets JOBS 100-byte jobs (4 pipelining connections), is killed
# with SIGKILL, and is restarted twice on its journal; the time is from the
# start to the first answered command, with the RSS at that moment.
# Servers are stopped by PID.
#
# Usage: scripts/bench-replay.sh   (JOBS [1000000], OUT [a temporary directory])
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-1000000}
OUT=${OUT:-$(mktemp -d /tmp/bench-replay.XXXXXX)}
mkdir -p "$OUT/bs" "$OUT/jg"
go build -o "$OUT/jobgate" ./cmd/jobgate
go build -o "$OUT/jobgate-bench" ./cmd/jobgate-bench
. scripts/bench-lib.sh
BS_PORT=$((20000 + RANDOM % 20000))
JG_PORT=$((BS_PORT + 1))

# ready waits until the server on the port answers a command.
ready() {
	for _ in $(seq 20000); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$1" && printf 'list-tube-used\r\n' >&3 && timeout 60 head -c 5 <&3 | grep -q USING) 2>/dev/null; then
			return 0
		fi
		sleep 0.005
	done
	return 1
}
bs() { exec beanstalkd -l 127.0.0.1 -p "$BS_PORT" -b "$OUT/bs" -F; }
jg() { exec "$OUT/jobgate" -gearman "" -admin "" -beanstalk "127.0.0.1:$JG_PORT" -data "$OUT/jg" -data-fsync never 2>/dev/null; }

fill() { # fill NAME START PORT
	"$2" & local pid=$!
	ready "$3"
	"$OUT/jobgate-bench" beanstalk -addr "127.0.0.1:$3" -workload pipelined-put -conns 4 -n "$JOBS" -keep | tail -1
	kill -9 "$pid"; wait "$pid" 2>/dev/null || true
}
restart() { # restart NAME START PORT
	local s e pid
	s=$(date +%s.%N)
	"$2" & pid=$!
	ready "$3"
	e=$(date +%s.%N)
	echo "$1: $(echo "$e - $s" | bc) s to serve again with $JOBS jobs, RSS $(ps -o rss= -p "$pid") KiB"
	kill -9 "$pid"; wait "$pid" 2>/dev/null || true
}
echo "machine: $(machine_desc); load average $(cut -d' ' -f1-3 /proc/loadavg)"
fill beanstalkd bs "$BS_PORT"
fill jobgate jg "$JG_PORT"
echo "journal on disk: beanstalkd $(du -sh "$OUT/bs" | cut -f1), jobgate $(du -sh "$OUT/jg" | cut -f1)"
for _ in 1 2; do
	restart beanstalkd bs "$BS_PORT"
	restart jobgate jg "$JG_PORT"
done
