package bench

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestIntendedTimeRoundTrip(t *testing.T) {
	value := make([]byte, 16)
	want := time.Unix(1_800_000_000, 123456789)
	putIntended(value, want)
	if got, ok := intendedTime(value); !ok || !got.Equal(want) {
		t.Errorf("intendedTime(putIntended(%v)) = %v, %v; want %v, true", want, got, ok, want)
	}
	if _, ok := intendedTime(value[:7]); ok {
		t.Error("intendedTime(7 bytes) ok = true; want false")
	}
}

// The workload's linger and the rest are handed to the client explicitly, never its defaults.
func TestProducerOptsAreExplicit(t *testing.T) {
	for _, linger := range []time.Duration{0, time.Millisecond, 10 * time.Millisecond} {
		w := DefaultWorkload()
		w.Linger = Duration(linger)
		w.Acks = "1"
		w.BatchMaxBytes = 65536
		cl, err := kgo.NewClient(append(producerOpts(&w), kgo.SeedBrokers("127.0.0.1:1"))...)
		if err != nil {
			t.Fatalf("NewClient(producerOpts) = %v", err)
		}
		if got := cl.OptValue(kgo.ProducerLinger); got != linger {
			t.Errorf("linger %v: client ProducerLinger = %v", linger, got)
		}
		if got := cl.OptValue(kgo.ProducerBatchMaxBytes); got != int32(65536) {
			t.Errorf("client ProducerBatchMaxBytes = %v; want 65536", got)
		}
		if got := cl.OptValue(kgo.DisableIdempotentWrite); got != true {
			t.Errorf("client DisableIdempotentWrite = %v; want true (idempotence: false)", got)
		}
		if got := cl.OptValue(kgo.MaxProduceRequestsInflightPerBroker); got != 5 {
			t.Errorf("client MaxProduceRequestsInflightPerBroker = %v; want 5", got)
		}
		cl.Close()
	}
}

func TestRecordPlacement(t *testing.T) {
	w := DefaultWorkload()
	w.Partitions, w.Topics, w.RecordSize, w.Keys = 4, 2, 32, KeysRoundRobin
	p := newProducer(0, nil, &w, []string{"a", "b"}, nil, window{}, &errorLog{})
	intended := time.Unix(1_800_000_000, 0)
	counts := map[string]map[int32]int{"a": {}, "b": {}}
	for seq := range int64(80) {
		r := p.record(seq, intended)
		counts[r.Topic][r.Partition]++
		if len(r.Value) != 32 {
			t.Fatalf("record(%d) value is %d bytes; want 32", seq, len(r.Value))
		}
		if got, _ := intendedTime(r.Value); !got.Equal(intended) {
			t.Fatalf("record(%d) intended time = %v; want %v", seq, got, intended)
		}
		if k := binary.BigEndian.Uint32(r.Key); int32(k) != r.Partition {
			t.Fatalf("record(%d) key %d; want the partition %d", seq, k, r.Partition)
		}
		p.promise(r, nil) // returns it for reuse
	}
	for topic, parts := range counts {
		for part := range int32(4) {
			if parts[part] != 10 {
				t.Errorf("round robin: topic %s partition %d got %d records; want 10", topic, part, parts[part])
			}
		}
	}

	w.Keys = KeysRandom
	r := p.record(0, intended)
	if len(r.Key) != 16 {
		t.Errorf("random key is %d bytes; want 16", len(r.Key))
	}
	w.Keys = KeysNone
	if r := p.record(1, intended); r.Key != nil {
		t.Errorf("keys none: key = %x; want nil", r.Key)
	}
}

func TestAssignPartitions(t *testing.T) {
	got := assignPartitions([]string{"a", "b"}, 3, 4)
	total := 0
	for i, c := range got {
		n := 0
		for _, parts := range c {
			n += len(parts)
		}
		if n < 1 || n > 2 {
			t.Errorf("consumer %d got %d partitions; want 1 or 2 of 6", i, n)
		}
		total += n
	}
	if total != 6 {
		t.Errorf("assigned %d partitions in all; want 6", total)
	}
	if got := assignPartitions([]string{"a"}, 3, 0); got != nil {
		t.Errorf("assignPartitions(0 consumers) = %v; want nil", got)
	}
}
