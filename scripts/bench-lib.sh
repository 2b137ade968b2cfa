# Shell helpers shared by the bench-*.sh scripts (sourced, not run).

# free_port prints a loopback TCP port nothing listens on.
free_port() {
	local p
	while :; do
		p=$((20000 + RANDOM % 40000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return
		fi
	done
}

# wait_port waits until something accepts on the port.
wait_port() {
	for _ in $(seq 200); do # 10 s: a loaded machine starts servers slowly
		if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then
			return 0
		fi
		sleep 0.05
	done
	echo "nothing listens on port $1" >&2
	return 1
}

# stop_pids ends each process whose PID is given (the servers a script
# started) and waits for it; empty or gone PIDs are skipped.
stop_pids() {
	for pid in "$@"; do
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
}
