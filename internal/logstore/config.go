package logstore

import (
	"fmt"
	"math"
	"time"
)

// Config is the per-partition configuration, named after the Kafka topic configs it implements.
type Config struct {
	SegmentBytes       int64         // segment.bytes: roll the active segment past this size
	SegmentMs          time.Duration // segment.ms: roll the active segment when it is this old
	IndexIntervalBytes int           // index.interval.bytes: bytes between offset index entries
	// SegmentJitter is segment.jitter.ms: each segment rolls a random part of it (below
	// min(SegmentJitter, SegmentMs), drawn when the segment is made) before SegmentMs, as Kafka's
	// LogSegment.rollJitterMs, so partitions created together do not all roll together.
	SegmentJitter time.Duration

	RetentionMs    time.Duration // retention.ms: delete segments whose newest record is older; < 0 keeps all
	RetentionBytes int64         // retention.bytes: delete old segments past this log size; < 0 keeps all

	// Delete and Compact are cleanup.policy's "delete" and "compact". Neither (an empty policy,
	// Kafka 4.1's KIP-1161) keeps every record until the log start offset is advanced.
	Delete                 bool          // cleanup.policy has "delete": retention.ms and retention.bytes apply
	Compact                bool          // cleanup.policy has "compact"
	DeleteRetentionMs      time.Duration // delete.retention.ms: how long tombstones outlive their first compaction
	MinCleanableDirtyRatio float64       // min.cleanable.dirty.ratio: compact once dirty/total reaches this
	// min.compaction.lag.ms: a segment is compacted only once its newest record is this old;
	// max.compaction.lag.ms: a segment whose oldest record is this old is compacted whatever the
	// dirty ratio (the topic config also caps segment.ms by it, so the active segment rolls).
	// Unix ms spans; 0 and math.MaxInt64 mean none.
	MinCompactionLagMs int64
	MaxCompactionLagMs int64

	// The flush policy: unsynced data is synced in the background, with nobody waiting, once any
	// limit is reached (what bounds the loss of write-cached acks in a power failure).
	FlushInterval time.Duration // flush.ms: sync data that has been unsynced this long; <= 0: off
	FlushBytes    int64         // flush.bytes: sync once this many bytes are unsynced; <= 0: off
	FlushMessages int64         // flush.messages: sync once this many records are unsynced; <= 0: off

	// WriteCaching is write.caching: readers may see what is appended but not yet durable
	// (HighWatermark is the log end), as in Redpanda. Without it they see only what is durable,
	// so a consumer never reads a record that a power failure could take back.
	WriteCaching bool

	// Preallocate keeps zero-filled space ahead of the appends of a log without WriteCaching
	// that is written fast, so its fsyncs need no journal commit (prealloc.go).
	Preallocate bool

	// ProducerIDExpiration is producer.id.expiration.ms: an idempotent producer whose last batch
	// is older is forgotten by ExpireProducers; <= 0: never.
	ProducerIDExpiration time.Duration
}

// DefaultConfig is Kafka's default topic configuration, with Redpanda's flush policy.
func DefaultConfig() Config {
	return Config{
		SegmentBytes:           1 << 30,
		SegmentMs:              7 * 24 * time.Hour,
		IndexIntervalBytes:     4096,
		RetentionMs:            7 * 24 * time.Hour,
		RetentionBytes:         -1,
		Delete:                 true,
		DeleteRetentionMs:      24 * time.Hour,
		MinCleanableDirtyRatio: 0.5,
		MaxCompactionLagMs:     math.MaxInt64,
		FlushInterval:          100 * time.Millisecond,
		FlushBytes:             256 << 10,
		ProducerIDExpiration:   24 * time.Hour,
		Preallocate:            true,
	}
}

// Validate reports the first setting out of range.
func (c Config) Validate() error {
	switch {
	case c.SegmentBytes < 14 || c.SegmentBytes > maxSegmentBytes:
		return fmt.Errorf("logstore: segment.bytes %d is outside [14, %d]", c.SegmentBytes, int64(maxSegmentBytes))
	case c.SegmentMs <= 0:
		return fmt.Errorf("logstore: segment.ms %v must be positive", c.SegmentMs)
	case c.IndexIntervalBytes < 0:
		return fmt.Errorf("logstore: index.interval.bytes %d is negative", c.IndexIntervalBytes)
	case c.SegmentJitter < 0:
		return fmt.Errorf("logstore: segment.jitter.ms %v is negative", c.SegmentJitter)
	case c.DeleteRetentionMs < 0:
		return fmt.Errorf("logstore: delete.retention.ms %v is negative", c.DeleteRetentionMs)
	case c.MinCleanableDirtyRatio < 0 || c.MinCleanableDirtyRatio > 1:
		return fmt.Errorf("logstore: min.cleanable.dirty.ratio %v is outside [0, 1]", c.MinCleanableDirtyRatio)
	case c.MinCompactionLagMs < 0 || c.MaxCompactionLagMs < 1:
		return fmt.Errorf("logstore: min.compaction.lag.ms %d must be at least 0 and max.compaction.lag.ms %d at least 1", c.MinCompactionLagMs, c.MaxCompactionLagMs)
	case c.MinCompactionLagMs > c.MaxCompactionLagMs:
		return fmt.Errorf("logstore: min.compaction.lag.ms %d is greater than max.compaction.lag.ms %d", c.MinCompactionLagMs, c.MaxCompactionLagMs)
	}
	return nil
}
