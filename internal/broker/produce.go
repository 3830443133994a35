package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/logstore"
	"github.com/runnel-dev/runnel/internal/metrics"
	"github.com/runnel-dev/runnel/internal/objects"
	total "github.com/runnel-dev/runnel/internal/speclog/shard"
	"github.com/runnel-dev/runnel/internal/topics"
)

func init() { register(kmsg.Produce, 3, 12, handleProduce) }

// handleProduce appends each partition's batch as its leader, in request order on the read loop,
// then, for acks=all, waits off the loop for the partition's commit: a quorum of its replicas
// holding the batch (fsynced, or in memory with write caching).
func handleProduce(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.ProduceRequest)
	if topics, ok := uniqueProducePartitions(req.Topics); !ok {
		unique := *req
		unique.Topics = topics
		req = &unique
	}
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	b := r.conn.b
	type commit struct {
		p     *kmsg.ProduceResponseTopicPartition
		part  *topics.Partition
		epoch int32
		end   int64
		txn   bool // a transactional batch: a quorum's memory is enough (its commit makes it durable)
		// total: a total-order topic's partition: acknowledged once the records' positions
		// are committed by the sequencer (docs/speclog.md §1)
		total *topics.Topic
	}
	var waits []commit
	type objectWait struct {
		sp             *kmsg.ProduceResponseTopicPartition
		t              *topics.Topic
		index          int32
		bytes, records int
		w              *objects.Pending
	}
	var objWaits []objectWait
	everyPartition := func(code int16) reply {
		for _, rt := range req.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition, sp.ErrorCode, sp.BaseOffset = rp.Partition, code, -1
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return reply{resp: resp}
	}
	if req.Acks != 0 && req.Acks != 1 && req.Acks != -1 {
		return everyPartition(kerr.InvalidRequiredAcks.Code)
	}
	// acks=0 gets no response: a request with an error closes the connection once the
	// responses before it are written, as Kafka's does, so the client refreshes its metadata
	// rather than go on sending to the wrong broker.
	closeOnError := func(why string) reply {
		return reply{closeAfter: fmt.Errorf("an acks=0 produce failed: %s", why)}
	}
	if req.TransactionID != nil && req.Acks != -1 {
		// A transaction's records are vouched for at its commit on the ground that a quorum
		// held each one it acknowledged (docs/transactions.md §3.3); every client's
		// transactional producer sends acks=all (transactions need idempotence, which needs it).
		if req.Acks == 0 {
			return closeOnError("a transactional produce needs acks=all")
		}
		return everyPartition(kerr.InvalidRequiredAcks.Code)
	}
	if hasTransactionalBatch(req) && (req.TransactionID == nil || !r.allowedTxnID(kmsg.ACLOperationWrite, *req.TransactionID)) {
		// As Kafka: transactional records need a transactional id the client may write with
		// (checked only for them: plain records are authorized by their topics alone).
		if req.Acks == 0 {
			return closeOnError("transactional records without a transactional id the client may write")
		}
		return everyPartition(kerr.TransactionalIDAuthorizationFailed.Code)
	}
	for _, rt := range req.Topics {
		t, known := b.topics.Get(rt.Topic)
		st := kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		allowed := r.allowedTopic(kmsg.ACLOperationWrite, rt.Topic)
		for i, rp := range rt.Partitions {
			sp := &st.Partitions[i]
			*sp = kmsg.NewProduceResponseTopicPartition()
			sp.Partition, sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = rp.Partition, -1, -1, -1
			if !allowed {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				continue
			}
			if !known || rp.Partition < 0 || int(rp.Partition) >= len(t.Partitions) {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			}
			if internalTopic(rt.Topic) && r.clientID != adminClientID {
				// The coordinators' logs: a record written there is loaded as group or
				// transaction state. Kafka refuses them to any client but its own admin tools.
				sp.ErrorCode = kerr.InvalidTopicException.Code
				msg := "Cannot append to internal topic " + rt.Topic
				sp.ErrorMessage = &msg
				continue
			}
			if isObjectTopic(t) {
				if w, n := b.produceObject(ctx, t, rp.Partition, rp.Records, req.TransactionID, req.Version, sp); w != nil && req.Acks != 0 {
					objWaits = append(objWaits, objectWait{sp, t, rp.Partition, len(rp.Records), n, w})
				}
				continue
			}
			p, err := b.leader(t, rp.Partition, -1)
			if err == nil && req.Acks == -1 {
				err = p.Replica.CheckAcksAll()
			}
			var epoch int32
			var end int64
			transactional := false
			if err == nil {
				inTxn := func(h *batch.Header) error { // called for transactional batches only
					if total.Total(t.Configs) {
						return fmt.Errorf("%w: total-order topic %s takes no transactional batches", kerr.InvalidTxnState, t.Name)
					}
					transactional = true
					var id string
					if req.TransactionID != nil {
						id = *req.TransactionID
					}
					if err := b.txns.ensureInTransaction(ctx, id, localTxnPartition{b.txns, p}, h.ProducerID, h.ProducerEpoch, req.Version); err != nil {
						return verificationError{err}
					}
					return nil
				}
				epoch, end, err = produceOne(t, p, rp.Records, req.Version, sp, b.cfg.Metrics, inTxn)
			}
			if err != nil {
				setProduceError(sp, err)
				if p != nil && refusalKeepsLogStart(err) {
					sp.LogStartOffset = p.Log.StartOffset()
				}
				if isNotLeader(err) && req.Version >= 10 {
					b.produceLeaderHint(resp, sp, t.ID, r.conn.listener.Name)
				}
				continue
			}
			// A transactional batch is not fsynced on its own: the transaction's commit makes every
			// partition of it durable once (docs/transactions.md §3.2).
			if !p.Log.WriteCaching() && !transactional {
				p.Log.SyncSoon() // consumers and acks=all wait for the quorum's fsyncs, this one among them
			}
			switch {
			case total.Total(t.Configs): // acks=1 too: an append is answered with its position fixed
				waits = append(waits, commit{sp, p, epoch, end, false, t})
			case req.Acks == -1:
				waits = append(waits, commit{sp, p, epoch, end, transactional, nil})
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	if req.Acks == 0 {
		for _, st := range resp.Topics {
			for _, sp := range st.Partitions {
				if sp.ErrorCode != 0 {
					return closeOnError(fmt.Sprintf("%s[%d]: %s", st.Topic, sp.Partition, kerr.ErrorForCode(sp.ErrorCode)))
				}
			}
		}
		return reply{} // no response, as Kafka
	}
	if len(waits) == 0 && len(objWaits) == 0 {
		return reply{resp: resp}
	}
	timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
	software := r.conn.software // read on the read loop, which writes it
	return reply{resp: resp, wait: func() {
		wctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		// An object topic's batch is acknowledged once its file is committed, and a total-order
		// topic's once its positions are, whatever the acks (docs/object-topics.md §2,
		// speclog.md). The request's timeout bounds those waits for acks=all only, as Kafka
		// applies it to the wait for the ISR alone: under acks=1 they last up to acks1Wait.
		actx := wctx
		if req.Acks == 1 {
			var acancel context.CancelFunc
			actx, acancel = context.WithTimeout(ctx, max(timeout, acks1Wait))
			defer acancel()
		}
		for _, w := range objWaits {
			b.waitObject(actx, w.t, w.index, w.bytes, w.records, w.w, w.sp, software)
		}
		for _, w := range waits {
			wait := w.part.Replica.WaitCommitted
			if w.txn {
				wait = w.part.Replica.WaitReplicated
			}
			wctx := wctx
			if w.total != nil {
				wctx = actx
			}
			if err := wait(wctx, w.epoch, w.end); err != nil {
				if errors.Is(err, context.DeadlineExceeded) {
					err = kerr.RequestTimedOut
				}
				setProduceError(w.p, err)
				continue
			}
			if w.total != nil {
				if err := b.waitSequenced(wctx, w.total, w.p.Partition, w.end); err != nil {
					setProduceError(w.p, err)
				}
			}
		}
	}}
}

// acks1Wait bounds how long an acks=1 produce to an object or total-order topic waits for its
// commit (then REQUEST_TIMED_OUT), or the request's timeout if longer: Kafka applies that
// timeout to acks=all alone.
const acks1Wait = 30 * time.Second

// adminClientID is the client id of Kafka's own admin tools, which may write to internal
// topics (as Kafka allows them).
const adminClientID = "__admin_client"

// internalTopic reports whether a topic is a coordinator's log.
func internalTopic(name string) bool { return name == OffsetsTopic || name == TxnStateTopic }

// isTotalOrder reports whether a topic is a total-order topic (runnel.ordering=total).
func isTotalOrder(t *topics.Topic) bool { return total.Total(t.Configs) }

// waitSequenced waits until the sequencer has committed the positions of a total-order
// partition's records below end (the shard runner acknowledges them).
func (b *Broker) waitSequenced(ctx context.Context, t *topics.Topic, partition int32, end int64) error {
	m := b.cl.Shards()
	if m == nil {
		// Only an agent has no shard runners, and agents hold no replicas.
		return fmt.Errorf("%w: this node runs no total-order shards", kerr.NotLeaderForPartition)
	}
	r, err := m.WaitRunner(ctx, t.ID, partition)
	if err == nil {
		err = r.WaitAcked(ctx, end)
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return kerr.RequestTimedOut
	case errors.Is(err, total.ErrStopped):
		return kerr.NotLeaderForPartition // the retry goes to the new leader (idempotence dedupes it)
	}
	return err
}

// produceLeaderHint fills in KIP-951's CurrentLeader and NodeEndpoints for a partition whose
// produce went to a replica that does not lead it.
func (b *Broker) produceLeaderHint(resp *kmsg.ProduceResponse, sp *kmsg.ProduceResponseTopicPartition, id [16]byte, listener string) {
	leader, epoch, node := b.leaderHint(id, sp.Partition)
	sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = leader, epoch
	produceEndpoint(resp, node, listener)
}

// The log entry layout all message formats share: offset (8 bytes), length (4), then 4 bytes
// (a batch's partition leader epoch, a message's CRC) and the magic byte. legacyMessageOverhead
// is the length of the smallest entry of any format, a magic 0 message without key or value
// (Kafka's LegacyRecord.RECORD_OVERHEAD_V0).
const (
	entryLengthOffset     = 8
	entryMagicOffset      = 16
	legacyMessageOverhead = 14
)

// produceRecordSet is Kafka's ProduceRequest.validateRecords, checked before anything else: the
// size of the one batch records holds, read from the length fields as Kafka's
// ByteBufferLogInputStream reads them. No complete batch, a batch of magic 0 or 1 (Produce v3+
// carries magic 2 only) or a second complete batch is INVALID_RECORD, which clients do not
// retry; a length below the smallest entry's is CORRUPT_MESSAGE. Bytes after the batch too few
// to hold another are no error: the caller drops them, as Kafka's log trims them
// (trimInvalidBytes).
func produceRecordSet(records []byte) (int, error) {
	n, err := completeEntrySize(records)
	switch {
	case err != nil:
		return 0, recordSetError{err}
	case n == 0:
		return 0, recordSetError{fmt.Errorf("%w: a produce request must hold a record batch for each partition", kerr.InvalidRecord)}
	case records[entryMagicOffset] != 2:
		return 0, recordSetError{fmt.Errorf("%w: a produce request may only hold record batches of magic 2, not %d", kerr.InvalidRecord, records[entryMagicOffset])}
	}
	if next, err := completeEntrySize(records[n:]); err != nil {
		return 0, recordSetError{err}
	} else if next > 0 {
		return 0, recordSetError{fmt.Errorf("%w: a produce request must hold exactly one record batch per partition", kerr.InvalidRecord)}
	}
	return n, nil
}

// recordSetError is a produce's record set refused for its shape (produceRecordSet), before the
// log is reached, as Kafka's KafkaApis refuses it.
type recordSetError struct{ error }

func (e recordSetError) Unwrap() error { return e.error }

// verificationError is a transactional batch refused by its transaction's verification before
// the log is reached: Kafka answers those with log start -1 (ReplicaManager's
// UNKNOWN_LOG_APPEND_INFO).
type verificationError struct{ error }

func (e verificationError) Unwrap() error { return e.error }

// refusalKeepsLogStart reports whether Kafka answers an append refused with err with the
// partition's log start offset: it does for every refusal of its log or producer state
// (ReplicaManager.appendToLocalLog: NOT_ENOUGH_REPLICAS, OUT_OF_ORDER_SEQUENCE_NUMBER,
// INVALID_PRODUCER_EPOCH, INVALID_RECORD of a record, ...), not for an unknown partition, a
// replica not leading, a batch too large or corrupt, a storage error (its list of known
// errors, answered -1), nor for a record set refused before the log (KafkaApis).
func refusalKeepsLogStart(err error) bool {
	var rs recordSetError
	var ve verificationError
	if errors.As(err, &rs) || errors.As(err, &ve) {
		return false
	}
	switch errorCode(err) {
	case kerr.UnknownTopicOrPartition.Code, kerr.NotLeaderForPartition.Code, kerr.MessageTooLarge.Code,
		kerr.RecordListTooLarge.Code, kerr.CorruptMessage.Code, kerr.KafkaStorageError.Code, kerr.UnknownTopicID.Code,
		kerr.UnsupportedCompressionType.Code: // zstd before v7: KafkaApis.handleProduceRequest's validateRecords
		return false
	}
	return true
}

// completeEntrySize is the size of the log entry b starts with, or 0 if b does not hold all of
// it up to its magic byte and its length (Kafka's ByteBufferLogInputStream.nextBatch).
func completeEntrySize(b []byte) (int, error) {
	if len(b) < batch.LengthFieldEnd {
		return 0, nil
	}
	size := int(int32(binary.BigEndian.Uint32(b[entryLengthOffset:])))
	if size < legacyMessageOverhead {
		return 0, fmt.Errorf("%w: record size %d is less than the minimum record overhead (%d)", kerr.CorruptMessage, size, legacyMessageOverhead)
	}
	if len(b) <= entryMagicOffset || len(b) < batch.LengthFieldEnd+size {
		return 0, nil
	}
	return batch.LengthFieldEnd + size, nil
}

// produceOne checks and appends one partition's records as its leader, fills in the offsets
// and counts the appended data in m. A transactional batch must pass inTxn first. It returns
// the epoch it appended in and the offset just past the batch.
func produceOne(t *topics.Topic, p *topics.Partition, records []byte, version int16, sp *kmsg.ProduceResponseTopicPartition, m *metrics.Kafka,
	inTxn func(*batch.Header) error) (int32, int64, error) {
	n, err := produceRecordSet(records)
	if err != nil {
		return 0, 0, err
	}
	records = records[:n]
	maxBytes, _ := t.Effective("max.message.bytes")
	if limit, _ := strconv.Atoi(maxBytes); len(records) > limit {
		return 0, 0, fmt.Errorf("%w: batch of %d bytes exceeds max.message.bytes %d", kerr.MessageTooLarge, len(records), limit)
	}
	// The header, length and CRC first (the records are walked as the log appends): a batch
	// damaged on the way is CORRUPT_MESSAGE, which clients retry, whatever the topic.
	h, err := batch.Check(records)
	if err != nil {
		return 0, 0, err
	}
	if err := checkClientHeader(&h, version); err != nil {
		return 0, 0, err
	}
	// A transactional batch joins its transaction before its records are checked, as Kafka's
	// verification (AddPartitionsToTxnManager) precedes the log's validation: a batch then
	// refused for its records leaves the partition in the transaction, whose end writes its
	// marker.
	if h.IsTransactional() {
		if err := inTxn(&h); err != nil {
			return 0, 0, err
		}
	}
	if err := checkTimestamps(t, &h, records, time.Now()); err != nil {
		return 0, 0, err
	}
	if policy, _ := t.Effective("cleanup.policy"); strings.Contains(policy, "compact") {
		if err := requireKeys(&h, records, t.Name, p.Index); err != nil {
			return 0, 0, err
		}
	}
	if h.IsTransactional() && version >= 12 && h.BaseSequence != 0 && !p.Log.KnowsProducer(h.ProducerID) {
		// Transaction version 2: a partition that has no state of the producer takes its
		// first batch at sequence 0 only (Kafka's checkSequence, KAFKA-18202, after the
		// records' validation). Otherwise a partition created again under its name
		// mid-transaction took the transaction's later batches, and its commit lost the
		// earlier ones without an error.
		return 0, 0, fmt.Errorf("%w: producer %d has no state here, and its transactional batch starts at sequence %d, not 0",
			kerr.OutOfOrderSequenceNumber, h.ProducerID, h.BaseSequence)
	}
	if comp, _ := t.Effective("compression.type"); comp != "producer" {
		if records, err = recompress(records, comp, t.CompressionLevel(comp)); err != nil {
			return 0, 0, err
		}
		if limit, _ := strconv.Atoi(maxBytes); len(records) > limit { // as stored, as Kafka checks
			return 0, 0, fmt.Errorf("%w: batch of %d bytes after compression.type %s exceeds max.message.bytes %d", kerr.MessageTooLarge, len(records), comp, limit)
		}
	}
	logAppendTime := false
	if tsType, _ := t.Effective("message.timestamp.type"); tsType == "LogAppendTime" {
		logAppendTime = true // the CRC is checked (above, or by recompress) before it is rewritten
		sp.LogAppendTime = time.Now().UnixMilli()
		batch.SetLogAppendTime(records, sp.LogAppendTime)
	}
	res, epoch, err := p.Replica.Append(records)
	if err != nil {
		return 0, 0, err
	}
	if res.Duplicate { // a retry: answer as the original was answered
		if logAppendTime {
			sp.LogAppendTime = res.MaxTimestamp
		}
	} else {
		p.NotifyAppend()
		m.Produced(t.Name, len(records), int(res.Last-res.First+1))
	}
	sp.BaseOffset, sp.LogStartOffset = res.First, p.Log.StartOffset()
	// For acks=all the caller waits for the commit up to here: for a duplicate, the original's
	// end, which may not be committed yet.
	return epoch, res.Last + 1, nil
}

// checkClientHeader refuses what Kafka refuses of a client's batch by its header alone.
func checkClientHeader(h *batch.Header, version int16) error {
	switch {
	case h.BaseOffset != 0: // as Kafka's UnifiedLog.analyzeAndValidateRecords
		return fmt.Errorf("%w: the baseOffset of the record batch should be 0, but it is %d", kerr.InvalidRecord, h.BaseOffset)
	case h.Codec() == batch.CodecZstd && version < 7:
		return fmt.Errorf("%w: zstd needs produce v7 or later", kerr.UnsupportedCompressionType)
	case h.IsControl():
		return fmt.Errorf("%w: producers may not send control batches", kerr.InvalidRecord)
	}
	return nil
}

// recompress rebuilds a producer's batch with the topic's compression.type (not "producer") at
// the topic's compression.<type>.level if it uses another codec, as Kafka's brokers do; the
// batch is checked first. A rebuilt batch is a new slice.
func recompress(records []byte, compression string, level int) ([]byte, error) {
	codec, ok := batch.CodecByName(compression)
	if !ok {
		return nil, fmt.Errorf("%w: compression.type %q", kerr.InvalidConfig, compression)
	}
	return batch.RecompressLevel(records, codec, level)
}

// setProduceError maps an append failure to Kafka's error code for the partition.
func setProduceError(sp *kmsg.ProduceResponseTopicPartition, err error) {
	sp.ErrorCode = errorCode(err)
	sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = -1, -1, -1
	msg := err.Error()
	sp.ErrorMessage = &msg
	var re *recordErrors
	var te *timestampError
	switch {
	case errors.As(err, &re):
		sp.ErrorRecords = append(sp.ErrorRecords, re.records...)
	case errors.As(err, &te):
		sp.ErrorRecords = append(sp.ErrorRecords, te.records...)
	}
}

// storageFailure reports whether err is the disk's: full, failing or read-only (Kafka answers
// KAFKA_STORAGE_ERROR for an operation its log directory failed).
func storageFailure(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, syscall.EIO) || errors.Is(err, syscall.EROFS)
}

// errorCode maps Runnel errors to Kafka error codes.
func errorCode(err error) int16 {
	var ke *kerr.Error
	var ce *batch.CorruptError
	var cfgErr *topics.ConfigError
	switch {
	case errors.As(err, &ke):
		return ke.Code
	case errors.As(err, &ce):
		if ce.Check == "crc" || ce.Check == "length" {
			return kerr.CorruptMessage.Code
		}
		return kerr.InvalidRecord.Code
	case errors.As(err, &cfgErr):
		return kerr.InvalidConfig.Code
	case errors.Is(err, logstore.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange.Code
	case errors.Is(err, logstore.ErrClosed), errors.Is(err, topics.ErrUnknownTopic):
		return kerr.UnknownTopicOrPartition.Code
	case errors.Is(err, topics.ErrTopicExists):
		return kerr.TopicAlreadyExists.Code
	case errors.Is(err, topics.ErrInvalidTopic):
		return kerr.InvalidTopicException.Code
	case errors.Is(err, topics.ErrInvalidPartitions):
		return kerr.InvalidPartitions.Code
	case errors.Is(err, context.DeadlineExceeded):
		return kerr.RequestTimedOut.Code
	case errors.Is(err, logstore.ErrPoisoned), storageFailure(err):
		return kerr.KafkaStorageError.Code
	case errors.Is(err, logstore.ErrTruncated):
		return kerr.NotLeaderForPartition.Code
	}
	return kerr.UnknownServerError.Code
}

// timestampError is INVALID_TIMESTAMP for the records of a batch out of the topic's bounds,
// each named in ErrorRecords, as Kafka's LogValidator reports them.
type timestampError struct {
	records []kmsg.ProduceResponseTopicPartitionErrorRecord
	msg     string
}

func (e *timestampError) Error() string { return fmt.Sprintf("%v: %s", kerr.InvalidTimestamp, e.msg) }
func (e *timestampError) Unwrap() error { return kerr.InvalidTimestamp }

// checkTimestamps refuses a CreateTime batch with a record whose timestamp lies further before
// or after now than message.timestamp.before.max.ms / after.max.ms allow (KIP-937). At their
// defaults (no bound) the records are not walked.
func checkTimestamps(t *topics.Topic, h *batch.Header, records []byte, now time.Time) error {
	if h.Attributes&batch.AttrLogAppendTime != 0 {
		// As Kafka's LogValidator: the broker sets that type, never the producer (stored as
		// sent, the batch's header time stood for every record's, past the bounds below).
		msg := "invalid timestamp type: a producer may not set the timestamp type to LogAppendTime"
		return &timestampError{msg: msg, records: []kmsg.ProduceResponseTopicPartitionErrorRecord{{RelativeOffset: 0, ErrorMessage: &msg}}}
	}
	if tsType, _ := t.Effective("message.timestamp.type"); tsType == "LogAppendTime" {
		return nil
	}
	beforeV, _ := t.Effective("message.timestamp.before.max.ms")
	afterV, _ := t.Effective("message.timestamp.after.max.ms")
	before, _ := strconv.ParseInt(beforeV, 10, 64)
	after, _ := strconv.ParseInt(afterV, 10, 64)
	if before == math.MaxInt64 && after == math.MaxInt64 {
		return nil
	}
	nowMs := now.UnixMilli()
	low, high := nowMs-before, nowMs+after
	if before > nowMs { // no bound below the epoch
		low = math.MinInt64
	}
	if after > math.MaxInt64-nowMs {
		high = math.MaxInt64
	}
	recs, err := batch.Records(h, records)
	if err != nil {
		return err
	}
	var bad timestampError
	rd := batch.NewRecordReader(recs)
	var rec batch.Record
	for i := int32(0); rd.Next(&rec); i++ {
		if ts := h.BaseTimestamp + rec.TimestampDelta; ts != -1 && (ts < low || ts > high) { // -1: none, as Kafka skips
			msg := fmt.Sprintf("timestamp %d of record %d is out of range: it should be within [%d, %d]", ts, i, low, high)
			bad.records = append(bad.records, kmsg.ProduceResponseTopicPartitionErrorRecord{RelativeOffset: i, ErrorMessage: &msg})
			if bad.msg == "" {
				bad.msg = msg
			}
		}
	}
	if err := rd.Err(); err != nil {
		return fmt.Errorf("%w: malformed records: %v", kerr.InvalidRecord, err)
	}
	if len(bad.records) > 0 {
		return &bad
	}
	return nil
}

// recordErrors is INVALID_RECORD for records of a batch, which Produce v8+ names in
// ErrorRecords (KIP-467), as Kafka does.
type recordErrors struct {
	records []kmsg.ProduceResponseTopicPartitionErrorRecord
}

func (e *recordErrors) add(index int32, msg string) {
	e.records = append(e.records, kmsg.ProduceResponseTopicPartitionErrorRecord{RelativeOffset: index, ErrorMessage: &msg})
}

func (e *recordErrors) Error() string {
	first := e.records[0]
	return fmt.Sprintf("%v: %d record(s) rejected, the first, record %d: %s", kerr.InvalidRecord, len(e.records), first.RelativeOffset, *first.ErrorMessage)
}
func (e *recordErrors) Unwrap() error { return kerr.InvalidRecord }

// requireKeys rejects a batch with keyless records, as Kafka does for compacted topics: every
// one of them is named (Kafka's LogValidator collects a RecordError per record, its message
// naming the partition).
func requireKeys(h *batch.Header, records []byte, topic string, partition int32) error {
	recs, err := batch.Records(h, records)
	if err != nil {
		return err
	}
	rd := batch.NewRecordReader(recs)
	var rec batch.Record
	var keyless *recordErrors
	for i := int32(0); rd.Next(&rec); i++ {
		if rec.Key == nil {
			if keyless == nil {
				keyless = &recordErrors{}
			}
			keyless.add(i, fmt.Sprintf("Compacted topic cannot accept message without key in topic partition %s-%d", topic, partition))
		}
	}
	if err := rd.Err(); err != nil {
		return fmt.Errorf("%w: malformed records: %v", kerr.InvalidRecord, err)
	}
	if keyless != nil {
		return keyless
	}
	return nil
}

// hasTransactionalBatch reports whether any partition of req starts with a transactional batch.
func hasTransactionalBatch(req *kmsg.ProduceRequest) bool {
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			if batch.FirstIsTransactional(rp.Records) {
				return true
			}
		}
	}
	return false
}

// producePartition names one partition of a Produce request.
type producePartition struct {
	topic     string
	partition int32
}

// uniqueProducePartitions returns topics with each partition once, and false, when a partition
// is named more than once: as Kafka's KafkaApis keys a request's partitions in a map, the last
// mention's batch is the one appended and a topic named twice is one topic of the response.
// Otherwise it returns topics itself and true, without allocating for a small request.
func uniqueProducePartitions(topics []kmsg.ProduceRequestTopic) ([]kmsg.ProduceRequestTopic, bool) {
	n := 0
	for _, rt := range topics {
		n += len(rt.Partitions)
	}
	if n <= 16 {
		if !repeatsSmall(topics) {
			return topics, true
		}
	} else {
		seen := make(map[producePartition]struct{}, n)
		named := make(map[string]struct{}, len(topics))
		for _, rt := range topics {
			named[rt.Topic] = struct{}{}
			for _, rp := range rt.Partitions {
				seen[producePartition{rt.Topic, rp.Partition}] = struct{}{}
			}
		}
		if len(seen) == n && len(named) == len(topics) {
			return topics, true
		}
	}
	last := make(map[producePartition]int, n) // the position of each partition's last mention
	pos := 0
	for _, rt := range topics {
		for _, rp := range rt.Partitions {
			last[producePartition{rt.Topic, rp.Partition}] = pos
			pos++
		}
	}
	var out []kmsg.ProduceRequestTopic
	topicAt := map[string]int{}
	pos = 0
	for _, rt := range topics {
		for _, rp := range rt.Partitions {
			if last[producePartition{rt.Topic, rp.Partition}] == pos {
				i, ok := topicAt[rt.Topic]
				if !ok {
					i = len(out)
					topicAt[rt.Topic] = i
					t := rt
					t.Partitions = nil
					out = append(out, t)
				}
				out[i].Partitions = append(out[i].Partitions, rp)
			}
			pos++
		}
	}
	return out, false
}

// repeatsSmall reports whether a partition, or a topic, is named twice among a few.
func repeatsSmall(topics []kmsg.ProduceRequestTopic) bool {
	for i, rt := range topics {
		for _, other := range topics[i+1:] {
			if other.Topic == rt.Topic {
				return true
			}
		}
		for j, rp := range rt.Partitions {
			for _, other := range rt.Partitions[j+1:] {
				if other.Partition == rp.Partition {
					return true
				}
			}
		}
	}
	return false
}
