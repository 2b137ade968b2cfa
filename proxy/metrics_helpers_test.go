package proxy_test

import (
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/jobgate/jobgate/metrics"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrapeMetrics serves /metrics from m through its real handler and
// returns every jobgate_ sample keyed `name{k="v",...}` with labels sorted;
// a histogram gives name_count and name_sum.
func scrapeMetrics(t *testing.T, m *metrics.Metrics) map[string]float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("scrape: %d %s", rec.Code, rec.Body)
	}
	tp := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := tp.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("parse exposition: %v", err)
	}
	out := make(map[string]float64)
	for name, f := range fams {
		if !strings.HasPrefix(name, "jobgate_") {
			continue
		}
		for _, mt := range f.GetMetric() {
			var ls []string
			for _, l := range mt.GetLabel() {
				ls = append(ls, l.GetName()+"="+strconv.Quote(l.GetValue()))
			}
			sort.Strings(ls)
			k := func(n string) string { return n + "{" + strings.Join(ls, ",") + "}" }
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out[k(name)] = mt.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[k(name)] = mt.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[k(name+"_count")] = float64(mt.GetHistogram().GetSampleCount())
				out[k(name+"_sum")] = mt.GetHistogram().GetSampleSum()
			}
		}
	}
	return out
}

// checkSamples fails for every sample of want that the scrape lacks or has
// with another value.
func checkSamples(t *testing.T, got, want map[string]float64) {
	t.Helper()
	for k, v := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("missing %s (want %v)", k, v)
		} else if g != v {
			t.Errorf("%s = %v, want %v", k, g, v)
		}
	}
	if t.Failed() {
		var all []string
		for k, v := range got {
			all = append(all, k+" "+strconv.FormatFloat(v, 'g', -1, 64))
		}
		sort.Strings(all)
		t.Logf("scraped:\n%s", strings.Join(all, "\n"))
	}
}
