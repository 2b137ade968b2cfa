#!/usr/bin/env bash
# Measures what tracing costs: one jobgate with tracing off and one with
# tracing on (sampler always_on unless SAMPLER says otherwise), exporting over OTLP/HTTP to a receiver
# that discards the spans (jobgate-bench otlp-sink), both serving from their
# in-process engines on free loopback ports. Each workload runs against the
# two alternately (the order flips every round) ROUNDS times; the table
# shows the medians and the on/off ratio of each round's back-to-back pair,
# with the lowest and highest round (the spread), and the CPU the sink
# used per job, which the traced run pays for on the shared CPUs.
#
# Usage: scripts/bench-tracing.sh
# Environment (defaults in brackets):
#   ROUNDS [3]  DURATION [5s]  CLIENTS [16]  WORKERS [4]  BODY [100]
#   SAMPLER [always_on]  RATIO [1]: the traced jobgate's sampler and
#     sample_ratio, e.g. SAMPLER=parentbased_traceidratio RATIO=0.1
#   ENDPOINT [a jobgate-bench otlp-sink started here]: export there instead;
#     http://127.0.0.1:9 (a closed port) encodes every span and fails every
#     post, which takes the sink's CPU out of the measurement
#   GATEWAY [0]: 1 puts each jobgate in front of its own real gearmand
#     (--threads=0) and beanstalkd (-gearman-upstream, -beanstalk-upstream),
#     started fresh every round, so the traced path is the gateway's; the
#     server CPU column is then the gateway's
#   OUT [a temporary directory]
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5s}
CLIENTS=${CLIENTS:-16}
WORKERS=${WORKERS:-4}
BODY=${BODY:-100}
SAMPLER=${SAMPLER:-always_on}
RATIO=${RATIO:-1}
GATEWAY=${GATEWAY:-0}
GEARMAND=${GEARMAND:-$(command -v gearmand || echo /usr/sbin/gearmand)}
OUT=${OUT:-$(mktemp -d /tmp/bench-tracing.XXXXXX)}
mkdir -p "$OUT"

go build -o "$OUT/jobgate" ./cmd/jobgate
go build -o "$OUT/jobgate-bench" ./cmd/jobgate-bench
. "$(dirname "$0")/bench-lib.sh"

SINK_PID="" OFF_PID="" ON_PID="" UP_PIDS=""
stop_all() {
	stop_pids $OFF_PID $ON_PID $UP_PIDS $SINK_PID
	OFF_PID="" ON_PID="" UP_PIDS="" SINK_PID=""
}
trap stop_all EXIT
stop_jobgates() {
	stop_pids $OFF_PID $ON_PID $UP_PIDS
	OFF_PID="" ON_PID="" UP_PIDS=""
}

# upstream_args starts a fresh gearmand and beanstalkd when GATEWAY=1 and
# sets UPSTREAM to the jobgate flags that route everything to them.
upstream_args() {
	UPSTREAM=""
	[ "$GATEWAY" = 1 ] || return 0
	local gm bs
	gm=$(free_port)
	"$GEARMAND" --threads=0 --listen=127.0.0.1 --port="$gm" --log-file=none >>"$OUT/upstream.log" 2>&1 &
	UP_PIDS="$UP_PIDS $!"
	bs=$(free_port)
	while [ "$bs" = "$gm" ]; do bs=$(free_port); done
	beanstalkd -l 127.0.0.1 -p "$bs" >>"$OUT/upstream.log" 2>&1 &
	UP_PIDS="$UP_PIDS $!"
	wait_port "$gm"
	wait_port "$bs"
	UPSTREAM="-gearman-upstream 127.0.0.1:$gm -beanstalk-upstream 127.0.0.1:$bs"
}

if [ -z "${ENDPOINT:-}" ]; then
	SINK_PORT=$(free_port)
	"$OUT/jobgate-bench" otlp-sink -addr "127.0.0.1:$SINK_PORT" >"$OUT/sink.log" 2>&1 &
	SINK_PID=$!
	wait_port "$SINK_PORT"
	ENDPOINT="http://127.0.0.1:$SINK_PORT"
else
	echo "no sink: exporting to $ENDPOINT" >"$OUT/sink.log"
fi
cat >"$OUT/on.yaml" <<YAML
tracing:
  enabled: true
  endpoint: "$ENDPOINT"
  protocol: http/protobuf
  sampler: $SAMPLER
  sample_ratio: $RATIO
YAML

# start_one NAME [ARGS...] starts a jobgate on two free ports, trying
# again if another process took a port meanwhile; it sets PID, GM and BS.
start_one() {
	local name=$1
	shift
	for _ in 1 2 3 4 5; do
		GM=$(free_port)
		BS=$(free_port)
		[ "$GM" = "$BS" ] && continue
		"$OUT/jobgate" "$@" -gearman "127.0.0.1:$GM" -beanstalk "127.0.0.1:$BS" -admin "" -data "" >"$OUT/$name.log" 2>&1 &
		PID=$!
		if wait_port "$GM" 2>/dev/null && wait_port "$BS" 2>/dev/null && kill -0 "$PID" 2>/dev/null; then
			return 0
		fi
		kill "$PID" 2>/dev/null || true
		wait "$PID" 2>/dev/null || true
	done
	echo "could not start jobgate ($name)" >&2
	return 1
}

start_jobgates() {
	upstream_args
	# shellcheck disable=SC2086 # UPSTREAM is a list of flags
	start_one off $UPSTREAM
	OFF_PID=$PID OFF_GM=$GM OFF_BS=$BS
	upstream_args
	# shellcheck disable=SC2086
	start_one on -config "$OUT/on.yaml" $UPSTREAM
	ON_PID=$PID ON_GM=$GM ON_BS=$BS
}

: >"$OUT/results"
# The generator's -proxy-pid measures the sink's CPU per job as well (its
# "proxy_cpu_us"): the traced run pays for it on the shared CPUs.
sink=()
[ -n "$SINK_PID" ] && sink=(-proxy-pid "$SINK_PID")
for round in $(seq "$ROUNDS"); do
	start_jobgates
	if [ $((round % 2)) -eq 1 ]; then order="off on"; else order="on off"; fi
	for mode in $order; do
		if [ "$mode" = off ]; then gm=$OFF_GM bs=$OFF_BS pid=$OFF_PID; else gm=$ON_GM bs=$ON_BS pid=$ON_PID; fi
		"$OUT/jobgate-bench" gearman -addr "127.0.0.1:$gm" -pid "$pid" "${sink[@]}" -workload fg -clients "$CLIENTS" \
			-workers "$WORKERS" -body-size "$BODY" -duration "$DURATION" >"$OUT/$mode-fg-$round.txt"
		echo "$mode gearman-fg $round $(grep '^summary' "$OUT/$mode-fg-$round.txt" | cut -d' ' -f2-)" >>"$OUT/results"
		"$OUT/jobgate-bench" beanstalk -addr "127.0.0.1:$bs" -pid "$pid" "${sink[@]}" -workload cycle -producers 4 -consumers 4 \
			-body-size "$BODY" -duration "$DURATION" >"$OUT/$mode-bs-$round.txt"
		echo "$mode beanstalk-cycle $round $(grep '^result' "$OUT/$mode-bs-$round.txt" | cut -d' ' -f2-)" >>"$OUT/results"
	done
	stop_jobgates
done
stop_pids $SINK_PID
SINK_PID=""

echo "machine: $(machine_desc); load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "rounds=$ROUNDS duration=$DURATION sampler=$SAMPLER ratio=$RATIO gateway=$GATEWAY; medians of the rounds; raw runs in $OUT; sink: $(tail -1 "$OUT/sink.log")"
awk '
function median(list,   n, i, j, t, a) {
	n = split(list, a, " ")
	for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
	return n ? a[int((n + 1) / 2)] : 0
}
function spread(list,   n, i, a, lo, hi) {
	n = split(list, a, " ")
	if (!n) return ""
	lo = hi = a[1] + 0
	for (i = 2; i <= n; i++) { if (a[i] + 0 < lo) lo = a[i] + 0; if (a[i] + 0 > hi) hi = a[i] + 0 }
	return sprintf("%.2f-%.2f", lo, hi)
}
{
	mode = $1; wl = $2; round = $3
	if (!(wl in seen)) { seen[wl] = 1; order[++nw] = wl }
	for (i = 4; i <= NF; i++) {
		split($i, kv, "=")
		vals[mode, wl, kv[1]] = vals[mode, wl, kv[1]] " " kv[2]
		v[mode, wl, round, kv[1]] = kv[2]
	}
	rounds[wl, round] = 1
}
END {
	printf "%-16s %-6s %10s %9s %13s %11s  %s\n", "workload", "trace", "jobs/s", "p99 µs", "server µs/job", "sink µs/job", "range of the round ratios"
	for (w = 1; w <= nw; w++) {
		wl = order[w]
		for (m = 1; m <= 2; m++) {
			mode = m == 1 ? "off" : "on"
			printf "%-16s %-6s %10.0f %9s %13s %11s\n", wl, mode, median(vals[mode, wl, "ops_per_s"]),
				median(vals[mode, wl, "p99_us"]), median(vals[mode, wl, "server_cpu_us"]), median(vals[mode, wl, "proxy_cpu_us"])
		}
		rt = ""; rc = ""
		for (r = 1; r <= 100; r++) {
			if (!((wl, r) in rounds)) continue
			if (v["off", wl, r, "ops_per_s"] > 0) rt = rt " " v["on", wl, r, "ops_per_s"] / v["off", wl, r, "ops_per_s"]
			if (v["off", wl, r, "server_cpu_us"] > 0) rc = rc " " v["on", wl, r, "server_cpu_us"] / v["off", wl, r, "server_cpu_us"]
		}
		printf "%-16s %-6s %9.2fx %9s %12.2fx %11s  %s, cpu %s\n", wl, "on/off", median(rt), "", median(rc), "", spread(rt), spread(rc)
	}
	print "on/off: median over rounds of the throughput ratio and the server CPU per job ratio, then their lowest and highest round"
	print "sink µs/job: the CPU the OTLP sink used per job (none when ENDPOINT is given)"
}' "$OUT/results"
