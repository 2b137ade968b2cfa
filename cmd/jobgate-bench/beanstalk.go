package main

import (
	"fmt"
	"io"
)

func runBeanstalk(args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "jobgate-bench: beanstalk workloads are not built yet")
	return 2
}
