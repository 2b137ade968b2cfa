package proxy

// Transcripts of testdata/gearman/04_diff_findings.txt that describe
// behaviour the gateway does not pass through.
func init() {
	// The gateway sends a worker one NOOP per PRE_SLEEP, whichever backend
	// sends it first (gearman_gateway.go), so it does not pass on a
	// backend's second one.
	const oneNoop = "the gateway forwards one NOOP per PRE_SLEEP"
	gatewaySkipGearmand["PRE_SLEEP answered with NOOP at once leaves a sleeping worker asleep"] = oneNoop
	gatewaySkipLocal["PRE_SLEEP answered with NOOP at once leaves a sleeping worker asleep"] = oneNoop
}
