#!/usr/bin/env bash
# Compares jobgate's Beanstalk server with a real beanstalkd on this
# machine: both are started on free loopback ports and every workload runs
# against them alternately (jobgate-bench -compare), ROUNDS runs each; the
# summary line of each workload gives the median rates and their ratio
# (jobgate / beanstalkd, above 1: jobgate faster), the median p99 latency
# of each, and each server's CPU time per job (utime+stime from
# /proc/PID/stat over the run). Servers are stopped by PID.
#
# Usage: scripts/bench-beanstalk.sh
# Environment (defaults in brackets):
#   ROUNDS [3]  DURATION [5s]  OUT [a temporary directory]
#   WORKLOADS ["put-1 put-16 reserve-delete cycle pipelined-put put-16k"]
#   JOBGATE [built from this tree]: a jobgate binary to measure instead,
#     e.g. an older build to compare with
#   FSYNC [""]: with always, interval or never, both servers persist, each
#     with the matching policy: jobgate -data-fsync always|interval (50ms)|
#     never against beanstalkd -b with -f0|-f50|-F.
#   MEMORY_JOBS [1000000]: after the workloads, this many 100-byte jobs are
#     put (and kept) on fresh in-memory servers and each server's RSS
#     growth per job is printed; 0 skips it
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5s}
WORKLOADS=${WORKLOADS:-"put-1 put-16 reserve-delete cycle pipelined-put put-16k"}
FSYNC=${FSYNC:-}
MEMORY_JOBS=${MEMORY_JOBS:-1000000}
OUT=${OUT:-$(mktemp -d /tmp/bench-beanstalk.XXXXXX)}
mkdir -p "$OUT"
command -v beanstalkd >/dev/null || { echo "beanstalkd not found" >&2; exit 1; }
if [ -n "${JOBGATE:-}" ]; then
	cp "$JOBGATE" "$OUT/jobgate"
else
	go build -o "$OUT/jobgate" ./cmd/jobgate
fi
go build -o "$OUT/jobgate-bench" ./cmd/jobgate-bench

. "$(dirname "$0")/bench-lib.sh"

BS_PID="" JG_PID=""
stop_servers() {
	stop_pids $BS_PID $JG_PID
	BS_PID="" JG_PID=""
}
trap stop_servers EXIT

echo "machine: $(machine_desc); load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "rounds=$ROUNDS duration=$DURATION fsync=${FSYNC:-off}; raw runs in $OUT"
case $FSYNC in
"") BS_PERSIST=() JG_PERSIST=(-data "") ;;
always) BS_PERSIST=(-f0) JG_PERSIST=(-data-fsync always) ;;
interval) BS_PERSIST=(-f50) JG_PERSIST=(-data-fsync interval -data-fsync-interval 50ms) ;;
never) BS_PERSIST=(-F) JG_PERSIST=(-data-fsync never) ;;
*) echo "FSYNC must be always, interval or never" >&2; exit 1 ;;
esac
for wl in $WORKLOADS; do
	# Fresh servers per workload, so one workload's leftovers weigh on no other.
	BS_PORT=$(free_port)
	persist_bs=() persist_jg=("${JG_PERSIST[@]}")
	if [ -n "$FSYNC" ]; then
		rm -rf "$OUT/data-bs" "$OUT/data-jg"
		mkdir -p "$OUT/data-bs" "$OUT/data-jg"
		persist_bs=(-b "$OUT/data-bs" "${BS_PERSIST[@]}")
		persist_jg+=(-data "$OUT/data-jg")
	fi
	beanstalkd -l 127.0.0.1 -p "$BS_PORT" "${persist_bs[@]}" >"$OUT/beanstalkd.log" 2>&1 &
	BS_PID=$!
	JG_PORT=$(free_port)
	while [ "$JG_PORT" = "$BS_PORT" ]; do JG_PORT=$(free_port); done
	"$OUT/jobgate" -gearman "" -admin "" "${persist_jg[@]}" -beanstalk "127.0.0.1:$JG_PORT" >"$OUT/jobgate.log" 2>&1 &
	JG_PID=$!
	wait_port "$BS_PORT"
	wait_port "$JG_PORT"
	case $wl in
	put-1) args=(-workload put -conns 1) ;;
	put-16) args=(-workload put -conns 16) ;;
	put-16k) args=(-workload put -conns 4 -body-size 16384) ;;
	reserve-delete) args=(-workload reserve-delete -conns 4) ;;
	cycle) args=(-workload cycle -producers 4 -consumers 4) ;;
	pipelined-put) args=(-workload pipelined-put -conns 4) ;;
	*) echo "unknown workload $wl" >&2; exit 1 ;;
	esac
	"$OUT/jobgate-bench" beanstalk -addr "127.0.0.1:$JG_PORT" -compare "127.0.0.1:$BS_PORT" \
		-pid "$JG_PID" -compare-pid "$BS_PID" \
		-rounds "$ROUNDS" -duration "$DURATION" "${args[@]}" >"$OUT/$wl.txt"
	echo "$wl: $(grep '^summary' "$OUT/$wl.txt" | sed "s/127.0.0.1:$JG_PORT/jobgate/; s/127.0.0.1:$BS_PORT/beanstalkd/")"
	stop_servers
done

# rss_kb PID prints the resident set size of PID in KiB.
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }

# Memory per queued job: RSS growth over MEMORY_JOBS kept 100-byte jobs.
if [ "$MEMORY_JOBS" -gt 0 ]; then
	BS_PORT=$(free_port)
	beanstalkd -l 127.0.0.1 -p "$BS_PORT" >"$OUT/beanstalkd.log" 2>&1 &
	BS_PID=$!
	JG_PORT=$(free_port)
	while [ "$JG_PORT" = "$BS_PORT" ]; do JG_PORT=$(free_port); done
	"$OUT/jobgate" -gearman "" -admin "" -data "" -beanstalk "127.0.0.1:$JG_PORT" >"$OUT/jobgate.log" 2>&1 &
	JG_PID=$!
	wait_port "$BS_PORT"
	wait_port "$JG_PORT"
	for server in beanstalkd jobgate; do
		if [ "$server" = beanstalkd ]; then port=$BS_PORT pid=$BS_PID; else port=$JG_PORT pid=$JG_PID; fi
		before=$(rss_kb "$pid")
		"$OUT/jobgate-bench" beanstalk -addr "127.0.0.1:$port" -workload put -conns 8 -body-size 100 \
			-n "$MEMORY_JOBS" -keep >"$OUT/$server-memory.txt"
		after=$(rss_kb "$pid")
		echo "memory $server: $MEMORY_JOBS kept 100-byte jobs, RSS $before -> $after KiB, $(((after - before) * 1024 / MEMORY_JOBS)) bytes/job"
	done
	stop_servers
fi
