#!/usr/bin/env bash
# Compares jobgate as a gateway with a plain TCP proxy: every workload runs
# against a real gearmand / beanstalkd three ways in the same run,
#   direct    the generator talks to the real server,
#   jobgate   through jobgate -gearman-upstream / -beanstalk-upstream,
#             which decodes every frame,
#   haproxy1  through haproxy in TCP mode with nbthread 1,
#   haproxyN  through haproxy in TCP mode with its default thread count,
# and the table compares jobgate with the faster haproxy of the two.
#
# Every run gets fresh processes (the real server, and the proxy if any),
# so jobs queued by one run weigh on no other; the order of the four ways
# rotates every round. CPU per operation comes from /proc/PID/stat of the
# server and of the proxy (utime+stime over the measured span); on a shared
# machine it is steadier than throughput. The generator shares the cores.
# Over each generator run the script also takes the share of the proxy's
# CPU time spent in the kernel (stime of utime+stime) and the TCP segments
# the whole machine sent per operation (OutSegs of /proc/net/snmp, which
# counts every process, the generator's setup included): where most of a
# proxy's time is the kernel's, it can only gain by sending fewer segments.
#
# Usage: scripts/bench-gateway.sh
# Environment (defaults in brackets):
#   ROUNDS [3]  DURATION [5s]  PROTOCOLS ["gearman beanstalk"]
#   GEARMAN_WORKLOADS ["fg bg bg-w16 fg-16k"]: fg (16 clients, 4 workers),
#     bg (16 clients); -wN keeps N requests in flight per client
#     (pipelined), -16k sends 16 KiB bodies
#   BEANSTALK_WORKLOADS ["put-16 cycle pipelined-put put-16k"]
#   WAYS ["direct jobgate haproxy1 haproxyN"]  OUT [a temporary directory]
#   JOBGATE [built from this tree]: a jobgate binary to measure instead
#   SYSCALLS [0]: 1 counts the proxy's system calls and context switches
#     per operation with perf stat over each run (SYSCALL_EVENTS), written
#     to the run's .perf file and summed up after the table; perf slows a
#     proxy with many threads more than one with few, so use such a run
#     for the counts, not the rates
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5s}
PROTOCOLS=${PROTOCOLS:-"gearman beanstalk"}
GEARMAN_WORKLOADS=${GEARMAN_WORKLOADS:-"fg bg bg-w16 fg-16k"}
BEANSTALK_WORKLOADS=${BEANSTALK_WORKLOADS:-"put-16 cycle pipelined-put put-16k"}
WAYS=${WAYS:-"direct jobgate haproxy1 haproxyN"}
SYSCALLS=${SYSCALLS:-0}
# A few named tracepoints, not syscalls:sys_enter_*: perf switches every
# counted event at each context switch of the process, and ~350 of them
# slowed jobgate to a third of its rate.
SYSCALL_EVENTS=${SYSCALL_EVENTS:-syscalls:sys_enter_read,syscalls:sys_enter_write,syscalls:sys_enter_recvfrom,syscalls:sys_enter_sendto,syscalls:sys_enter_epoll_pwait,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_epoll_ctl,syscalls:sys_enter_futex,syscalls:sys_enter_nanosleep,syscalls:sys_enter_tgkill,syscalls:sys_enter_clock_gettime,context-switches}
GEARMAND=${GEARMAND:-$(command -v gearmand || echo /usr/sbin/gearmand)}
HAPROXY=${HAPROXY:-$(command -v haproxy || echo /usr/sbin/haproxy)}
OUT=${OUT:-$(mktemp -d /tmp/bench-gateway.XXXXXX)}
mkdir -p "$OUT"

[ "$SYSCALLS" = 1 ] && ! command -v perf >/dev/null && { echo "SYSCALLS=1 needs perf" >&2; exit 1; }
[ -x "$HAPROXY" ] || { echo "haproxy not found (apt-get install haproxy, or set HAPROXY)" >&2; exit 1; }
case $PROTOCOLS in *gearman*) [ -x "$GEARMAND" ] || { echo "gearmand not found (set GEARMAND)" >&2; exit 1; } ;; esac
case $PROTOCOLS in *beanstalk*) command -v beanstalkd >/dev/null || { echo "beanstalkd not found" >&2; exit 1; } ;; esac
if [ -n "${JOBGATE:-}" ]; then
	cp "$JOBGATE" "$OUT/jobgate"
else
	go build -o "$OUT/jobgate" ./cmd/jobgate
fi
go build -o "$OUT/jobgate-bench" ./cmd/jobgate-bench

. "$(dirname "$0")/bench-lib.sh"

UP_PID="" PX_PID=""
stop_all() {
	for pid in $PX_PID $UP_PID; do
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	UP_PID="" PX_PID=""
}
trap stop_all EXIT

# start_upstream PROTO starts a fresh real server; sets UP_PORT, UP_PID.
start_upstream() {
	UP_PORT=$(free_port)
	if [ "$1" = gearman ]; then
		"$GEARMAND" --threads=0 --listen=127.0.0.1 --port="$UP_PORT" --log-file=none >"$OUT/upstream.log" 2>&1 &
	else
		beanstalkd -l 127.0.0.1 -p "$UP_PORT" >"$OUT/upstream.log" 2>&1 &
	fi
	UP_PID=$!
	wait_port "$UP_PORT"
}

# start_proxy PROTO WAY starts the proxy of WAY in front of the upstream;
# sets PORT (where the generator connects) and PX_PID (empty for direct).
start_proxy() {
	local proto=$1 way=$2 threads=""
	PX_PID=""
	if [ "$way" = direct ]; then
		PORT=$UP_PORT
		return
	fi
	PORT=$(free_port)
	while [ "$PORT" = "$UP_PORT" ]; do PORT=$(free_port); done
	case $way in
	jobgate)
		if [ "$proto" = gearman ]; then
			"$OUT/jobgate" -admin "" -data "" -beanstalk "" -gearman "127.0.0.1:$PORT" \
				-gearman-upstream "127.0.0.1:$UP_PORT" >"$OUT/jobgate.log" 2>&1 &
		else
			"$OUT/jobgate" -admin "" -data "" -gearman "" -beanstalk "127.0.0.1:$PORT" \
				-beanstalk-upstream "127.0.0.1:$UP_PORT" >"$OUT/jobgate.log" 2>&1 &
		fi
		;;
	haproxy*)
		[ "$way" = haproxy1 ] && threads="nbthread 1"
		cat >"$OUT/haproxy.cfg" <<EOF
global
	$threads
	maxconn 1000
defaults
	mode tcp
	timeout connect 5s
	timeout client 5m
	timeout server 5m
frontend bench
	bind 127.0.0.1:$PORT
	default_backend upstream
backend upstream
	server up 127.0.0.1:$UP_PORT
EOF
		# -db: foreground, one process, so $! is the proxy itself.
		"$HAPROXY" -db -f "$OUT/haproxy.cfg" >"$OUT/haproxy.log" 2>&1 &
		;;
	esac
	PX_PID=$!
	wait_port "$PORT"
}

# start_count OUT starts perf stat on the proxy for the run (SYSCALLS=1);
# end_count OUT waits for it and sets COUNTS to " proxy_sys_per_op=N
# proxy_cs_per_op=N" from its counts and the run's rate (empty without).
COUNT_PID=""
start_count() {
	COUNT_PID=""
	[ "$SYSCALLS" = 1 ] && [ -n "$PX_PID" ] || return 0
	perf stat -x, -e "$SYSCALL_EVENTS" -p "$PX_PID" -o "${1%.txt}.perf" -- sleep "${DURATION%s}" &
	COUNT_PID=$!
}
end_count() {
	COUNTS=""
	[ -n "$COUNT_PID" ] || return 0
	wait "$COUNT_PID" || true
	COUNT_PID=""
	local ops
	ops=$(grep -oE 'ops_per_s=[0-9.]+' "$1" | cut -d= -f2)
	COUNTS=$(awk -F, -v ops="$ops" -v secs="${DURATION%s}" '
		$1 + 0 > 0 && $3 ~ /^syscalls:/ { sys += $1 }
		$3 == "context-switches" { cs = $1 }
		END { n = ops * secs; if (n > 0) printf " proxy_sys_per_op=%.3f proxy_cs_per_op=%.3f", sys / n, cs / n }
	' "${1%.txt}.perf")
}

# start_kernel notes the proxy's CPU ticks and the machine's TCP segments
# sent; end_kernel OUT sets KERNEL to " proxy_sys_share=F segs_per_op=F"
# for the run since start_kernel (the share empty without a proxy).
proxy_ticks() { # user and system ticks of PX_PID
	[ -n "$PX_PID" ] && sed 's/.*) //' "/proc/$PX_PID/stat" | cut -d' ' -f12,13 || echo "0 0"
}
out_segs() {
	awk '/^Tcp:/ { if (n++) { for (i = 1; i <= NF; i++) if (h[i] == "OutSegs") print $i } else for (i = 1; i <= NF; i++) h[i] = $i }' /proc/net/snmp
}
start_kernel() {
	TICKS0=$(proxy_ticks) SEGS0=$(out_segs)
}
end_kernel() {
	local ops
	ops=$(grep -oE 'ops_per_s=[0-9.]+' "$1" | cut -d= -f2)
	KERNEL=$(echo "$TICKS0 $(proxy_ticks) $SEGS0 $(out_segs)" | awk -v ops="$ops" -v secs="${DURATION%s}" '{
		u = $3 - $1; s = $4 - $2; n = ops * secs
		if (u + s > 0) printf " proxy_sys_share=%.3f", s / (u + s)
		if (n > 0) printf " segs_per_op=%.2f", ($6 - $5) / n
	}')
}

# run_one PROTO WORKLOAD WAY ROUND appends "proto workload way round
# key=value..." to results.
run_one() {
	local proto=$1 wl=$2 way=$3 round=$4 args base out="$OUT/$1-$2-$3-$4.txt"
	start_upstream "$proto"
	start_proxy "$proto" "$way"
	start_count "$out"
	start_kernel
	base=${wl%-16k}
	if [ "$proto" = gearman ]; then
		args=(-workload "${base%%-*}" -clients 16 -duration "$DURATION")
		case $base in *-w*) args+=(-window "${base##*-w}") ;; esac
		case $base in fg*) args+=(-workers 4) ;; esac
		case $wl in *-16k) args+=(-body-size 16384) ;; *) args+=(-body-size 100) ;; esac
		[ -n "$PX_PID" ] && args+=(-proxy-pid "$PX_PID")
		"$OUT/jobgate-bench" gearman -addr "127.0.0.1:$PORT" -pid "$UP_PID" "${args[@]}" >"$out"
		end_count "$out"
		end_kernel "$out"
		echo "$proto $wl $way $round $(grep '^summary' "$out" | cut -d' ' -f2-)$COUNTS$KERNEL" >>"$OUT/results"
	else
		case $wl in
		put-16) args=(-workload put -conns 16) ;;
		put-16k) args=(-workload put -conns 4 -body-size 16384) ;;
		cycle) args=(-workload cycle -producers 4 -consumers 4) ;;
		cycle-16k) args=(-workload cycle -producers 4 -consumers 4 -body-size 16384) ;;
		pipelined-put) args=(-workload pipelined-put -conns 4) ;;
		*) echo "unknown workload $wl" >&2; exit 1 ;;
		esac
		[ -n "$PX_PID" ] && args+=(-proxy-pid "$PX_PID")
		# -keep: the server is thrown away after the run, no need to drain it.
		"$OUT/jobgate-bench" beanstalk -addr "127.0.0.1:$PORT" -pid "$UP_PID" -keep -duration "$DURATION" "${args[@]}" >"$out"
		end_count "$out"
		end_kernel "$out"
		echo "$proto $wl $way $round $(grep '^result' "$out" | cut -d' ' -f2-)$COUNTS$KERNEL" >>"$OUT/results"
	fi
	stop_all
}

echo "machine: $(machine_desc); load average before $(cut -d' ' -f1-3 /proc/loadavg)"
echo "$("$HAPROXY" -v | head -1); rounds=$ROUNDS duration=$DURATION; medians of the rounds; raw runs in $OUT"
: >"$OUT/results"
read -r -a ways <<<"$WAYS"
for proto in $PROTOCOLS; do
	if [ "$proto" = gearman ]; then wls=$GEARMAN_WORKLOADS; else wls=$BEANSTALK_WORKLOADS; fi
	for round in $(seq "$ROUNDS"); do
		for wl in $wls; do
			# Rotate the order of the ways every round, so none always runs
			# first or last in a changing outside load.
			n=${#ways[@]}
			for i in $(seq 0 $((n - 1))); do
				run_one "$proto" "$wl" "${ways[$(((i + round - 1) % n))]}" "$round"
			done
		done
	done
done
echo "load average after $(cut -d' ' -f1-3 /proc/loadavg)"

awk -v ways="$WAYS" '
function median(list,   n, i, j, t, a) {
	n = split(list, a, " ")
	for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
	return n ? a[int((n + 1) / 2)] : 0
}
{
	key = $1 " " $2; way = $3; round = $4
	if (!(key in seen)) { seen[key] = 1; order[++nk] = key }
	for (i = 5; i <= NF; i++) {
		split($i, kv, "=")
		vals[key, way, kv[1]] = vals[key, way, kv[1]] " " kv[2]
		v[key, way, round, kv[1]] = kv[2]
	}
	if (!((key, round) in hasround)) { hasround[key, round] = 1; rounds[key] = rounds[key] " " round }
}
# ratio(key, a, b, field) is the median over rounds of a/b for field.
function ratio(key, a, b, f,   n, i, r, rs, out) {
	out = ""
	n = split(rounds[key], rs, " ")
	for (i = 1; i <= n; i++) {
		r = rs[i]
		if (v[key, b, r, f] > 0 && v[key, a, r, f] != "") out = out " " v[key, a, r, f] / v[key, b, r, f]
	}
	return median(out)
}
END {
	nw = split(ways, w, " ")
	printf "%-23s %-9s %9s %8s %8s %10s %10s %7s %7s %6s\n", "workload", "way", "ops/s", "p50 µs", "p99 µs", "server µs", "proxy µs", "gen µs", "kernel", "segs"
	for (k = 1; k <= nk; k++) {
		key = order[k]
		for (i = 1; i <= nw; i++) {
			if (vals[key, w[i], "ops_per_s"] == "") continue
			printf "%-23s %-9s %9.0f %8.0f %8.0f %10.1f %10.1f %7.1f %7s %6.2f\n", key, w[i], median(vals[key, w[i], "ops_per_s"]),
				median(vals[key, w[i], "p50_us"]), median(vals[key, w[i], "p99_us"]),
				median(vals[key, w[i], "server_cpu_us"]), median(vals[key, w[i], "proxy_cpu_us"]), median(vals[key, w[i], "gen_cpu_us"]),
				vals[key, w[i], "proxy_sys_share"] == "" ? "-" : sprintf("%.0f%%", 100 * median(vals[key, w[i], "proxy_sys_share"])),
				median(vals[key, w[i], "segs_per_op"])
		}
		hp = "haproxy1"
		if (median(vals[key, "haproxyN", "ops_per_s"]) > median(vals[key, "haproxy1", "ops_per_s"])) hp = "haproxyN"
		if (vals[key, hp, "ops_per_s"] == "" || vals[key, "jobgate", "ops_per_s"] == "") continue
		direct = ""
		if (vals[key, "direct", "ops_per_s"] != "")
			direct = sprintf(", jobgate/direct %.2fx, %s/direct %.2fx", ratio(key, "jobgate", "direct", "ops_per_s"), hp, ratio(key, hp, "direct", "ops_per_s"))
		printf "%-23s ratios vs %s: throughput jobgate/%s %.2fx%s; p99 %s/jobgate %.2fx\n",
			key, hp, hp, ratio(key, "jobgate", hp, "ops_per_s"), direct, hp, ratio(key, hp, "jobgate", "p99_us")
	}
	for (k = 1; k <= nk; k++) {
		key = order[k]
		for (i = 1; i <= nw; i++) {
			if (vals[key, w[i], "proxy_sys_per_op"] == "") continue
			printf "%-23s %-9s system calls per op %.3f, context switches per op %.3f (medians; per call in the .perf files)\n", key, w[i],
				median(vals[key, w[i], "proxy_sys_per_op"]), median(vals[key, w[i], "proxy_cs_per_op"])
		}
	}
	print "server µs, proxy µs, gen µs: CPU per operation (job) of the real server, of the proxy and of the load generator; kernel: the share of the proxy'"'"'s CPU time in the kernel;"
	print "segs: TCP segments the machine sent per operation; ratios: median over rounds of the runs of one round"
	print "(p99 above 1: jobgate better); the faster haproxy (median throughput) is the one compared"
}' "$OUT/results"
