// Package cputime reads the CPU time the test process has used, for
// benchmarks that report CPU per operation alongside wall time.
package cputime
