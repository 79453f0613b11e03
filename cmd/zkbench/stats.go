package main

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"time"
)

// obj is a JSON object that keeps its fields in the order given, so zkbench's
// lines read like the peers' (Curator's LinkedHashMap, kazoo's dicts).
type obj []field

type field struct {
	k string
	v any
}

func (o obj) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(f.k)
		b.Write(k)
		b.WriteByte(':')
		v, err := json.Marshal(f.v)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// percentile is the nearest-rank percentile of sorted: the smallest value
// with at least p of all values at or below it (the peers' definition).
func percentile(sorted []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	i = min(max(i, 0), len(sorted)-1)
	return sorted[i]
}

// median is the nearest-rank p50 of d, which need not be sorted.
func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return percentile(s, .50)
}

func round(v float64, places int) float64 {
	f := math.Pow(10, float64(places))
	return math.Round(v*f) / f
}

// unit is how a latency object is written: the key suffix, the divisor and
// the decimals. The peers write µs with 1 decimal and ms with 3.
type unit struct {
	suffix string
	div    time.Duration
	places int
}

var (
	micros = unit{"_us", time.Microsecond, 1}
	millis = unit{"_ms", time.Millisecond, 3}
)

// summary is the peers' latency object {n, mean, p50, p90, p99, max}, with
// null values when there is no sample.
func summary(d []time.Duration, u unit) obj {
	k := func(name string) string { return name + u.suffix }
	if len(d) == 0 {
		return obj{{"n", 0}, {k("mean"), nil}, {k("p50"), nil}, {k("p90"), nil}, {k("p99"), nil}, {k("max"), nil}}
	}
	s := slices.Clone(d)
	slices.Sort(s)
	var sum float64
	for _, v := range s {
		sum += float64(v)
	}
	conv := func(v float64) float64 { return round(v/float64(u.div), u.places) }
	return obj{
		{"n", len(s)},
		{k("mean"), conv(sum / float64(len(s)))},
		{k("p50"), conv(float64(percentile(s, .50)))},
		{k("p90"), conv(float64(percentile(s, .90)))},
		{k("p99"), conv(float64(percentile(s, .99)))},
		{k("max"), conv(float64(s[len(s)-1]))},
	}
}
