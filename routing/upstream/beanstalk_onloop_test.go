package upstream

// onLoop makes openBeanstalk open event-loop sessions (beanstalk_loop_linux_test.go).
var onLoop bool
