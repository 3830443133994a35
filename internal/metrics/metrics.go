// Package metrics defines Runnel's Prometheus metrics. docs/metrics.md is the reference: every
// name, type and label, and what each means.
//
// Two kinds of source:
//
//   - Counted as things happen: Kafka (requests, errors, connections, in-flight bytes, data in
//     and out per topic), which the Kafka listener calls on its hot path.
//   - Read at scrape time: NewStorage exports the partition logs' offsets, sizes and flush lag
//     and the group-commit flusher's histograms from the numbers the log store already keeps.
//
// Labels are bounded: an API name, an error name, a topic or partition that exists, a fixed
// reason. Never a client id or address.
//
// Each server owns its registry (NewRegistry), not the global one, so tests run several servers
// in one process.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// NewRegistry returns a registry holding the Go runtime and process collectors (go_*,
// process_*).
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}
