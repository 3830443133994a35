package objects

import (
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/objtopic"
)

// Compaction of object topics (cleanup.policy=compact; docs/object-topics.md §5.1) keeps the
// latest record of every key at its original offset, as Kafka's log cleaner and the local log
// store's compaction (internal/logstore/compact.go) do, with extents in place of segments:
//
//   - The newest MergeKeepNewest extents of a partition are its active part (consumers read
//     them, often from the writer's cache) and are not cleaned unless max.compaction.lag.ms
//     says so; min.compaction.lag.ms leaves out the extents from the first younger one on
//     (compactable). The others are clean (written by compaction: Extent.Clean) or dirty.
//   - A pass is due when the dirty extents hold more than min.cleanable.dirty.ratio of the
//     cleanable bytes (Kafka's cleanableRatio > minCleanableRatio), when a dirty one is past max.compaction.lag.ms, or when a clean extent
//     holds a tombstone whose delete horizon passed.
//   - Map: read the dirty extents, oldest first, and map md5(key) to the key's last offset. The
//     map is bounded (CompactMaxKeys); when it fills, the pass stops at an extent boundary and
//     the rest stays dirty for the next pass.
//   - Rewrite every extent up to the last one mapped, in runs of up to MergeTarget bytes, each
//     as one object of batches that carry their base offsets (Extent.Absolute): a record
//     survives if no later offset of its key is mapped; records without a key are dropped, as
//     Kafka drops them; a batch keeps its base offset and last offset delta, and a batch left
//     with no record is dropped (an idempotent producer's state is in the controller's image,
//     not in the log, so no empty batch has to stay). The controller puts each object in its
//     run's place (replace-extents), or drops the run if nothing is left of it; a run that
//     changed since it was read (retention, a merge) is refused and its object is garbage.
//   - Tombstones (null values) are kept until delete.retention.ms after the pass that first
//     kept them: that pass gives their batch a delete horizon (KIP-534: the base timestamp
//     becomes the horizon), and the first pass after the horizon drops them. The clock is the
//     controller's, not the producers'.
//   - Transactions (docs/object-topics.md §10): only what lies below the last stable offset is
//     cleanable; records of aborted transactions are dropped and supersede nothing. A COMMIT or
//     ABORT marker whose transaction has no record left goes the tombstones' way (Kafka's
//     rule): a delete horizon at the first pass that sees it so, dropped at the first pass
//     after; a dropped ABORT's entry leaves the aborted-transaction index with it.

// CompactStats counts what a compaction round did.
type CompactStats struct {
	Partitions     int   // partitions compacted
	ExtentsIn      int   // extents rewritten
	ExtentsOut     int   // objects written in their place
	RecordsRemoved int64 // superseded records, expired tombstones and records without a key
	BytesRead      int64
	BytesWritten   int64
	// elsewhere: the part of the counts other nodes did (their metrics count it).
	elsewhere struct{ removed, read, written int64 }
}

// Local returns the records removed, bytes read and bytes written by this node.
func (st CompactStats) Local() (removed, read, written int64) {
	return st.RecordsRemoved - st.elsewhere.removed, st.BytesRead - st.elsewhere.read, st.BytesWritten - st.elsewhere.written
}

// Compact runs a compaction pass on every object partition of a compacted topic that is due.
func (m *Maintainer) Compact(ctx context.Context, now time.Time) (CompactStats, error) {
	img := m.cfg.Image()
	var st CompactStats
	for _, name := range img.TopicNames() {
		t := img.Topics[name]
		if !t.IsObject() || !strings.Contains(m.cfg.Config(name, "cleanup.policy"), "compact") {
			continue
		}
		ratio, err := strconv.ParseFloat(m.cfg.Config(name, "min.cleanable.dirty.ratio"), 64)
		if err != nil || ratio < 0 {
			ratio = 0.5
		}
		retention, err := strconv.ParseInt(m.cfg.Config(name, "delete.retention.ms"), 10, 64)
		if err != nil || retention < 0 {
			retention = 86400000
		}
		minLag, err := strconv.ParseInt(m.cfg.Config(name, "min.compaction.lag.ms"), 10, 64)
		if err != nil || minLag < 0 {
			minLag = 0
		}
		maxLag, err := strconv.ParseInt(m.cfg.Config(name, "max.compaction.lag.ms"), 10, 64)
		if err != nil || maxLag < 1 {
			maxLag = math.MaxInt64
		}
		for i, p := range t.Objects {
			exts := compactable(p, now.UnixMilli(), m.cfg.MergeKeepNewest, ratio, minLag, maxLag)
			if exts == nil {
				continue
			}
			job := CompactJob{Ref: controller.PartitionRef{Topic: t.ID, Partition: int32(i)}, Start: p.Start, Aborted: p.Aborted,
				Extents: exts, NowMs: now.UnixMilli(), Retention: retention}
			if err := m.compactPartition(ctx, job, &st); err != nil {
				return st, fmt.Errorf("compacting %s[%d]: %w", name, i, err)
			}
			st.Partitions++
		}
	}
	return st, nil
}

// compactable returns the extents of p a compaction pass may rewrite, or nil if no pass is due.
// They are all but the newest keepNewest, plus the newest whose records are all older than
// maxLag (max.compaction.lag.ms; math.MaxInt64: none), up to the first one with a record newer
// than minLag (min.compaction.lag.ms). A pass is due when the dirty ones hold more than ratio of
// their bytes, when a dirty one's records are all older than maxLag, or when a clean one holds a
// tombstone whose delete horizon has passed. An extent's newest timestamp stands for all its
// records (its oldest is not kept).
func compactable(p *objtopic.Partition, nowMs int64, keepNewest int, ratio float64, minLag, maxLag int64) []objtopic.Extent {
	exts := p.Extents
	n := max(0, len(exts)-keepNewest)
	overdue := func(e objtopic.Extent) bool { return maxLag < math.MaxInt64 && e.AgeMs() < nowMs-maxLag }
	for n < len(exts) && overdue(exts[n]) {
		n++
	}
	if minLag > 0 {
		for i, e := range exts[:n] {
			if e.AgeMs() > nowMs-minLag {
				n = i
				break
			}
		}
	}
	// Only decided transactions are cleaned: nothing at or past the last stable offset, as
	// Kafka's cleaner stops at the first unstable offset.
	if lso := p.LastStable(); lso < p.Next {
		n = min(n, sort.Search(len(exts), func(i int) bool { return exts[i].Last >= lso }))
	}
	exts = exts[:n]
	var clean, dirty int64
	due := false
	for _, e := range exts {
		if e.Clean {
			clean += int64(e.Length)
			due = due || e.Horizon > 0 && e.Horizon <= nowMs
		} else {
			dirty += int64(e.Length)
			due = due || overdue(e)
		}
	}
	if dirty > 0 && float64(dirty) > ratio*float64(clean+dirty) { // strictly above, as Kafka: a ratio of 1 compacts only by max.compaction.lag.ms
		due = true
	}
	if !due {
		return nil
	}
	return exts
}

// abortedRanges indexes a partition's aborted transactions by producer for a compaction pass:
// a producer's transactions follow one another, so each list ascends in First and in Last.
type abortedRanges map[int64][]objtopic.AbortedTxn

func abortedOf(list []objtopic.AbortedTxn) abortedRanges {
	out := abortedRanges{}
	for _, a := range list {
		out[a.ProducerID] = append(out[a.ProducerID], a)
	}
	return out
}

// holds reports whether b (of header h, at offset base) is a batch of an aborted transaction:
// below the last stable offset a transactional batch is either that or committed.
func (ab abortedRanges) holds(h *batch.Header, base int64) bool {
	if !h.IsTransactional() || h.IsControl() {
		return false
	}
	list := ab[h.ProducerID]
	i := sort.Search(len(list), func(i int) bool { return list[i].Last >= base }) // the first that ends at or after it
	return i < len(list) && list[i].First <= base
}

// CompactJob is one compaction pass over a partition, as the active controller plans it: the
// partition's log start and aborted transactions, the extents the pass may rewrite, the time
// and the topic's delete.retention.ms.
type CompactJob struct {
	Ref       controller.PartitionRef `json:"ref"`
	Start     int64                   `json:"start"`
	Aborted   []objtopic.AbortedTxn   `json:"aborted,omitempty"`
	Extents   []objtopic.Extent       `json:"extents"`
	NowMs     int64                   `json:"now_ms"`
	Retention int64                   `json:"retention"`
}

// compactPartition runs a pass on another node if a CompactWorker takes it (else, or if that
// node fails, here), and adds what it did to st.
func (m *Maintainer) compactPartition(ctx context.Context, job CompactJob, st *CompactStats) error {
	if m.cfg.CompactWorker != nil {
		got, err := m.cfg.CompactWorker(ctx, job)
		if err == nil {
			st.add(got)
			st.elsewhere.removed += got.RecordsRemoved
			st.elsewhere.read += got.BytesRead
			st.elsewhere.written += got.BytesWritten
			m.cfg.Metrics.CompactedBy("delegated")
			return nil
		}
		if !errors.Is(err, ErrNoWorker) {
			m.cfg.Logger.Warn("objects: the node asked to compact a partition failed; compacting here", "topic", job.Ref.Topic, "partition", job.Ref.Partition, "err", err)
			// What it replaced before failing stays replaced; a run planned here on the
			// extents it changed is refused as stale, and the next pass takes the rest.
			err := m.CompactRun(ctx, job, st)
			if err == nil {
				m.cfg.Metrics.CompactedBy("delegation_failed")
			}
			return err
		}
	}
	if err := m.CompactRun(ctx, job, st); err != nil {
		return err
	}
	m.cfg.Metrics.CompactedBy("local")
	return nil
}

func (st *CompactStats) add(o CompactStats) {
	st.ExtentsIn += o.ExtentsIn
	st.ExtentsOut += o.ExtentsOut
	st.RecordsRemoved += o.RecordsRemoved
	st.BytesRead += o.BytesRead
	st.BytesWritten += o.BytesWritten
}

// CompactRun runs a compaction pass over a partition: it maps the keys of the dirty extents of
// job.Extents and rewrites them up to the last one mapped, each run of them replaced through
// the controller (which refuses a run no longer there). Records of aborted transactions are
// never values: they are neither mapped nor kept. The active controller runs it, or asks
// another node to (docs/object-topics.md §5.1).
func (m *Maintainer) CompactRun(ctx context.Context, job CompactJob, st *CompactStats) error {
	ref, exts, nowMs, retention := job.Ref, job.Extents, job.NowMs, job.Retention
	start, aborted := job.Start, abortedOf(job.Aborted)
	keys := map[[md5.Size]byte]int64{}
	end := 0 // exts[:end] are rewritten
	for i, e := range exts {
		if e.Clean {
			end = i + 1
			continue
		}
		if len(keys) >= m.cfg.CompactMaxKeys {
			break
		}
		data, err := m.readSection(ctx, e)
		if err != nil {
			return err
		}
		st.BytesRead += int64(len(data))
		err = objtopic.EachBatch(e, data, func(b []byte, h batch.Header, base int64) error {
			if h.IsControl() || aborted.holds(&h, base) {
				return nil
			}
			return batch.EachRecord(&h, b, func(r *batch.Record) {
				if r.Key != nil {
					keys[md5.Sum(r.Key)] = base + int64(r.OffsetDelta)
				}
			})
		})
		if err != nil {
			return err
		}
		end = i + 1
	}
	exts = exts[:end]
	txns := &txnScan{aborted: aborted, live: map[int64]bool{}}
	for len(exts) > 0 {
		n, size := 0, int64(0)
		for n < len(exts) && (n == 0 || size+int64(exts[n].Length) <= m.cfg.MergeTarget) {
			size += int64(exts[n].Length)
			n++
		}
		if err := m.cleanRun(ctx, ref, start, exts[:n], keys, txns, nowMs, retention, st); err != nil {
			return err
		}
		exts = exts[n:]
	}
	return nil
}

// cleanRun rewrites a run of extents keeping what keys does not supersede, and has the
// controller put the result in the run's place. A run of one clean extent that loses nothing
// is left as it is.
func (m *Maintainer) cleanRun(ctx context.Context, ref controller.PartitionRef, start int64, run []objtopic.Extent,
	keys map[[md5.Size]byte]int64, txns *txnScan, nowMs, retention int64, st *CompactStats) error {
	changed := len(run) > 1 || !run[0].Clean
	for _, e := range run {
		st.BytesRead += int64(e.Length)
	}
	horizon := int64(0) // the earliest delete horizon of a kept tombstone or marker
	var droppedAborts []int64
	batches, err := m.collectRun(ctx, run, func(b []byte, h *batch.Header) ([]byte, error) {
		if h.IsControl() {
			keep, setHorizon := txns.marker(h, nowMs)
			switch {
			case !keep:
				changed = true
				if c, err := batch.ParseControl(h, b); err == nil && c.Type == batch.ControlAbort {
					droppedAborts = append(droppedAborts, h.BaseOffset)
				}
				return nil, nil
			case !setHorizon:
				if hz, ok := h.DeleteHorizon(); ok && (horizon == 0 || hz < horizon) {
					horizon = hz
				}
				return b, nil
			}
			out, _, err := batch.Filter(h, b, func(*batch.Record, int64) bool { return true }, false, nowMs+retention)
			if err != nil {
				return nil, err
			}
			changed = true
			if horizon == 0 || nowMs+retention < horizon {
				horizon = nowMs + retention
			}
			return out, nil
		}
		if txns.aborted.holds(h, h.BaseOffset) {
			st.RecordsRemoved += int64(h.RecordCount)
			changed = true
			return nil, nil
		}
		hz, hasHorizon := h.DeleteHorizon()
		tombstones := false
		out, removed, err := batch.Filter(h, b, func(r *batch.Record, offset int64) bool {
			if offset < start || r.Key == nil {
				return false
			}
			if last, ok := keys[md5.Sum(r.Key)]; ok && last > offset {
				return false
			}
			if r.Value == nil {
				if hasHorizon && hz <= nowMs {
					return false
				}
				tombstones = true
			}
			return true
		}, false, nowMs+retention)
		if err != nil {
			return nil, err
		}
		st.RecordsRemoved += int64(removed)
		if out == nil || &out[0] != &b[0] {
			changed = true
		}
		if out != nil && h.IsTransactional() {
			txns.live[h.ProducerID] = true // its transaction keeps a record: its marker stays
		}
		if out != nil && tombstones {
			oh, _ := batch.ParseHeader(out)
			if hz, ok := oh.DeleteHorizon(); ok && (horizon == 0 || hz < horizon) {
				horizon = hz
			}
		}
		return out, nil
	})
	if err != nil || !changed {
		return err
	}
	merged, err := m.writeRun(ctx, ref, run, batches)
	if err != nil {
		return err
	}
	if merged != nil {
		merged.Clean, merged.Horizon = true, horizon
		st.BytesWritten += int64(merged.Length)
		st.ExtentsOut++
	}
	st.ExtentsIn += len(run)
	return m.replaceRun(ctx, ref, run, merged, droppedAborts)
}

// txnScan follows a compaction pass's walk, in offset order from the log start, through the
// transactions of the cleanable extents: which producers kept a transactional record since
// their last marker. Every record of a transaction precedes its marker, so at the marker the
// walk knows whether any is left.
type txnScan struct {
	aborted abortedRanges
	live    map[int64]bool
}

// marker decides a COMMIT or ABORT marker's fate, as Kafka's cleaner does: kept as it is while
// its transaction keeps a record; else kept with a delete horizon set now (setHorizon) if it has
// none, and dropped by the first pass after its horizon.
func (s *txnScan) marker(h *batch.Header, nowMs int64) (keep, setHorizon bool) {
	live := s.live[h.ProducerID]
	delete(s.live, h.ProducerID)
	if live || h.ProducerID < 0 {
		return true, false
	}
	hz, ok := h.DeleteHorizon()
	switch {
	case !ok:
		return true, true
	case hz <= nowMs:
		return false, false
	}
	return true, false
}
