// Package examples holds small, runnable client and worker programs for both
// of jobgate's protocols, and the tests that run each of them against a real
// jobgate (and the Gearman ones against libgearman's gearman command line).
// See README.md for what each program shows and how to run it.
//
//   - beanstalk/producer, beanstalk/worker: a Beanstalk producer and worker
//     on github.com/beanstalkd/go-beanstalk (code in beanstalk/bsexample).
//   - gearman/client, gearman/worker: a Gearman client and worker written
//     on jobgate's codec/gearman (code in gearman/gmexample).
//   - config/: configuration files that config.Load accepts.
package examples
