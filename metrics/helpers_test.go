package metrics

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape serves /metrics from m and returns every jobgate_ sample, keyed
// `name{label="value",...}` with labels sorted, histograms expanded into
// _bucket/_sum/_count as in the text format.
func scrape(t *testing.T, m *Metrics) map[string]float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("scrape: %d %s", rec.Code, rec.Body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("parse exposition: %v", err)
	}
	out := make(map[string]float64)
	for name, f := range fams {
		if !strings.HasPrefix(name, "jobgate_") {
			continue
		}
		for _, mt := range f.GetMetric() {
			labels := labelPairs(mt.GetLabel())
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out[key(name, labels)] = mt.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[key(name, labels)] = mt.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				h := mt.GetHistogram()
				for _, b := range h.GetBucket() {
					out[key(name+"_bucket", append(labels, "le="+fmtFloat(b.GetUpperBound())))] = float64(b.GetCumulativeCount())
				}
				out[key(name+"_bucket", append(labels, "le=+Inf"))] = float64(h.GetSampleCount())
				out[key(name+"_sum", labels)] = h.GetSampleSum()
				out[key(name+"_count", labels)] = float64(h.GetSampleCount())
			default:
				t.Fatalf("%s: unexpected type %v", name, f.GetType())
			}
		}
	}
	return out
}

func labelPairs(ls []*dto.LabelPair) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.GetName()+"="+l.GetValue())
	}
	return out
}

// key spells a series as name{a="x",b="y"} with the labels sorted.
func key(name string, labels []string) string {
	if len(labels) == 0 {
		return name
	}
	ls := append([]string(nil), labels...)
	sort.Strings(ls)
	for i, l := range ls {
		k, v, _ := strings.Cut(l, "=")
		ls[i] = fmt.Sprintf("%s=%q", k, v)
	}
	return name + "{" + strings.Join(ls, ",") + "}"
}

func fmtFloat(f float64) string { return fmt.Sprint(f) }

// hist adds the expected samples of a histogram with the given buckets and
// observations to want.
func hist(want map[string]float64, name string, labels []string, buckets []float64, obs ...float64) {
	sum := 0.0
	for _, o := range obs {
		sum += o
	}
	for _, b := range buckets {
		n := 0
		for _, o := range obs {
			if o <= b {
				n++
			}
		}
		want[key(name+"_bucket", append(labels, "le="+fmtFloat(b)))] = float64(n)
	}
	want[key(name+"_bucket", append(labels, "le=+Inf"))] = float64(len(obs))
	want[key(name+"_sum", labels)] = sum
	want[key(name+"_count", labels)] = float64(len(obs))
}

// diff reports every sample that differs between got and want.
func diff(t *testing.T, got, want map[string]float64) {
	t.Helper()
	var keys []string
	for k := range want {
		keys = append(keys, k)
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		g, gok := got[k]
		w, wok := want[k]
		switch {
		case !gok:
			t.Errorf("missing %s (want %v)", k, w)
		case !wok:
			t.Errorf("unexpected %s %v", k, g)
		case g != w:
			t.Errorf("%s = %v, want %v", k, g, w)
		}
	}
}
