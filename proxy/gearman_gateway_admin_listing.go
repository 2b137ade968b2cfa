package proxy

import (
	"strconv"
	"strings"
)

// listingColumns is how many counts end each line of the merged listing
// cmd, as gearmand prints them: "status" FUNCTION TOTAL RUNNING
// AVAILABLE_WORKERS, "prioritystatus" FUNCTION HIGH NORMAL LOW
// AVAILABLE_WORKERS, tab-separated. The last count is the workers.
func listingColumns(cmd string) int {
	if cmd == "prioritystatus" {
		return 4
	}
	return 3
}

// splitCounts parses the n counts that end line l into counts (len n),
// from the right: a function name may hold any byte but NUL, tabs
// included, and gearmand prints it as it is. ok is false when l does not
// end in n tab-separated decimal counts after a name.
func splitCounts(l string, counts []uint64) (name string, ok bool) {
	rest := l
	for i := len(counts) - 1; i >= 0; i-- {
		t := strings.LastIndexByte(rest, '\t')
		if t < 0 {
			return "", false
		}
		v, err := strconv.ParseUint(rest[t+1:], 10, 64)
		if err != nil {
			return "", false
		}
		counts[i] = v
		rest = rest[:t]
	}
	return rest, true
}

// sumListing merges the listings of parts, whose lines are a function
// name and n counts: the counts of one name (byte-exact) are summed
// column by column, and names keep the order they first appear in. extra
// is subtracted from the summed worker column (the last) of its function:
// registrations of one gateway worker on several backends
// (gwOwnSessions.extraRegistrations). The result is never below any single
// backend's count, which a backend that lagged behind the gateway's view
// could otherwise cause. A line that does not parse is kept as it is, in
// its place, and merges with nothing.
func sumListing(dst []byte, parts [][]string, n int, extra map[string]uint64) []byte {
	type row struct {
		name   string
		raw    bool // name is an unparsed line
		counts []uint64
		most   uint64 // the largest worker count of one backend
	}
	var rows []*row
	byName := map[string]*row{}
	counts := make([]uint64, n)
	for _, p := range parts {
		for _, l := range p {
			name, ok := splitCounts(l, counts)
			if !ok {
				rows = append(rows, &row{name: l, raw: true})
				continue
			}
			rw := byName[name]
			if rw == nil {
				rw = &row{name: name, counts: make([]uint64, n)}
				byName[name] = rw
				rows = append(rows, rw)
			}
			for i, v := range counts {
				rw.counts[i] += v
			}
			rw.most = max(rw.most, counts[n-1])
		}
	}
	for _, rw := range rows {
		dst = append(dst, rw.name...)
		if !rw.raw {
			w := &rw.counts[n-1]
			if x := extra[rw.name]; x > 0 {
				*w = max(*w-min(x, *w), rw.most)
			}
			for _, c := range rw.counts {
				dst = strconv.AppendUint(append(dst, '\t'), c, 10)
			}
		}
		dst = append(dst, '\n')
	}
	return dst
}
