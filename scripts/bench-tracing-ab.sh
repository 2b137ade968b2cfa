#!/usr/bin/env bash
# Compares what tracing costs in two builds of jobgate, side by side: the
# traced server of build A, the traced server of build B and the untraced
# server of build B run at the same time, exporting over OTLP/HTTP to
# jobgate-bench otlp-sink, and the workload (gearman-fg, or
# beanstalk-cycle with WORKLOAD=beanstalk-cycle) runs against each in turn
# (the order rotates every round) ROUNDS times. On a shared machine the load
# moves a lot between runs; a paired comparison round by round is what
# can still tell two builds apart. Prints each run's summary, then the
# medians of server CPU per job and of the per-round difference B - A.
#
# Usage: scripts/bench-tracing-ab.sh JOBGATE_A JOBGATE_B
#   (binaries, e.g. built with go build -o from two git archive copies)
# Environment (defaults in brackets):
#   ROUNDS [7]  DURATION [3s]  CLIENTS [16]  WORKERS [4]  BODY [100]
#   WORKLOAD [gearman-fg; or beanstalk-cycle, 4 producers and 4 consumers]
#   OUT [a temporary directory]
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -ne 2 ]; then
	echo "usage: $0 JOBGATE_A JOBGATE_B" >&2
	exit 2
fi
A=$(realpath "$1")
B=$(realpath "$2")
ROUNDS=${ROUNDS:-7}
DURATION=${DURATION:-3s}
CLIENTS=${CLIENTS:-16}
WORKERS=${WORKERS:-4}
BODY=${BODY:-100}
WORKLOAD=${WORKLOAD:-gearman-fg}
case $WORKLOAD in
gearman-fg | beanstalk-cycle) ;;
*)
	echo "WORKLOAD must be gearman-fg or beanstalk-cycle" >&2
	exit 2
	;;
esac
OUT=${OUT:-$(mktemp -d /tmp/bench-tracing-ab.XXXXXX)}
mkdir -p "$OUT"
go build -o "$OUT/jobgate-bench" ./cmd/jobgate-bench
. "$(dirname "$0")/bench-lib.sh"

PIDS=""
trap 'stop_pids $PIDS' EXIT
SINK_PORT=$(free_port)
"$OUT/jobgate-bench" otlp-sink -addr "127.0.0.1:$SINK_PORT" >"$OUT/sink.log" 2>&1 &
PIDS="$PIDS $!"
wait_port "$SINK_PORT"
cat >"$OUT/on.yaml" <<YAML
tracing:
  enabled: true
  endpoint: "http://127.0.0.1:$SINK_PORT"
  protocol: http/protobuf
  sampler: always_on
YAML

# start NAME BINARY [ARGS...] starts a jobgate serving only the
# workload's protocol on a free port; it sets PID_NAME and PORT_NAME.
start() {
	local name=$1 bin=$2 port listen
	shift 2
	port=$(free_port)
	if [ "$WORKLOAD" = gearman-fg ]; then
		listen=(-gearman "127.0.0.1:$port" -beanstalk "")
	else
		listen=(-gearman "" -beanstalk "127.0.0.1:$port")
	fi
	"$bin" "$@" "${listen[@]}" -admin "" -data "" >"$OUT/$name.log" 2>&1 &
	PIDS="$PIDS $!"
	eval "PID_$name=$! PORT_$name=$port"
	wait_port "$port"
}
start a_on "$A" -config "$OUT/on.yaml"
start b_on "$B" -config "$OUT/on.yaml"
start b_off "$B"

names=(a_on b_on b_off)
: >"$OUT/results"
for round in $(seq "$ROUNDS"); do
	for k in 0 1 2; do
		name=${names[$(((k + round) % 3))]}
		pid=$(eval echo "\$PID_$name")
		port=$(eval echo "\$PORT_$name")
		if [ "$WORKLOAD" = gearman-fg ]; then
			"$OUT/jobgate-bench" gearman -addr "127.0.0.1:$port" -pid "$pid" -workload fg -clients "$CLIENTS" \
				-workers "$WORKERS" -body-size "$BODY" -duration "$DURATION" >"$OUT/$name-$round.txt"
		else
			"$OUT/jobgate-bench" beanstalk -addr "127.0.0.1:$port" -pid "$pid" -workload cycle -producers 4 \
				-consumers 4 -body-size "$BODY" -duration "$DURATION" >"$OUT/$name-$round.txt"
		fi
		echo "$round $name $(grep -E '^(summary|result)' "$OUT/$name-$round.txt" | cut -d' ' -f2-)" | tee -a "$OUT/results"
	done
done
echo "A=$A B=$B workload=$WORKLOAD rounds=$ROUNDS duration=$DURATION; load average $(cut -d' ' -f1-3 /proc/loadavg); raw runs in $OUT"
awk '
function median(list,   n, i, j, t, a) {
	n = split(list, a, " ")
	for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
	return n ? a[int((n + 1) / 2)] : 0
}
{
	for (i = 3; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "server_cpu_us") cpu[$1, $2] = kv[2] }
	rounds[$1] = 1
}
END {
	for (r in rounds) {
		for (m = 1; m <= 3; m++) { n = m == 1 ? "a_on" : m == 2 ? "b_on" : "b_off"; list[n] = list[n] " " cpu[r, n] }
		d = d " " cpu[r, "b_on"] - cpu[r, "a_on"]
	}
	printf "server µs/job, medians: A traced %.2f, B traced %.2f, B untraced %.2f; B - A per round: median %.2f (%s)\n",
		median(list["a_on"]), median(list["b_on"]), median(list["b_off"]), median(d), d
}' "$OUT/results"
