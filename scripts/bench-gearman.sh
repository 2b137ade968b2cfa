#!/usr/bin/env bash
# Compares jobgate's Gearman server with a real gearmand --threads=0 on this
# machine: both are started on free loopback ports, each workload runs
# against them alternately (the order flips every round) ROUNDS times, and
# the table shows the median of the rounds for each server and the ratio.
#
# On a shared machine throughput moves with other people's load; the server
# CPU per operation (utime+stime from /proc/PID/stat, over the run) is the
# steadier figure. The generator's own CPU per operation (getrusage) is
# shown too: both share the same cores.
#
# Usage: scripts/bench-gearman.sh
# Environment (defaults in brackets):
#   ROUNDS [3]  DURATION [5s]  CLIENTS [16]  WORKERS [4]  BODY [100]
#   WORKLOADS ["fg fg-w4 bg echo"]: fg, bg, echo; "-wN" adds -window N
#   GEARMAND [gearmand from PATH or /usr/sbin]  OUT [a temporary directory]
#   JOBGATE [built from this tree]: a jobgate binary to measure instead,
#     e.g. one built from an older commit for a before/after comparison
#   JOURNAL [off]: "on" runs jobgate with its default journal (background
#     jobs durable, fsync every 50ms); off keeps jobs in memory, like
#     gearmand without a queue backend
#   MEMORY_JOBS [1000000]: after the rounds, this many background jobs are
#     queued (no workers) on fresh servers and each server's RSS growth
#     per job is printed; 0 skips it
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5s}
CLIENTS=${CLIENTS:-16}
WORKERS=${WORKERS:-4}
BODY=${BODY:-100}
WORKLOADS=${WORKLOADS:-"fg fg-w4 bg echo"}
MEMORY_JOBS=${MEMORY_JOBS:-1000000}
GEARMAND=${GEARMAND:-$(command -v gearmand || echo /usr/sbin/gearmand)}
OUT=${OUT:-$(mktemp -d /tmp/bench-gearman.XXXXXX)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

[ -x "$GEARMAND" ] || { echo "gearmand not found (set GEARMAND)" >&2; exit 1; }
if [ -n "${JOBGATE:-}" ]; then
	cp "$JOBGATE" "$OUT/jobgate"
else
	go build -o "$OUT/jobgate" ./cmd/jobgate
fi
go build -o "$OUT/jobgate-bench" ./cmd/jobgate-bench

. "$(dirname "$0")/bench-lib.sh"

GM_PID="" JG_PID=""
stop_servers() {
	stop_pids $GM_PID $JG_PID
	GM_PID="" JG_PID=""
}
trap stop_servers EXIT

# start_servers starts both servers afresh, so queued background jobs of
# an earlier round weigh on neither.
start_servers() {
	GM_PORT=$(free_port)
	"$GEARMAND" --threads=0 --listen=127.0.0.1 --port="$GM_PORT" --log-file=none >"$OUT/gearmand.log" 2>&1 &
	GM_PID=$!
	JG_PORT=$(free_port)
	while [ "$JG_PORT" = "$GM_PORT" ]; do JG_PORT=$(free_port); done
	# jobgate journals background jobs under ./jobgate-data and restores
	# them when it starts: a fresh directory per round keeps the last
	# round's queue out of this one (and out of the work tree).
	rm -rf "$OUT/run"
	mkdir "$OUT/run"
	local data=()
	[ "${JOURNAL:-off}" = on ] || data=(-data "")
	(cd "$OUT/run" && exec "$OUT/jobgate" -gearman "127.0.0.1:$JG_PORT" -beanstalk "" -admin "" "${data[@]}") >"$OUT/jobgate.log" 2>&1 &
	JG_PID=$!
	wait_port "$GM_PORT"
	wait_port "$JG_PORT"
}

# run_one SERVER WORKLOAD ROUND appends "server workload round summary..."
# to results.
run_one() {
	local server=$1 wl=$2 round=$3 port pid args
	if [ "$server" = gearmand ]; then port=$GM_PORT pid=$GM_PID; else port=$JG_PORT pid=$JG_PID; fi
	args=(-workload "${wl%%-*}" -clients "$CLIENTS" -body-size "$BODY" -duration "$DURATION")
	case $wl in
	*-w*) args+=(-window "${wl##*-w}") ;;
	esac
	case $wl in
	fg*) args+=(-workers "$WORKERS") ;;
	esac
	"$OUT/jobgate-bench" gearman -addr "127.0.0.1:$port" -pid "$pid" "${args[@]}" >"$OUT/$server-$wl-$round.txt"
	echo "$server $wl $round $(grep '^summary' "$OUT/$server-$wl-$round.txt")" >>"$OUT/results"
}

: >"$OUT/results"
for round in $(seq "$ROUNDS"); do
	start_servers
	for wl in $WORKLOADS; do
		if [ $((round % 2)) -eq 1 ]; then order="gearmand jobgate"; else order="jobgate gearmand"; fi
		for server in $order; do
			run_one "$server" "$wl" "$round"
		done
	done
	stop_servers
done

echo "machine: $(machine_desc); load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "rounds=$ROUNDS duration=$DURATION clients=$CLIENTS workers=$WORKERS body=$BODY; medians of the rounds; raw runs in $OUT"
awk '
function median(list,   n, i, j, t, a) {
	n = split(list, a, " ")
	for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
	return n ? a[int((n + 1) / 2)] : 0
}
{
	srv = $1; wl = $2; round = $3
	if (!(wl in seen)) { seen[wl] = 1; order[++nw] = wl }
	for (i = 5; i <= NF; i++) {
		split($i, kv, "=")
		vals[srv, wl, kv[1]] = vals[srv, wl, kv[1]] " " kv[2]
		v[srv, wl, round, kv[1]] = kv[2]
	}
	rounds[wl] = rounds[wl] " " round
}
END {
	printf "%-8s %-9s %10s %9s %9s %13s %10s\n", "workload", "server", "ops/s", "p50 µs", "p99 µs", "server µs/op", "gen µs/op"
	for (w = 1; w <= nw; w++) {
		wl = order[w]
		for (s = 1; s <= 2; s++) {
			srv = s == 1 ? "gearmand" : "jobgate"
			printf "%-8s %-9s %10.0f %9.0f %9.0f %13.1f %10.1f\n", wl, srv, median(vals[srv, wl, "ops_per_s"]),
				median(vals[srv, wl, "p50_us"]), median(vals[srv, wl, "p99_us"]),
				median(vals[srv, wl, "server_cpu_us"]), median(vals[srv, wl, "gen_cpu_us"])
		}
		# Ratios of the two runs of each round (run back to back, so under
		# about the same outside load), then their median.
		rt = ""; rp = ""; rc = ""
		n = split(rounds[wl], rs, " ")
		for (i = 1; i <= n; i++) {
			r = rs[i]
			if (done[wl, r]++) continue
			g = "gearmand"; j = "jobgate"
			if (v[g, wl, r, "ops_per_s"] > 0) rt = rt " " v[j, wl, r, "ops_per_s"] / v[g, wl, r, "ops_per_s"]
			if (v[j, wl, r, "p99_us"] > 0) rp = rp " " v[g, wl, r, "p99_us"] / v[j, wl, r, "p99_us"]
			if (v[j, wl, r, "server_cpu_us"] > 0) rc = rc " " v[g, wl, r, "server_cpu_us"] / v[j, wl, r, "server_cpu_us"]
		}
		printf "%-8s %-9s %9.2fx %9s %8.2fx %12.2fx\n", wl, "ratio", median(rt), "", median(rp), median(rc)
	}
	print "ratio: median over rounds of jobgate/gearmand throughput, gearmand/jobgate p99 and server CPU per op (above 1: jobgate better)"
}' "$OUT/results"

# Memory per queued background job: RSS growth over MEMORY_JOBS queued
# 100-byte jobs, on servers started afresh (the rounds' queues are gone).
if [ "$MEMORY_JOBS" -gt 0 ]; then
	start_servers
	for server in gearmand jobgate; do
		if [ "$server" = gearmand ]; then port=$GM_PORT pid=$GM_PID; else port=$JG_PORT pid=$JG_PID; fi
		"$OUT/jobgate-bench" gearman -addr "127.0.0.1:$port" -pid "$pid" -workload bg -clients "$CLIENTS" \
			-body-size 100 -n "$MEMORY_JOBS" -function jobgate-bench-memory >"$OUT/$server-memory.txt"
		echo "memory $server: $MEMORY_JOBS queued 100-byte background jobs, $(sed -n 's/^server rss: //p' "$OUT/$server-memory.txt" | cut -d';' -f1)"
	done
	stop_servers
fi
