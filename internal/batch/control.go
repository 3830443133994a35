package batch

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Control record types (the key's second field), as Kafka numbers them.
const (
	ControlAbort  int16 = 0
	ControlCommit int16 = 1
)

// Control is the content of a transaction marker: a control batch of one record whose key is
// version int16 (0) | type int16, and whose value is version int16 (0) | coordinatorEpoch int32.
type Control struct {
	Type             int16
	CoordinatorEpoch int32
}

// AppendControl appends a transaction marker batch for a producer (base offset 0: the log assigns
// it) and returns the result. Markers are uncompressed, transactional and control, with no
// sequence (-1), as Kafka writes them.
func AppendControl(dst []byte, producerID int64, epoch int16, c Control, timestampMs int64) []byte {
	key := binary.BigEndian.AppendUint16(make([]byte, 0, 4), 0)
	key = binary.BigEndian.AppendUint16(key, uint16(c.Type))
	value := binary.BigEndian.AppendUint16(make([]byte, 0, 6), 0)
	value = binary.BigEndian.AppendUint32(value, uint32(c.CoordinatorEpoch))
	rec := AppendRecord(nil, 0, 0, key, value, 0, nil)
	return AppendBatch(dst, Header{Attributes: AttrTransactional | AttrControl, BaseTimestamp: timestampMs,
		MaxTimestamp: timestampMs, ProducerID: producerID, ProducerEpoch: epoch, BaseSequence: -1, RecordCount: 1}, rec)
}

// ParseControl reads the marker in a control batch b (whose header is h). A control batch whose
// record is not a marker of a known type is an error: the log writes no other kind.
func ParseControl(h *Header, b []byte) (Control, error) {
	if !h.IsControl() {
		return Control{}, fmt.Errorf("batch: not a control batch")
	}
	if h.RecordCount != 1 {
		return Control{}, corrupt("control", "control batch holds %d records, not 1", h.RecordCount)
	}
	recs, err := Records(h, b)
	if err != nil {
		return Control{}, err
	}
	r := NewRecordReader(recs)
	var rec Record
	if !r.Next(&rec) {
		return Control{}, corrupt("control", "control record unreadable: %v", r.Err())
	}
	if len(rec.Key) < 4 || len(rec.Value) < 6 {
		return Control{}, corrupt("control", "control record key %d bytes, value %d bytes", len(rec.Key), len(rec.Value))
	}
	c := Control{Type: int16(binary.BigEndian.Uint16(rec.Key[2:])), CoordinatorEpoch: int32(binary.BigEndian.Uint32(rec.Value[2:]))}
	if v := int16(binary.BigEndian.Uint16(rec.Key)); v != 0 {
		return Control{}, corrupt("control", "control record key version %d", v)
	}
	if c.Type != ControlAbort && c.Type != ControlCommit {
		return Control{}, corrupt("control", "control record type %d", c.Type)
	}
	return c, nil
}

// ControlNoOp is the control type of a total-order topic's no-op entry (docs/speclog.md): far
// from Kafka's own types, so every Kafka consumer skips it as a control batch it does not know.
const ControlNoOp int16 = 0x5250

// NoOp is a no-op entry: Slots consecutive no-op slots of a total-order shard, written in view
// View, stored and replicated as one batch of one record however many slots it stands for. The
// batch spans Slots offsets (last offset delta Slots − 1, as a compacted batch spans the offsets
// of its removed records), so a shard's slots are its partition's offsets.
type NoOp struct {
	Slots int64
	View  uint64
}

// AppendNoOp appends a no-op entry: a control batch (not transactional, producer id -1) of one
// record, key = version int16 0 | type int16 ControlNoOp, value = version int16 0 | slots int64
// | view uint64.
func AppendNoOp(dst []byte, n NoOp, timestampMs int64) []byte {
	key := binary.BigEndian.AppendUint16(make([]byte, 0, 4), 0)
	key = binary.BigEndian.AppendUint16(key, uint16(ControlNoOp))
	value := binary.BigEndian.AppendUint16(make([]byte, 0, 18), 0)
	value = binary.BigEndian.AppendUint64(value, uint64(n.Slots))
	value = binary.BigEndian.AppendUint64(value, n.View)
	rec := AppendRecord(nil, 0, 0, key, value, 0, nil)
	if n.Slots < 1 || n.Slots > math.MaxInt32 {
		panic(fmt.Sprintf("batch: a no-op entry of %d slots", n.Slots))
	}
	return AppendBatch(dst, Header{Attributes: AttrControl, BaseTimestamp: timestampMs, MaxTimestamp: timestampMs,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, RecordCount: 1, LastOffsetDelta: int32(n.Slots - 1)}, rec)
}

// ParseNoOp reads the no-op entry in batch b (whose header is h); an error if b is not one, or
// a malformed one.
func ParseNoOp(h *Header, b []byte) (NoOp, error) {
	if !h.IsControl() || h.IsTransactional() {
		return NoOp{}, fmt.Errorf("batch: not a no-op entry (attributes %#x)", h.Attributes)
	}
	if h.RecordCount != 1 {
		return NoOp{}, corrupt("no-op", "no-op batch holds %d records, not 1", h.RecordCount)
	}
	recs, err := Records(h, b)
	if err != nil {
		return NoOp{}, err
	}
	r := NewRecordReader(recs)
	var rec Record
	if !r.Next(&rec) {
		return NoOp{}, corrupt("no-op", "no-op record unreadable: %v", r.Err())
	}
	if len(rec.Key) != 4 || binary.BigEndian.Uint16(rec.Key) != 0 || int16(binary.BigEndian.Uint16(rec.Key[2:])) != ControlNoOp {
		return NoOp{}, corrupt("no-op", "not a no-op record key: %x", rec.Key)
	}
	if len(rec.Value) != 18 || binary.BigEndian.Uint16(rec.Value) != 0 {
		return NoOp{}, corrupt("no-op", "no-op record value of %d bytes", len(rec.Value))
	}
	n := NoOp{Slots: int64(binary.BigEndian.Uint64(rec.Value[2:])), View: binary.BigEndian.Uint64(rec.Value[10:])}
	if n.Slots <= 0 || n.Slots-1 != int64(h.LastOffsetDelta) {
		return NoOp{}, corrupt("no-op", "a no-op entry of %d slots spanning %d offsets", n.Slots, int64(h.LastOffsetDelta)+1)
	}
	return n, nil
}
