package logstore

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Maintainer runs retention and compaction in the background for a set of logs, one log at a
// time, so compaction's I/O stays within its Compactor's budget for the whole broker.
type Maintainer struct {
	compactor          *Compactor
	retentionInterval  time.Duration // log.retention.check.interval.ms
	compactionInterval time.Duration // log.cleaner.backoff.ms
	logger             *slog.Logger

	mu   sync.Mutex
	logs map[*Log]struct{}
}

// NewMaintainer returns a maintainer; Run starts it.
func NewMaintainer(c *Compactor, retentionInterval, compactionInterval time.Duration, logger *slog.Logger) *Maintainer {
	if logger == nil {
		logger = slog.Default()
	}
	return &Maintainer{compactor: c, retentionInterval: retentionInterval, compactionInterval: compactionInterval,
		logger: logger, logs: map[*Log]struct{}{}}
}

// Add puts a log under maintenance; Remove takes it out (before the log is closed).
func (m *Maintainer) Add(l *Log) {
	m.mu.Lock()
	m.logs[l] = struct{}{}
	m.mu.Unlock()
}

// Remove takes a log out of maintenance.
func (m *Maintainer) Remove(l *Log) {
	m.mu.Lock()
	delete(m.logs, l)
	m.mu.Unlock()
}

func (m *Maintainer) snapshot() []*Log {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*Log, 0, len(m.logs))
	for l := range m.logs {
		out = append(out, l)
	}
	return out
}

// Run maintains the logs until ctx ends.
func (m *Maintainer) Run(ctx context.Context) {
	retention := time.NewTicker(m.retentionInterval)
	defer retention.Stop()
	compaction := time.NewTicker(m.compactionInterval)
	defer compaction.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-retention.C:
			for _, l := range m.snapshot() {
				if n, err := l.EnforceRetention(); err != nil {
					m.logger.Error("logstore: retention failed", "dir", l.dir, "err", err)
				} else if n > 0 {
					m.logger.Info("logstore: retention removed segments", "dir", l.dir, "segments", n, "log_start_offset", l.StartOffset())
				}
				if n := l.ExpireProducers(time.Now().UnixMilli()); n > 0 {
					m.logger.Info("logstore: expired idempotent producers", "dir", l.dir, "producers", n)
				}
			}
		case <-compaction.C:
			for _, l := range m.snapshot() {
				st, err := m.compactor.Compact(ctx, l)
				if err != nil && ctx.Err() == nil {
					m.logger.Error("logstore: compaction failed", "dir", l.dir, "err", err)
				} else if st.SegmentsIn > 0 {
					m.logger.Info("logstore: compacted", "dir", l.dir, "segments_in", st.SegmentsIn, "segments_out", st.SegmentsOut,
						"bytes_read", st.BytesRead, "bytes_written", st.BytesWritten, "records_removed", st.RecordsRemoved)
				}
			}
		}
	}
}
