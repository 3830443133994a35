package broker

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/testclients"
	"github.com/runnel-dev/runnel/internal/txn"
)

// producerBatch builds a batch of values from producer pid (transactional or not).
func producerBatch(pid int64, seq int32, transactional bool, values ...string) []byte {
	var recs []byte
	for i, v := range values {
		recs = batch.AppendRecord(recs, 0, int32(i), nil, []byte(v), 0, nil)
	}
	h := batch.Header{LastOffsetDelta: int32(len(values) - 1), BaseTimestamp: 1000, MaxTimestamp: 1000,
		ProducerID: pid, ProducerEpoch: 0, BaseSequence: seq, RecordCount: int32(len(values))}
	if transactional {
		h.Attributes = batch.AttrTransactional
	}
	return batch.AppendBatch(nil, h, recs)
}

// TestReadCommittedFetch: a read_committed consumer (franz-go) reads only committed records and
// stops at the last stable offset; read_uncommitted reads everything; ListOffsets follows the
// isolation level. The transactional records are written through the partition's replica, as
// the transaction coordinator's markers are.
func TestReadCommittedFetch(t *testing.T) {
	addr, reg := testBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "rc"); err != nil {
		t.Fatal(err)
	}
	tp, _ := reg.Get("rc")
	p := tp.Partitions[0]
	var epoch int32
	var end int64
	appendData := func(b []byte) {
		t.Helper()
		res, ep, err := p.Replica.Append(b)
		if err != nil {
			t.Fatalf("Append = %v", err)
		}
		epoch, end = ep, res.Last+1
	}
	marker := func(pid int64, commit bool) {
		t.Helper()
		off, ep, err := p.Replica.AppendMarker(txn.Marker{ProducerID: pid, Commit: commit}, 2000)
		if err != nil {
			t.Fatalf("AppendMarker = %v", err)
		}
		epoch, end = ep, off+1
	}
	appendData(producerBatch(1, 0, true, "a1", "a2")) // 0-1
	appendData(producerBatch(-1, -1, false, "p1"))    // 2
	appendData(producerBatch(2, 0, true, "b1"))       // 3: aborted below
	appendData(producerBatch(3, 0, true, "c1"))       // 4: stays open
	marker(1, true)                                   // 5
	marker(2, false)                                  // 6
	appendData(producerBatch(1, 2, true, "a3"))       // 7: producer 1's next transaction
	marker(1, true)                                   // 8
	if err := p.Replica.WaitCommitted(ctx, epoch, end); err != nil {
		t.Fatal(err)
	}

	consume := func(level kgo.IsolationLevel, want int) []string {
		t.Helper()
		return testclients.ReadValues(t, ctx, []string{addr}, "rc", level, want, 5*time.Second) // "rc" has one partition
	}
	if got, want := consume(kgo.ReadCommitted(), 3), []string{"a1", "a2", "p1"}; !slices.Equal(got, want) {
		t.Errorf("read_committed = %v; want %v (b1 aborted, c1 open, a3 behind c1)", got, want)
	}
	if got, want := consume(kgo.ReadUncommitted(), 6), []string{"a1", "a2", "p1", "b1", "c1", "a3"}; !slices.Equal(got, want) {
		t.Errorf("read_uncommitted = %v; want %v", got, want)
	}
	checkEnds := func(wantCommitted, wantEnd int64) {
		t.Helper()
		committed, err := adm.ListCommittedOffsets(ctx, "rc")
		if err != nil {
			t.Fatal(err)
		}
		ends, err := adm.ListEndOffsets(ctx, "rc")
		if err != nil {
			t.Fatal(err)
		}
		if c, _ := committed.Lookup("rc", 0); c.Offset != wantCommitted {
			t.Errorf("ListOffsets(read_committed, latest) = %d; want %d", c.Offset, wantCommitted)
		}
		if e, _ := ends.Lookup("rc", 0); e.Offset != wantEnd {
			t.Errorf("ListOffsets(read_uncommitted, latest) = %d; want %d", e.Offset, wantEnd)
		}
	}
	checkEnds(4, 9)

	marker(3, true) // 9: c1 commits; the last stable offset reaches the end
	if err := p.Replica.WaitCommitted(ctx, epoch, end); err != nil {
		t.Fatal(err)
	}
	if got, want := consume(kgo.ReadCommitted(), 5), []string{"a1", "a2", "p1", "c1", "a3"}; !slices.Equal(got, want) {
		t.Errorf("read_committed after the commit = %v; want %v", got, want)
	}
	checkEnds(10, 10)
}
