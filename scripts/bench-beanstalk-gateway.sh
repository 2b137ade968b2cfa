#!/usr/bin/env bash
# Measures jobgate as a Beanstalk gateway: the same workloads against a
# real beanstalkd directly, through jobgate -beanstalk-upstream (which
# decodes every command and reply), and through haproxy in TCP mode (which
# copies bytes), in the same run. Fresh servers per workload; within a
# workload the three targets take turns, ROUNDS times, and the table gives
# each target's median rate, p50 and p99, and the CPU its proxy process
# (or beanstalkd, for direct) used per job. Servers are stopped by PID.
#
# Usage: scripts/bench-beanstalk-gateway.sh
# Environment (defaults in brackets):
#   ROUNDS [3]  DURATION [3s]  OUT [a temporary directory]
#   WORKLOADS ["put-1 put-16 reserve-delete cycle pipelined-put put-16k"]
#   HAPROXY [haproxy from PATH or /usr/sbin]
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-3s}
WORKLOADS=${WORKLOADS:-"put-1 put-16 reserve-delete cycle pipelined-put put-16k"}
HAPROXY=${HAPROXY:-$(command -v haproxy || echo /usr/sbin/haproxy)}
OUT=${OUT:-$(mktemp -d /tmp/bench-bgw.XXXXXX)}
mkdir -p "$OUT"
command -v beanstalkd >/dev/null || { echo "beanstalkd not found" >&2; exit 1; }
[ -x "$HAPROXY" ] || { echo "haproxy not found (set HAPROXY; apt-get install haproxy)" >&2; exit 1; }
go build -o "$OUT/jobgate" ./cmd/jobgate
go build -o "$OUT/jobgate-bench" ./cmd/jobgate-bench

. "$(dirname "$0")/bench-lib.sh"

BS_PID="" JG_PID="" HA_PID=""
stop_servers() {
	stop_pids $HA_PID $JG_PID $BS_PID
	BS_PID="" JG_PID="" HA_PID=""
}
trap stop_servers EXIT

# cpu_ticks prints a process's utime+stime in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
HZ=$(getconf CLK_TCK)

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "rounds=$ROUNDS duration=$DURATION; raw runs in $OUT"
: >"$OUT/results"
for wl in $WORKLOADS; do
	BS_PORT=$(free_port)
	beanstalkd -l 127.0.0.1 -p "$BS_PORT" >"$OUT/beanstalkd.log" 2>&1 &
	BS_PID=$!
	JG_PORT=$(free_port)
	"$OUT/jobgate" -gearman "" -admin "" -data "" -beanstalk "127.0.0.1:$JG_PORT" \
		-beanstalk-upstream "127.0.0.1:$BS_PORT" >"$OUT/jobgate.log" 2>&1 &
	JG_PID=$!
	HA_PORT=$(free_port)
	cat >"$OUT/haproxy.cfg" <<CFG
global
	maxconn 4096
defaults
	mode tcp
	timeout connect 5s
	timeout client 5m
	timeout server 5m
listen beanstalk
	bind 127.0.0.1:$HA_PORT
	server beanstalkd 127.0.0.1:$BS_PORT
CFG
	"$HAPROXY" -db -f "$OUT/haproxy.cfg" >"$OUT/haproxy.log" 2>&1 &
	HA_PID=$!
	wait_port "$BS_PORT"
	wait_port "$JG_PORT"
	wait_port "$HA_PORT"
	case $wl in
	put-1) args=(-workload put -conns 1) ;;
	put-16) args=(-workload put -conns 16) ;;
	put-16k) args=(-workload put -conns 4 -body-size 16384) ;;
	reserve-delete) args=(-workload reserve-delete -conns 4 -prefill 50000) ;;
	cycle) args=(-workload cycle -producers 4 -consumers 4) ;;
	pipelined-put) args=(-workload pipelined-put -conns 4) ;;
	*) echo "unknown workload $wl" >&2; exit 1 ;;
	esac
	for round in $(seq "$ROUNDS"); do
		for target in direct jobgate haproxy; do
			case $target in
			direct) port=$BS_PORT pid=$BS_PID ;;
			jobgate) port=$JG_PORT pid=$JG_PID ;;
			haproxy) port=$HA_PORT pid=$HA_PID ;;
			esac
			before=$(cpu_ticks "$pid")
			"$OUT/jobgate-bench" beanstalk -addr "127.0.0.1:$port" -duration "$DURATION" "${args[@]}" \
				>"$OUT/$wl-$target-$round.txt"
			after=$(cpu_ticks "$pid")
			# jobs=N elapsed=Xs rate=R jobs/s UNIT p50=Ams p99=Bms
			sed -n 's/^jobs=\([0-9]*\) .* rate=\([0-9]*\) jobs\/s .* p50=\([0-9.]*\)ms p99=\([0-9.]*\)ms$/\1 \2 \3 \4/p' \
				"$OUT/$wl-$target-$round.txt" | head -1 |
				awk -v wl="$wl" -v t="$target" -v r="$round" -v d=$((after - before)) -v hz="$HZ" \
					'{ printf "%s %s %s %s %s %s %.1f\n", wl, t, r, $2, $3, $4, d / hz * 1e6 / $1 }' >>"$OUT/results"
		done
	done
	stop_servers
done

# One line per workload and target: medians over the rounds.
echo
printf '%-15s %-8s %10s %9s %9s %12s %12s\n' workload target "jobs/s" "p50 ms" "p99 ms" "cpu us/job" "vs haproxy"
awk '
	function med(s,   n, a, i, j, t) {
		n = split(s, a, " ")
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	{ k = $1 " " $2; rate[k] = rate[k] " " $4; p50[k] = p50[k] " " $5; p99[k] = p99[k] " " $6; cpu[k] = cpu[k] " " $7
	  if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 } }
	END {
		for (i = 1; i <= n; i++) {
			wl = order[i]; ha = med(rate[wl " haproxy"])
			split("direct jobgate haproxy", ts, " ")
			for (j = 1; j <= 3; j++) {
				k = wl " " ts[j]
				printf "%-15s %-8s %10.0f %9.3f %9.3f %12.1f %11.2fx\n", wl, ts[j], med(rate[k]), med(p50[k]), med(p99[k]), med(cpu[k]), med(rate[k]) / ha
			}
		}
	}' "$OUT/results"
