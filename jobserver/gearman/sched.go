package gearman

import "time"

// schedTime returns the unix ns time of the next minute matching a
// SUBMIT_JOB_SCHED schedule (minute 0-59, hour 0-23, day of month 1-31,
// month 1-12, day of week 0-6 with 0 = Monday), in the clock's time zone.
// An empty field or "*" matches any value. The current minute counts when
// it matches, so such a job runs at once. ok is false for a malformed field
// or a schedule that matches no date in the next five years.
func (e *Engine) schedTime(minute, hour, dom, month, dow []byte) (at int64, ok bool) {
	var f [5]int
	limits := [5][2]int{{0, 59}, {0, 23}, {1, 31}, {1, 12}, {0, 6}}
	for i, b := range [5][]byte{minute, hour, dom, month, dow} {
		if len(b) == 0 || (len(b) == 1 && b[0] == '*') {
			f[i] = -1
			continue
		}
		n := 0
		for _, c := range b {
			if c < '0' || c > '9' || n > 100 {
				return 0, false
			}
			n = n*10 + int(c-'0')
		}
		if n < limits[i][0] || n > limits[i][1] {
			return 0, false
		}
		f[i] = n
	}
	match := func(want, got int) bool { return want < 0 || want == got }
	now := e.clk.Now()
	start := now.Truncate(time.Minute)
	day := time.Date(start.Year(), start.Month(), start.Day(), 0, 0, 0, 0, start.Location())
	for d := 0; d < 5*366; d++ {
		t := day.AddDate(0, 0, d)
		monday0 := (int(t.Weekday()) + 6) % 7
		if !match(f[2], t.Day()) || !match(f[3], int(t.Month())) || !match(f[4], monday0) {
			continue
		}
		for h := 0; h < 24; h++ {
			if !match(f[1], h) {
				continue
			}
			for m := 0; m < 60; m++ {
				if !match(f[0], m) {
					continue
				}
				c := time.Date(t.Year(), t.Month(), t.Day(), h, m, 0, 0, t.Location())
				if c.Before(start) {
					continue
				}
				if c.Equal(start) {
					return 0, true // this minute: run now
				}
				return c.UnixNano(), true
			}
		}
	}
	return 0, false
}
