package objects

import (
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/objstore"
	"github.com/runnel-dev/runnel/internal/objtopic"
)

// kv is one record of a compaction test: a nil key is a keyless record, tombstone a null value.
type kv struct {
	key, value string
	keyless    bool
	tombstone  bool
}

func (r kv) String() string {
	switch {
	case r.keyless:
		return "<nokey>=" + r.value
	case r.tombstone:
		return r.key + "=<deleted>"
	}
	return r.key + "=" + r.value
}

// kvBatch encodes records as one batch, compressed with codec, timestamps from ts on.
func kvBatch(codec batch.Codec, ts int64, recs ...kv) []byte {
	var body []byte
	for i, r := range recs {
		var k, v []byte
		if !r.keyless {
			k = []byte(r.key)
		}
		if !r.tombstone {
			v = []byte(r.value)
		}
		body = batch.AppendRecord(body, int64(i), int32(i), k, v, 1, batch.AppendHeader(nil, "h", []byte(r.value)))
	}
	body, err := batch.Compress(codec, body)
	if err != nil {
		panic(err)
	}
	return batch.AppendBatch(nil, batch.Header{Attributes: int16(codec), LastOffsetDelta: int32(len(recs) - 1), BaseTimestamp: ts,
		MaxTimestamp: ts + int64(len(recs)-1), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, RecordCount: int32(len(recs))}, body)
}

// readKV reads partition 0 from offset on and returns its records by offset, checking that
// offsets ascend and that every record keeps its timestamp (ts[offset]) and header.
func readKV(t *testing.T, ctx context.Context, c *Cache, fc *fakeController, offset int64, ts map[int64]int64) ([]int64, map[int64]kv) {
	t.Helper()
	p := fc.partition(0).Object(0)
	var offs []int64
	recs := map[int64]kv{}
	last := int64(-1)
	for {
		data, err := c.Read(ctx, p, offset, 1<<16, true)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) == 0 {
			return offs, recs
		}
		for len(data) > 0 {
			n, _ := batch.Split(data)
			h, err := batch.ValidateStored(data[:n])
			if err != nil {
				t.Fatal(err)
			}
			err = batch.EachRecord(&h, data[:n], func(r *batch.Record) {
				off := h.BaseOffset + int64(r.OffsetDelta)
				if off < offset {
					return
				}
				if off <= last {
					t.Fatalf("offset %d after %d", off, last)
				}
				last = off
				if got := h.BaseTimestamp + r.TimestampDelta; ts != nil && got != ts[off] {
					t.Fatalf("record %d: timestamp %d; want %d", off, got, ts[off])
				}
				var hv string
				batch.EachHeader(r.Headers, r.HeaderCount, func(_ string, v []byte) { hv = string(v) })
				rec := kv{key: string(r.Key), value: string(r.Value), keyless: r.Key == nil, tombstone: r.Value == nil}
				if rec.tombstone {
					rec.value = hv
				}
				if hv != rec.value {
					t.Fatalf("record %d: header %q, value %q", off, hv, rec.value)
				}
				offs = append(offs, off)
				recs[off] = rec
			})
			if err != nil {
				t.Fatal(err)
			}
			offset = h.NextOffset()
			data = data[n:]
		}
	}
}

// compactRig is an object store, a fake controller with one partition of an object topic whose
// configs are configs, a writer and a maintainer.
type compactRig struct {
	dir     *objstore.Dir
	fc      *fakeController
	w       *Writer
	m       *Maintainer
	configs map[string]string
}

func newCompactRig(t *testing.T, configs map[string]string, cfg MaintainerConfig) *compactRig {
	t.Helper()
	dir := testDir(t)
	r := &compactRig{dir: dir, fc: newFakeController(t, 1), configs: configs}
	r.w = newTestWriter(t, dir, r.fc, nil)
	cfg.Config = func(_, name string) string { return r.configs[name] }
	r.m = newTestMaintainer(dir, r.fc, cfg)
	return r
}

// produce appends batches of records to the partition, each batch at the timestamp at its
// position in stamps, as one file, and returns each batch's base offset.
func (r *compactRig) produce(t *testing.T, ctx context.Context, batches [][]kv, stamps []int64, codec batch.Codec) []int64 {
	t.Helper()
	var pend []*Pending
	for i, recs := range batches {
		b := kvBatch(codec, stamps[i], recs...)
		h, _ := batch.ParseHeader(b)
		pend = append(pend, r.w.Append(controller.PartitionRef{Topic: topic}, b, h, false))
	}
	r.w.Flush()
	var bases []int64
	for _, p := range pend {
		base, err := p.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		bases = append(bases, base)
	}
	return bases
}

// latestValues is what a consumer reading records in offset order ends with: each key's last
// value, deleted keys absent.
func latestValues(offs []int64, recs map[int64]kv) map[string]string {
	out := map[string]string{}
	for _, o := range offs {
		r := recs[o]
		switch {
		case r.keyless:
		case r.tombstone:
			delete(out, r.key)
		default:
			out[r.key] = r.value
		}
	}
	return out
}

// TestCompactionRandomized produces random keyed records, tombstones and keyless records in
// random flushes, and compacts at random moments with random bounds: every record read back is
// the one produced at its offset (with its timestamp and header), offsets ascend, a consumer
// reading from the start ends with every key's latest value, each key's latest record is never
// removed before its tombstone's delete horizon, the active extents are never rewritten, and
// with no new data a pass changes nothing.
func TestCompactionRandomized(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { compactionRun(t, seed) })
	}
}

func compactionRun(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 99))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const retention = 5000
	configs := map[string]string{"cleanup.policy": "compact", "min.cleanable.dirty.ratio": fmt.Sprint([]float64{0, 0.2, 0.5}[rng.IntN(3)]),
		"delete.retention.ms": fmt.Sprint(retention)}
	keep := 1 + rng.IntN(4)
	r := newCompactRig(t, configs, MaintainerConfig{MergeKeepNewest: keep, MergeTarget: int64(500 + rng.IntN(4000)),
		CompactMaxKeys: 2 + rng.IntN(30), MergeMinRun: 2, MergeSmall: 1 << 20})
	dir, fc, m := r.dir, r.fc, r.m

	produced := map[int64]kv{} // by offset
	ts := map[int64]int64{}
	var order []int64
	deletedAt := map[string]int64{} // a key's tombstone, by the compaction clock when it was first kept
	now := int64(1_000_000)
	next := int64(0)
	for step := range 60 {
		var batches [][]kv
		var stamps []int64
		for range 1 + rng.IntN(3) {
			var recs []kv
			for range 1 + rng.IntN(5) {
				r := kv{key: fmt.Sprint("k", rng.IntN(12)), value: fmt.Sprint("v", step, "-", rng.IntN(1000))}
				switch x := rng.IntN(20); {
				case x == 0:
					r.keyless, r.key = true, ""
				case x < 3:
					r.tombstone = true
				}
				recs = append(recs, r)
			}
			batches, stamps = append(batches, recs), append(stamps, now)
		}
		for i, base := range r.produce(t, ctx, batches, stamps, batch.Codec(rng.IntN(2)*int(batch.CodecLz4))) {
			if base != next {
				t.Fatalf("base %d; want %d", base, next)
			}
			for j, rec := range batches[i] {
				produced[next] = rec
				ts[next] = now + int64(j)
				order = append(order, next)
				next++
			}
		}
		now += int64(rng.IntN(2000))
		if rng.IntN(3) > 0 {
			continue
		}
		before := fc.partition(0).Object(0).Extents
		active := before[max(0, len(before)-keep):]
		if _, err := m.Compact(ctx, time.UnixMilli(now)); err != nil {
			t.Fatal(err)
		}
		if rng.IntN(4) == 0 {
			if _, err := m.Merge(ctx); err != nil {
				t.Fatal(err)
			}
		}
		after := fc.partition(0).Object(0).Extents
		for i, e := range active {
			if got := after[len(after)-len(active)+i]; got.File != e.File || got.Offset != e.Offset {
				t.Fatalf("step %d: active extent %+v rewritten (now %+v)", step, e, got)
			}
		}
		offs, recs := readKV(t, ctx, NewCache(dir, 1<<20, nil), fc, 0, ts)
		for _, o := range offs {
			if recs[o] != produced[o] {
				t.Fatalf("step %d: offset %d reads %v; %v was produced there", step, o, recs[o], produced[o])
			}
		}
		// The latest record of each key stays until its tombstone's horizon has passed.
		want := latestValues(order, produced)
		if got := latestValues(offs, recs); !maps.Equal(got, want) {
			t.Fatalf("step %d: a consumer from the start ends with %v; want %v", step, got, want)
		}
		lastOf := map[string]int64{}
		for _, o := range order {
			if !produced[o].keyless {
				lastOf[produced[o].key] = o
			}
		}
		for k, o := range lastOf {
			if _, ok := recs[o]; ok {
				if produced[o].tombstone {
					if _, seen := deletedAt[k+fmt.Sprint(o)]; !seen {
						deletedAt[k+fmt.Sprint(o)] = now
					}
				}
				continue
			}
			if !produced[o].tombstone {
				t.Fatalf("step %d: the latest record of %s (offset %d) is gone", step, k, o)
			}
			if at, seen := deletedAt[k+fmt.Sprint(o)]; seen && now-at < retention {
				t.Fatalf("step %d: tombstone of %s (offset %d) dropped %d ms after it was kept; delete.retention.ms is %d", step, k, o, now-at, retention)
			}
		}
		for _, e := range after {
			if e.Clean && !e.Absolute {
				t.Fatalf("clean extent %+v does not carry its offsets", e)
			}
		}
	}
	// With a dirty ratio of 0, passes clean everything (a bounded key map leaves the rest dirty
	// for the next pass); then, with nothing new, a pass changes nothing.
	now += 2 * retention
	configs["min.cleanable.dirty.ratio"] = "0"
	for range 100 {
		if _, err := m.Compact(ctx, time.UnixMilli(now)); err != nil {
			t.Fatal(err)
		}
	}
	stable := fc.partition(0).Object(0).Extents
	st, err := m.Compact(ctx, time.UnixMilli(now))
	if err != nil || st.Partitions != 0 {
		t.Fatalf("a pass with nothing due: %+v, %v; want none", st, err)
	}
	if got := fc.partition(0).Object(0).Extents; fmt.Sprint(got) != fmt.Sprint(stable) {
		t.Fatalf("extents changed with nothing due")
	}
	offs, recs := readKV(t, ctx, NewCache(dir, 1<<20, nil), fc, 0, ts)
	cleanEnd := stable[len(stable)-keep].Base
	seen := map[string]bool{}
	for _, o := range offs {
		r := recs[o]
		if o >= cleanEnd {
			break
		}
		if r.keyless || seen[r.key] {
			t.Fatalf("offset %d: %v in the compacted part (a duplicate key or no key)", o, r)
		}
		seen[r.key] = true
	}
}

// TestCompactionDeleteHorizon: a tombstone is kept by the pass that first keeps it, with its
// batch's delete horizon set (KIP-534) and every record's timestamp unchanged, and is dropped by
// the first pass after delete.retention.ms; an extent emptied by compaction is dropped; a
// consumer's offset inside a gap reads on from the next record.
func TestCompactionDeleteHorizon(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	configs := map[string]string{"cleanup.policy": "compact,delete", "min.cleanable.dirty.ratio": "0", "delete.retention.ms": "1000", "retention.ms": "-1"}
	// MergeTarget 1: each extent is rewritten on its own.
	r := newCompactRig(t, configs, MaintainerConfig{MergeKeepNewest: 1, MergeTarget: 1})
	dir, fc, m := r.dir, r.fc, r.m
	ts := map[int64]int64{}
	produce := func(stamp int64, recs ...kv) {
		base := r.produce(t, ctx, [][]kv{recs}, []int64{stamp}, batch.CodecNone)[0]
		for i := range recs {
			ts[base+int64(i)] = stamp + int64(i)
		}
	}
	produce(100, kv{key: "a", value: "1"}, kv{key: "b", value: "1"})      // 0, 1
	produce(200, kv{key: "a", value: "2"}, kv{key: "c", value: "1"})      // 2, 3
	produce(300, kv{key: "b", tombstone: true}, kv{key: "c", value: "2"}) // 4, 5
	produce(400, kv{key: "d", value: "1"})                                // 6: active
	now := time.UnixMilli(50_000)
	st, err := m.Compact(ctx, now)
	if err != nil || st.Partitions != 1 || st.RecordsRemoved != 3 {
		t.Fatalf("first pass: %+v, %v; want one partition, 3 records removed (a=1, b=1, c=1)", st, err)
	}
	offs, recs := readKV(t, ctx, NewCache(dir, 1<<20, nil), fc, 0, ts)
	if fmt.Sprint(offs) != "[2 4 5 6]" {
		t.Fatalf("after the first pass: offsets %v (%v); want [2 4 5 6]", offs, recs)
	}
	exts := fc.partition(0).Object(0).Extents
	if len(exts) != 3 || !exts[0].Clean || exts[0].Base != 2 || exts[0].Horizon != 0 || !exts[1].Clean || exts[1].Horizon != 51_000 || exts[1].Base != 4 {
		t.Fatalf("extents %+v; want 0-1 dropped, clean 2-3, clean 4-5 with horizon 51000, the active one", exts)
	}
	cache := NewCache(dir, 1<<20, nil)
	data, err := cache.Read(ctx, fc.partition(0).Object(0), 1, 1<<20, true) // 0-1 are a gap now
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := batch.ParseHeader(data); h.BaseOffset != 2 {
		t.Fatalf("a fetch at offset 1 starts with the batch at %d; want 2", h.BaseOffset)
	}
	data, err = cache.Read(ctx, fc.partition(0).Object(0), 4, 1<<20, true)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := batch.ParseHeader(data)
	if hz, ok := h.DeleteHorizon(); !ok || hz != 51_000 || h.BaseOffset != 4 {
		t.Fatalf("the tombstone's batch at %d: horizon %d %v; want 51000", h.BaseOffset, hz, ok)
	}
	kept := exts[0].File
	if st, _ := m.Compact(ctx, now.Add(999*time.Millisecond)); st.Partitions != 0 {
		t.Fatalf("a pass before the horizon: %+v; want none", st)
	}
	st, err = m.Compact(ctx, now.Add(time.Second))
	if err != nil || st.RecordsRemoved != 1 {
		t.Fatalf("at the horizon: %+v, %v; want the tombstone removed", st, err)
	}
	if offs, _ := readKV(t, ctx, NewCache(dir, 1<<20, nil), fc, 0, ts); fmt.Sprint(offs) != "[2 5 6]" {
		t.Fatalf("after the horizon: offsets %v; want [2 5 6]", offs)
	}
	if exts := fc.partition(0).Object(0).Extents; len(exts) != 3 || exts[1].Horizon != 0 || exts[0].File != kept {
		t.Fatalf("extents %+v; want 2-3 as it was, 4-5 without a horizon, the active one", exts)
	}
	// Every key of the clean extents superseded: they are dropped, their offsets stay a gap.
	produce(500, kv{key: "a", tombstone: true}, kv{key: "c", tombstone: true}) // 7, 8
	produce(600, kv{key: "e", value: "1"})                                     // 9: active
	if _, err := m.Compact(ctx, now.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	if exts := fc.partition(0).Object(0).Extents; len(exts) != 3 || exts[0].Base != 6 || exts[1].Base != 7 || exts[1].Horizon != 53_000 {
		t.Fatalf("extents %+v; want clean 6, clean 7-8 with horizon 53000, the active one", exts)
	}
	if _, err := m.Compact(ctx, now.Add(4*time.Second)); err != nil {
		t.Fatal(err)
	}
	exts = fc.partition(0).Object(0).Extents
	if offs, _ := readKV(t, ctx, NewCache(dir, 1<<20, nil), fc, 0, ts); fmt.Sprint(offs) != "[6 9]" || len(exts) != 2 || exts[0].Base != 6 {
		t.Fatalf("after the tombstones expired: offsets %v, extents %+v; want [6 9] in clean 6 and the active one", offs, exts)
	}
	if p := fc.partition(0).Object(0); p.Start != 0 || p.Next != 10 {
		t.Fatalf("log start %d, end %d; want 0 and 10", p.Start, p.Next)
	}
}

// TestCompactionLags: min.compaction.lag.ms keeps extents with a younger record (and those after
// them) out of a pass; max.compaction.lag.ms makes extents whose records are all older than it
// cleanable even among the newest, and due whatever the dirty ratio.
func TestCompactionLags(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	configs := map[string]string{"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0", "min.compaction.lag.ms": "2500"}
	r := newCompactRig(t, configs, MaintainerConfig{MergeKeepNewest: 1})
	fc, m := r.fc, r.m
	for i := range 6 { // extent i: a=i at timestamp 1000 × (i+1)
		r.produce(t, ctx, [][]kv{{{key: "a", value: fmt.Sprint(i)}}}, []int64{int64(1000 * (i + 1))}, batch.CodecNone)
	}
	clean := func() (n int) {
		for _, e := range fc.partition(0).Object(0).Extents {
			if e.Clean {
				n++
			}
		}
		return n
	}
	// At 5000 with a 2500 ms minimum: extents 0-1 (timestamps 1000, 2000) only.
	st, err := m.Compact(ctx, time.UnixMilli(5000))
	if err != nil || st.RecordsRemoved != 1 || clean() != 1 {
		t.Fatalf("min lag: %+v, %v, %d clean extents; want a=0 removed and one clean extent (a=1)", st, err, clean())
	}
	// Without a minimum and with a ratio nothing reaches: nothing is due until the maximum.
	configs["min.compaction.lag.ms"], configs["min.cleanable.dirty.ratio"], configs["max.compaction.lag.ms"] = "0", "1", "1500"
	if st, _ := m.Compact(ctx, time.UnixMilli(2000)); st.Partitions != 0 {
		t.Fatalf("before any extent is past the max lag: %+v; want no pass", st)
	}
	// At 7600 every extent is older than 1500 ms, the newest included: all compacted into a=5.
	st, err = m.Compact(ctx, time.UnixMilli(7600))
	exts := fc.partition(0).Object(0).Extents
	if err != nil || st.RecordsRemoved != 4 || len(exts) != 1 || !exts[0].Clean || exts[0].Last != 5 {
		t.Fatalf("max lag: %+v, %v, extents %+v; want a=1 to a=4 removed, one clean extent to offset 5", st, err, exts)
	}
}

// TestCompactableRatioIsStrict: a pass is due when the dirty extents hold more than
// min.cleanable.dirty.ratio of the bytes, strictly, as Kafka's cleaner
// (LogCleanerManager.grabFilthiestCompactedLog: cleanableRatio > minCleanableRatio), so a
// ratio of 1 compacts only by max.compaction.lag.ms. All dirty, a ratio of 1 compacted at once.
func TestCompactableRatioIsStrict(t *testing.T) {
	p := objtopic.NewPartition()
	p.Next = 3
	for i := range 3 {
		p.Extents = append(p.Extents, objtopic.Extent{File: fmt.Sprint(i), Length: 100, Base: int64(i), Last: int64(i), MaxTimestamp: 1000})
	}
	if got := compactable(p, 2000, 0, 1, 0, math.MaxInt64); got != nil {
		t.Errorf("ratio 1, every extent dirty: %d extents to compact; want none", len(got))
	}
	if got := compactable(p, 2000, 0, 0.99, 0, math.MaxInt64); len(got) != 3 {
		t.Errorf("ratio 0.99, every extent dirty: %d extents to compact; want 3", len(got))
	}
	if got := compactable(p, 2000, 0, 1, 0, 500); len(got) != 3 {
		t.Errorf("ratio 1, past max.compaction.lag.ms: %d extents to compact; want 3", len(got))
	}
}
