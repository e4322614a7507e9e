package metrics

import (
	"maps"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Sample is one series of a metric as a registry gathered it: its labels and its
// value (a histogram's count of observations).
type Sample struct {
	Labels map[string]string
	Value  float64
	// Sum and Buckets are a histogram's: the sum of its observations and its
	// cumulative buckets, by upper bound.
	Sum     float64
	Buckets []Bucket
}

// Bucket is a histogram's cumulative bucket: the observations at most UpperBound.
type Bucket struct {
	UpperBound float64
	Count      float64
}

// Gather returns the series of the metric named name that g holds now, for tests and
// for the scale benchmark (which reads a scrape through Scraped).
func Gather(g prometheus.Gatherer, name string) ([]Sample, error) {
	families, err := g.Gather()
	if err != nil {
		return nil, err
	}
	var out []Sample
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			s := Sample{Labels: map[string]string{}}
			for _, l := range m.GetLabel() {
				s.Labels[l.GetName()] = l.GetValue()
			}
			switch {
			case m.Gauge != nil:
				s.Value = m.GetGauge().GetValue()
			case m.Counter != nil:
				s.Value = m.GetCounter().GetValue()
			case m.Histogram != nil:
				h := m.GetHistogram()
				s.Value, s.Sum = float64(h.GetSampleCount()), h.GetSampleSum()
				for _, b := range h.GetBucket() {
					s.Buckets = append(s.Buckets, Bucket{UpperBound: b.GetUpperBound(), Count: float64(b.GetCumulativeCount())})
				}
			}
			out = append(out, s)
		}
	}
	return out, nil
}

// Sum is the sum of the values of the samples whose labels include every one of want.
func Sum(samples []Sample, want map[string]string) float64 {
	var sum float64
next:
	for _, s := range samples {
		for k, v := range want {
			if s.Labels[k] != v {
				continue next
			}
		}
		sum += s.Value
	}
	return sum
}

// Scraped is a Gatherer of the families of a scrape of a metrics endpoint (the text
// format), parsed once as Prometheus parses it, so that a scrape is read with Gather and
// Sum as a registry is.
func Scraped(text string) (prometheus.Gatherer, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return nil, err
	}
	list := slices.Collect(maps.Values(families))
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) { return list, nil }), nil
}
