package main

import (
	"fmt"
	"io"
)

func runGearman(args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "jobgate-bench: gearman workloads are not built yet")
	return 2
}
