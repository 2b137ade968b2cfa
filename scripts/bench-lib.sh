# Shell helpers shared by the bench-*.sh scripts (sourced, not run).

# free_port prints a loopback TCP port nothing listens on, below the
# kernel's ephemeral range: a port in it may be the local end of some
# connection (the generator's, or one in TIME_WAIT), which nothing
# listens on but a server cannot bind.
free_port() {
	local p low
	low=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
	[ "$low" -gt 11000 ] || low=32768
	while :; do
		p=$((10000 + RANDOM % (low - 10000)))
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

# machine_desc describes the host for a script's "machine:" line: the CPU
# model and count, and what a system call that does no work costs here
# ("jobgate-bench syscall", built into $OUT first). The servers make a few
# calls per job, so that cost moves their ratios: sittings compare only on
# like hosts.
machine_desc() {
	echo "$(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs, a system call $("$OUT/jobgate-bench" syscall | sed 's/^syscall_ns=//') ns"
}
