package txncoord

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Records of __transaction_state use Kafka's schemas (TransactionLogKey / TransactionLogValue,
// kmsg's TxnMetadataKey / TxnMetadataValue), so Kafka's tools read the topic: key version 0
// (the transactional id), value version 1 (flexible: previous producer id and the client's
// transaction version as tagged fields). A tombstone (nil value) deletes an expired id.

// ErrBadRecord is returned for a record that does not decode.
var ErrBadRecord = errors.New("txncoord: bad __transaction_state record")

// Encode returns a record's key and value (nil for a tombstone).
func Encode(r Record) (key, value []byte) {
	k := kmsg.NewTxnMetadataKey()
	k.Version, k.TransactionalID = 0, r.ID
	key = k.AppendTo(nil)
	if r.Txn == nil {
		return key, nil
	}
	t := r.Txn
	v := kmsg.NewTxnMetadataValue()
	v.Version = 1
	v.ProducerID, v.ProducerEpoch, v.TimeoutMillis = t.ProducerID, t.Epoch, t.TimeoutMs
	v.State = kmsg.TransactionState(t.State)
	v.LastUpdateTimestamp, v.StartTimestamp = t.UpdateMs, t.StartMs
	v.PreviousProducerID = t.PrevProducerID
	if t.NextProducerID >= 0 && (t.State == PrepareCommit || t.State == PrepareAbort) {
		v.NextProducerID = t.NextProducerID // it acts only on a decision; else the default, -1
	}
	v.ClientTransactionVersion = 1
	if t.V2 {
		v.ClientTransactionVersion = 2
	}
	byTopic := map[string][]int32{}
	for tp := range t.Partitions {
		byTopic[tp.Topic] = append(byTopic[tp.Topic], tp.Partition)
	}
	for _, topic := range slices.Sorted(maps.Keys(byTopic)) {
		vt := kmsg.NewTxnMetadataValueTopic()
		vt.Topic, vt.Partitions = topic, slices.Sorted(slices.Values(byTopic[topic]))
		v.Topics = append(v.Topics, vt)
	}
	return key, v.AppendTo(nil)
}

// Decode reads a record.
func Decode(key, value []byte) (Record, error) {
	k := kmsg.NewTxnMetadataKey()
	if err := k.ReadFrom(key); err != nil {
		return Record{}, fmt.Errorf("%w: key: %v", ErrBadRecord, err)
	}
	if k.Version != 0 {
		return Record{}, fmt.Errorf("%w: key version %d", ErrBadRecord, k.Version)
	}
	if value == nil {
		return Record{ID: k.TransactionalID}, nil
	}
	v := kmsg.NewTxnMetadataValue()
	if err := v.ReadFrom(value); err != nil {
		return Record{}, fmt.Errorf("%w: value: %v", ErrBadRecord, err)
	}
	if v.Version < 0 || v.Version > 1 {
		return Record{}, fmt.Errorf("%w: value version %d", ErrBadRecord, v.Version)
	}
	if v.State < 0 || v.State > kmsg.TransactionState(PrepareEpochFence) {
		return Record{}, fmt.Errorf("%w: state %d", ErrBadRecord, v.State)
	}
	t := &Txn{ID: k.TransactionalID, ProducerID: v.ProducerID, PrevProducerID: v.PreviousProducerID, NextProducerID: v.NextProducerID, Epoch: v.ProducerEpoch,
		LastEpoch: -1, TimeoutMs: v.TimeoutMillis, State: State(v.State), UpdateMs: v.LastUpdateTimestamp,
		StartMs: v.StartTimestamp, V2: v.ClientTransactionVersion >= 2}
	if v.Version == 0 {
		t.PrevProducerID, t.NextProducerID = -1, -1
	}
	if t.State != PrepareCommit && t.State != PrepareAbort {
		t.NextProducerID = -1 // Kafka's records carry it in other states too; it acts only on a decision
	}
	if len(v.Topics) > 0 {
		t.Partitions = map[TP]bool{}
		for _, vt := range v.Topics {
			for _, p := range vt.Partitions {
				t.Partitions[TP{vt.Topic, p}] = true
			}
		}
	}
	return Record{ID: k.TransactionalID, Txn: t}, nil
}
