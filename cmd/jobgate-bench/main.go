// Command jobgate-bench is the load generator: it drives a Beanstalk or
// Gearman server (jobgate or a real beanstalkd/gearmand) with a workload and
// reports throughput and latency percentiles.
package main

import (
	"fmt"
	"io"
	"os"
)

const usage = `jobgate-bench drives a job server with a workload and reports throughput and latency.

Usage:
  jobgate-bench beanstalk [flags]   Beanstalk workloads (jobgate-bench beanstalk -h)
  jobgate-bench gearman [flags]     Gearman workloads (jobgate-bench gearman -h)
  jobgate-bench otlp-sink [-addr A] an OTLP/HTTP receiver that counts and discards spans (tracing benchmarks)
  jobgate-bench syscall             how long a system call that does no work takes here (syscall_ns=N)
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "beanstalk":
		return runBeanstalk(args[1:], stdout, stderr)
	case "gearman":
		return runGearman(args[1:], stdout, stderr)
	case "otlp-sink":
		return runOTLPSink(args[1:], stdout, stderr)
	case "syscall":
		return runSyscall(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "jobgate-bench: unknown protocol %q\n\n%s", args[0], usage)
	return 2
}
