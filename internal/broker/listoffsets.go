package broker

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/topics"
)

func init() { register(kmsg.ListOffsets, 1, 11, handleListOffsets) }

// ListOffsets special timestamps.
const (
	listLatest                = -1
	listEarliest              = -2
	listMaxTimestamp          = -3 // v7+ (KIP-734)
	listEarliestLocal         = -4 // v8+ (KIP-405): the local log's start; every log is local here
	listLatestTiered          = -5 // v9+ (KIP-1005): the last offset in tiered storage; none here
	listEarliestPendingUpload = -6 // v11+ (KIP-1023): the first not yet tiered; none here
)

// listMinVersion is the first version that may carry a special timestamp; Kafka answers an
// older request naming it UNSUPPORTED_VERSION, and any version naming a negative timestamp
// that is not special (ReplicaManager.isListOffsetsTimestampUnsupported).
func listMinVersion(ts int64) int16 {
	switch ts {
	case listLatest, listEarliest:
		return 0
	case listMaxTimestamp:
		return 7
	case listEarliestLocal:
		return 8
	case listLatestTiered:
		return 9
	case listEarliestPendingUpload:
		return 11
	}
	if ts < 0 {
		return math.MaxInt16 // no version takes it
	}
	return 0
}

// fetchable reports whether a consumer may be told about offset: as in Kafka, a lookup by
// timestamp from a consumer (replica id -1) answers "none" (-1) for an offset at or above the
// high watermark; a debugging client (replica id -2) sees the whole log.
func fetchable(replicaID int32, offset, hw int64) bool {
	return replicaID == -2 || offset < hw
}

// handleListOffsets answers off the read loop: a lookup on a new leader waits (up to a second
// for the whole request) for its high watermark to reach its epoch's start.
func handleListOffsets(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	return reply{resp: resp, wait: func() { r.conn.b.listOffsets(ctx, r, req, resp) }}
}

func (b *Broker) listOffsets(ctx context.Context, r *request, req *kmsg.ListOffsetsRequest, resp *kmsg.ListOffsetsResponse) {
	barrier := sync.OnceValue(func() error { return b.objectBarrier(ctx) })
	readyBy := time.Now().Add(time.Second)
	// A partition named more than once is answered INVALID_REQUEST in each of its rows, as
	// Kafka's handleListOffsetRequest (duplicatePartitions).
	named := map[string]map[int32]int{}
	for _, rt := range req.Topics {
		if named[rt.Topic] == nil {
			named[rt.Topic] = map[int32]int{}
		}
		for _, rp := range rt.Partitions {
			named[rt.Topic][rp.Partition]++
		}
	}
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		t, known := b.topics.Get(rt.Topic)
		allowed := r.allowedTopic(kmsg.ACLOperationDescribe, rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition, sp.Timestamp, sp.Offset, sp.LeaderEpoch = rp.Partition, -1, -1, -1
			switch {
			case !allowed:
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case named[rt.Topic][rp.Partition] > 1:
				sp.ErrorCode = kerr.InvalidRequest.Code
			case listMinVersion(rp.Timestamp) > req.Version:
				sp.ErrorCode = kerr.UnsupportedVersion.Code
			case known && isObjectTopic(t):
				if err := b.listObjectOffset(ctx, t, req.ReplicaID, req.IsolationLevel == 1, &rp, &sp, barrier); err != nil {
					sp.ErrorCode = errorCode(err)
				}
			case !known:
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			default:
				if err := listOffset(ctx, b, t, req.ReplicaID, req.IsolationLevel == 1, &rp, &sp, readyBy); err != nil {
					sp.ErrorCode = errorCode(err)
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
}

// listOffset answers one partition of a local topic, with the leader epoch of the offset found
// (of the log start for EARLIEST, the current epoch for LATEST), as Kafka does.
func listOffset(ctx context.Context, b *Broker, t *topics.Topic, replicaID int32, readCommitted bool,
	rp *kmsg.ListOffsetsRequestTopicPartition, sp *kmsg.ListOffsetsResponseTopicPartition, readyBy time.Time) error {
	p, err := b.leader(t, rp.Partition, rp.CurrentLeaderEpoch)
	if err != nil {
		return err
	}
	l := p.Log
	switch rp.Timestamp {
	case listEarliest, listEarliestLocal: // answered whatever the high watermark, as Kafka
		sp.Offset = l.StartOffset()
		sp.LeaderEpoch = p.Replica.EpochOf(sp.Offset)
		return nil
	case listLatestTiered, listEarliestPendingUpload: // no tiered storage: none
		return nil
	}
	if !waitReady(ctx, p.Replica, time.Until(readyBy)) {
		return kerr.OffsetNotAvailable // a new leader: its high watermark is not known yet
	}
	hw := p.Replica.HighWatermark()
	if readCommitted { // nothing at or past the last stable offset
		hw = l.LastStable(hw)
	}
	var off, ts int64
	var ok bool
	switch rp.Timestamp {
	case listLatest:
		sp.Offset = hw
		if replicaID != -1 { // not a consumer: no isolation, the log end (Kafka's isolationLevelOpt None)
			sp.Offset = l.EndOffset()
		}
		sp.LeaderEpoch, _, _ = p.Replica.Leading()
		return nil
	case listMaxTimestamp:
		off, ts, ok, err = l.MaxTimestamp()
	default:
		if rp.Timestamp < 0 {
			return kerr.InvalidRequest
		}
		off, ts, ok, err = l.OffsetForTimestamp(rp.Timestamp)
	}
	if err != nil {
		return err
	}
	if ok && fetchable(replicaID, off, hw) {
		sp.Offset, sp.Timestamp, sp.LeaderEpoch = off, ts, p.Replica.EpochOf(off)
	}
	return nil
}
