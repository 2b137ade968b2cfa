#!/usr/bin/env bash
# Compares two or more jobgate builds as Gearman servers, with one load
# generator: each round starts each build afresh (the order flips every
# round) and runs every workload against it, and the table shows the
# median of the rounds and each build's server CPU per operation in every
# round. Use it when the builds differ by less than bench-gearman.sh's
# comparison with gearmand can resolve on a shared machine.
#
# Usage: scripts/bench-gearman-ab.sh BUILD BUILD... (jobgate binaries,
#   named in the table by file name)
# Environment (defaults in brackets):
#   ROUNDS [3]  DURATION [3s]  BODY [100]
#   WORKLOADS ["fg:16 echo:16 bg:16 fg:1 echo:1"]: workload:clients; fg
#     runs 4 workers, or 1 with 1 client
#   ARGS ["-data= -admin="]: jobgate flags (default: in memory, no admin
#     port, so the builds need not know other flags)
#   OUT [a temporary directory]
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: $0 BUILD BUILD..." >&2; exit 2; }

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-3s}
BODY=${BODY:-100}
WORKLOADS=${WORKLOADS:-"fg:16 echo:16 bg:16 fg:1 echo:1"}
ARGS=${ARGS-"-data= -admin="}
OUT=${OUT:-$(mktemp -d /tmp/bench-gearman-ab.XXXXXX)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

builds=()
for b in "$@"; do
	[ -x "$b" ] || { echo "$b: not an executable" >&2; exit 1; }
	builds+=("$(cd "$(dirname "$b")" && pwd)/$(basename "$b")")
done
go build -o "$OUT/jobgate-bench" ./cmd/jobgate-bench

. "$(dirname "$0")/bench-lib.sh"

PID=""
trap 'stop_pids $PID' EXIT

: >"$OUT/results"
for round in $(seq "$ROUNDS"); do
	order=("${builds[@]}")
	if [ $((round % 2)) -eq 0 ]; then
		order=()
		for ((i = ${#builds[@]} - 1; i >= 0; i--)); do order+=("${builds[i]}"); done
	fi
	for b in "${order[@]}"; do
		name=$(basename "$b")
		# A free port can still be taken before jobgate binds it (as the
		# local port of someone's outgoing connection): try another.
		for try in 1 2 3 4 5; do
			port=$(free_port)
			rm -rf "$OUT/run"
			mkdir "$OUT/run"
			# shellcheck disable=SC2086 # ARGS is a list of flags
			(cd "$OUT/run" && exec "$b" $ARGS -beanstalk "" -gearman "127.0.0.1:$port") >"$OUT/$name.log" 2>&1 &
			PID=$!
			if wait_port "$port"; then break; fi
			stop_pids "$PID"
			PID=""
			[ "$try" -lt 5 ] || exit 1
		done
		for w in $WORKLOADS; do
			wl=${w%%:*} c=${w##*:}
			args=(-workload "$wl" -clients "$c" -body-size "$BODY" -duration "$DURATION")
			if [ "$wl" = fg ]; then
				if [ "$c" = 1 ]; then args+=(-workers 1); else args+=(-workers 4); fi
			fi
			"$OUT/jobgate-bench" gearman -addr "127.0.0.1:$port" -pid "$PID" "${args[@]}" >"$OUT/$name-$wl-c$c-$round.txt"
			echo "$name $wl-c$c $round $(grep '^summary' "$OUT/$name-$wl-c$c-$round.txt")" >>"$OUT/results"
		done
		stop_pids "$PID"
		PID=""
	done
done

echo "machine: $(machine_desc); load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "rounds=$ROUNDS duration=$DURATION body=$BODY args=$ARGS; medians of the rounds; raw runs in $OUT"
awk '
function median(list,   n, i, j, t, a) {
	n = split(list, a, " ")
	for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
	return n ? a[int((n + 1) / 2)] : 0
}
{
	b = $1; wl = $2
	if (!(wl in seen)) { seen[wl] = 1; order[++nw] = wl }
	if (!(b in seenb)) { seenb[b] = 1; border[++nb] = b }
	for (i = 5; i <= NF; i++) {
		split($i, kv, "=")
		vals[b, wl, kv[1]] = vals[b, wl, kv[1]] " " kv[2]
	}
}
END {
	printf "%-9s %-14s %9s %7s %7s %10s %10s  %s\n", "workload", "build", "ops/s", "p50 us", "p99 us", "server us", "gen us", "server us/op per round"
	for (w = 1; w <= nw; w++) for (k = 1; k <= nb; k++) {
		wl = order[w]; b = border[k]
		printf "%-9s %-14s %9.0f %7.0f %7.0f %10.1f %10.1f %s\n", wl, b, median(vals[b, wl, "ops_per_s"]),
			median(vals[b, wl, "p50_us"]), median(vals[b, wl, "p99_us"]),
			median(vals[b, wl, "server_cpu_us"]), median(vals[b, wl, "gen_cpu_us"]), vals[b, wl, "server_cpu_us"]
	}
}' "$OUT/results"
