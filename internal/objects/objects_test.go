package objects

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/objstore"
	"github.com/runnel-dev/runnel/internal/objtopic"
)

var topic = controller.TopicID{7}

func testBatch(pid int64, seq int32, values ...string) []byte {
	var body []byte
	for i, v := range values {
		body = batch.AppendRecord(body, int64(i), int32(i), nil, []byte(v), 0, nil)
	}
	epoch := int16(-1)
	if pid >= 0 {
		epoch = 0
	}
	return batch.AppendBatch(nil, batch.Header{LastOffsetDelta: int32(len(values) - 1), BaseTimestamp: 1000,
		MaxTimestamp: 1000 + int64(len(values)-1), ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, RecordCount: int32(len(values))}, body)
}

// fakeController applies commits to a real image, as the controller's log would.
type fakeController struct {
	mu     sync.Mutex
	img    *controller.Image
	index  uint64
	fail   int  // the next commits that fail after applying (their answer is lost)
	refuse int  // the next commits that fail without applying (the controller is unreachable)
	hang   bool // commits wait until their context ends, unapplied (the controller paused)
	calls  int
}

func newFakeController(t *testing.T, partitions int) *fakeController {
	img := controller.NewImage()
	controller.Apply(img, 1, &controller.Command{Op: controller.OpRegister, Register: &controller.Register{Node: 1, Run: "1-test", Level: controller.Level}})
	controller.Apply(img, 1, &controller.Command{Op: controller.OpFinalizeLevel, FinalizeLevel: &controller.FinalizeLevel{Level: controller.Level,
		Nodes: map[int32]uint64{1: img.Nodes[1].Incarnation}}})
	if img.Level != controller.Level {
		t.Fatalf("the fake controller's image is at level %d", img.Level)
	}
	r := controller.Apply(img, 1, &controller.Command{Op: controller.OpCreateTopic, CreateTopic: &controller.CreateTopic{
		Name: "o", ID: topic, Configs: map[string]string{controller.StorageConfig: controller.StorageObject},
		Assignments: make([][]int32, partitions)}})
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	return &fakeController{img: img, index: 1}
}

func (f *fakeController) commit(ctx context.Context, c *controller.CommitFile) (controller.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.hang {
		f.mu.Unlock()
		<-ctx.Done()
		f.mu.Lock()
		return controller.Result{}, ctx.Err()
	}
	if f.refuse > 0 {
		f.refuse--
		return controller.Result{}, errors.New("the controller is unreachable")
	}
	f.index++
	r := controller.Apply(f.img, f.index, &controller.Command{Op: controller.OpCommitFile, CommitFile: c})
	if f.fail > 0 {
		f.fail--
		return controller.Result{}, errors.New("the answer was lost")
	}
	return r, r.Err
}

func (f *fakeController) partition(i int32) *controller.Topic {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.img.Clone().Topics["o"]
}

// propose applies a command to the image, as the controller's log would.
func (f *fakeController) propose(_ context.Context, c *controller.Command) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.index++
	return controller.Apply(f.img, f.index, c).Err
}

// newTestMaintainer is a maintainer that is always active, on fc's image, with cfg's other
// writeEager writes batch b to ref through w as an eager batch, flushes, and waits for its
// commit.
func writeEager(t *testing.T, ctx context.Context, w *Writer, ref controller.PartitionRef, b []byte) {
	t.Helper()
	h, _ := batch.ParseHeader(b)
	p := w.Append(ref, b, h, false)
	w.Flush()
	if _, err := p.Wait(ctx); err != nil {
		t.Fatal(err)
	}
}

// settings (a topic config of "-1" unless cfg.Config says otherwise).
func newTestMaintainer(store objstore.Store, fc *fakeController, cfg MaintainerConfig) *Maintainer {
	cfg.Store, cfg.Propose = store, fc.propose
	cfg.Active = func() bool { return true }
	cfg.Node = 1 // the image's one live node
	cfg.Image = func() *controller.Image { fc.mu.Lock(); defer fc.mu.Unlock(); return fc.img.Clone() }
	if cfg.Config == nil {
		cfg.Config = func(_, _ string) string { return "-1" }
	}
	return NewMaintainer(cfg)
}

func newTestWriter(t *testing.T, store objstore.Store, fc *fakeController, cache *Cache) *Writer {
	return startWriter(t, fc, WriterConfig{Store: store, BatchTimeout: 20 * time.Millisecond, WriteTimeout: 500 * time.Millisecond, Cache: cache})
}

// startWriter starts a writer committing to fc, as run "1-test" of node 1 in its
// incarnation 1 unless cfg says otherwise, and closes it when the test ends.
func startWriter(t *testing.T, fc *fakeController, cfg WriterConfig) *Writer {
	cfg.Commit = fc.commit
	if cfg.Run == "" {
		cfg.Node, cfg.Run = 1, "1-test"
	}
	if cfg.Incarnation == nil {
		cfg.Incarnation = func() uint64 { return 1 }
	}
	w := NewWriter(cfg)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		w.Close(ctx)
	})
	return w
}

// testDir is an object store in a directory of the test's.
func testDir(t *testing.T) *objstore.Dir {
	t.Helper()
	dir, err := objstore.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestWriterOneFilePerFlush: batches of many partitions from many producers go into one file
// per flush; each batch gets its offsets; every record reads back at its offset.
func TestWriterOneFilePerFlush(t *testing.T) {
	dir := testDir(t)
	store := objstore.NewFaulty(dir, 1)
	fc := newFakeController(t, 8)
	cache := NewCache(store, 1<<20, nil)
	w := NewWriter(WriterConfig{Store: store, Commit: fc.commit, Node: 1, Run: "1-test", Incarnation: func() uint64 { return 1 }, BatchTimeout: time.Hour, Cache: cache})
	defer w.Close(context.Background())
	var pend []*Pending
	var refs []int32
	for i := range 40 {
		part := int32(i % 8)
		b := testBatch(-1, -1, fmt.Sprintf("v%d-a", i), fmt.Sprintf("v%d-b", i))
		h, _ := batch.ParseHeader(b)
		pend = append(pend, w.Append(controller.PartitionRef{Topic: topic, Partition: part}, b, h, false))
		refs = append(refs, part)
	}
	w.Flush()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	next := map[int32]int64{}
	for i, p := range pend {
		base, err := p.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if base != next[refs[i]] {
			t.Fatalf("batch %d of partition %d: base %d; want %d", i, refs[i], base, next[refs[i]])
		}
		next[refs[i]] += 2
	}
	if n := store.Calls("put"); n != 2 {
		t.Errorf("%d object writes for one flush; want 2 (the run's marker, once per run, and the file)", n)
	}
	if fc.calls != 1 {
		t.Errorf("%d commits for one file; want 1", fc.calls)
	}
	// Read back through a cold cache (every range a GET) and the warm one.
	for _, c := range []*Cache{NewCache(store, 1<<20, nil), cache} {
		tp := fc.partition(0)
		data, err := c.Read(ctx, tp.Object(3), 4, 1<<20, true)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		if err := eachRecord(data, func(off, _ int64) bool { got = append(got, fmt.Sprint(off)); return true }); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != "[4 5 6 7 8 9]" {
			t.Errorf("partition 3 from offset 4: offsets %v; want 4-9", got)
		}
	}
}

// TestWriterRetriesAndFailures: a commit whose answer was lost is retried and assigns nothing
// twice; a file that cannot be written fails its batches with a retriable error and commits
// nothing; an idempotent retry of a batch gets its original offset.
func TestWriterRetriesAndFailures(t *testing.T) {
	dir := testDir(t)
	store := objstore.NewFaulty(dir, 1)
	fc := newFakeController(t, 1)
	w := newTestWriter(t, store, fc, nil)
	ref := controller.PartitionRef{Topic: topic}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	produce := func(b []byte) (int64, error) {
		h, _ := batch.ParseHeader(b)
		return w.Append(ref, b, h, false).Wait(ctx)
	}
	fc.mu.Lock()
	fc.fail = 2
	fc.mu.Unlock()
	if base, err := produce(testBatch(5, 0, "a", "b")); base != 0 || err != nil {
		t.Fatalf("first batch: %d, %v", base, err)
	}
	if next := fc.partition(0).Object(0).Next; next != 2 {
		t.Fatalf("after two lost answers the partition's next offset is %d; want 2", next)
	}
	store.Set(objstore.Faults{ErrorRate: 1})
	_, err := produce(testBatch(5, 2, "c"))
	if !errors.Is(err, kerr.RequestTimedOut) {
		t.Fatalf("a batch whose file cannot be written: %v; want REQUEST_TIMED_OUT", err)
	}
	store.Set(objstore.Faults{})
	if next := fc.partition(0).Object(0).Next; next != 2 {
		t.Fatalf("a failed write committed something: next %d", next)
	}
	if base, err := produce(testBatch(5, 0, "a", "b")); base != 0 || err != nil {
		t.Fatalf("an idempotent retry: %d, %v; want the original offset 0", base, err)
	}
	if base, err := produce(testBatch(5, 2, "c")); base != 2 || err != nil {
		t.Fatalf("the next batch: %d, %v; want 2", base, err)
	}
}

// TestMaintainerRetentionAndGC: retention trims whole extents; garbage collection deletes a
// file only after it has been unreferenced for the grace period, and an uncommitted file of an
// unknown writer only once it is old.
func TestMaintainerRetentionAndGC(t *testing.T) {
	dir := testDir(t)
	fc := newFakeController(t, 1)
	w := newTestWriter(t, dir, fc, nil)
	ref := controller.PartitionRef{Topic: topic}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range 3 {
		writeEager(t, ctx, w, ref, testBatch(-1, -1, fmt.Sprint(i)))
	}
	if err := dir.Put(ctx, "journal/9-gone/000000/00000000000000000001", []byte("an orphan")); err != nil {
		t.Fatal(err)
	}
	retentionBytes := "-1"
	m := newTestMaintainer(dir, fc, MaintainerConfig{
		Config: func(_, name string) string {
			switch name {
			case "retention.bytes":
				return retentionBytes
			case "cleanup.policy":
				return "delete"
			}
			return "-1"
		}})
	now := time.Now()
	if err := m.Retention(ctx, now); err != nil {
		t.Fatal(err)
	}
	if start := fc.partition(0).Object(0).Start; start != 0 {
		t.Fatalf("retention without limits moved the start to %d", start)
	}
	size := int64(fc.partition(0).Object(0).Extents[2].Length)
	retentionBytes = fmt.Sprint(size)
	if err := m.Retention(ctx, now); err != nil {
		t.Fatal(err)
	}
	if start := fc.partition(0).Object(0).Start; start != 2 {
		t.Fatalf("retention.bytes of one extent: start %d; want 2", start)
	}
	count := func() int {
		objs, err := dir.List(ctx, "journal/", "", 0)
		if err != nil {
			t.Fatal(err)
		}
		return len(objs)
	}
	for _, step := range []struct {
		at      time.Duration
		deleted int
		left    int
	}{
		{0, 0, 4},                // first sighting: the grace period starts
		{5 * time.Minute, 0, 4},  // within the grace period
		{11 * time.Minute, 2, 2}, // the two trimmed files go; the orphan of an unknown writer is young
		{2 * time.Hour, 1, 1},    // the orphan is old now; the referenced file stays
	} {
		n, err := m.GC(ctx, now.Add(step.at))
		if err != nil {
			t.Fatal(err)
		}
		if n != step.deleted || count() != step.left {
			t.Fatalf("GC at +%v: deleted %d, %d left; want %d, %d", step.at, n, count(), step.deleted, step.left)
		}
	}
	// The partition still reads from its start.
	data, err := NewCache(dir, 1<<20, nil).Read(ctx, fc.partition(0).Object(0), 2, 1<<20, true)
	if err != nil || len(data) == 0 {
		t.Fatalf("reading after GC: %d bytes, %v", len(data), err)
	}
}

// TestGCForgetsARunNotItsCommits: garbage collection forgets a writer run once its files are
// gone and it is no node's current run, but the image keeps which files it committed (with
// the collection's clock), so a commit of one of them that the run's process retries after
// that (cut off since, its answer lost) assigns nothing again.
func TestGCForgetsARunNotItsCommits(t *testing.T) {
	dir := testDir(t)
	fc := newFakeController(t, 1)
	w := newTestWriter(t, dir, fc, nil)
	ref := controller.PartitionRef{Topic: topic}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	writeEager(t, ctx, w, ref, testBatch(-1, -1, "a", "b"))
	writeEager(t, ctx, w, ref, testBatch(-1, -1, "c"))
	next := fc.partition(0).Object(0).Next
	fc.propose(ctx, &controller.Command{Op: controller.OpRegister, Register: &controller.Register{Node: 1, Run: "1-later", Level: controller.Level}})
	// Every record deleted (DeleteRecords): both files are garbage.
	fc.propose(ctx, &controller.Command{Op: controller.OpTrimObjects, TrimObjects: &controller.TrimObjects{
		Items: []controller.TrimItem{{PartitionRef: ref, Start: next}}}})
	m := newTestMaintainer(dir, fc, MaintainerConfig{})
	now := time.Now()
	// First sighting; past the grace period the files go; the next pass finds the run empty.
	for _, at := range []time.Duration{0, 11 * time.Minute, 12 * time.Minute} {
		if _, err := m.GC(ctx, now.Add(at)); err != nil {
			t.Fatal(err)
		}
	}
	img := fc.img.Clone()
	f := img.ForgottenWriters["1-test"]
	if img.ObjWriters["1-test"] != nil || f == nil || !f.Committed.Covers(1, 2) || f.AtMs != now.Add(12*time.Minute).UnixMilli() {
		t.Fatalf("after GC: writer %+v, forgotten %+v; want the run forgotten with files 1-2 committed", img.ObjWriters["1-test"], f)
	}
	retry := &controller.CommitFile{Writer: "1-test", Node: 1, Seq: 1, Key: JournalKey("1-test", 1), Slow: true,
		Sections: []controller.CommitSection{{PartitionRef: ref, Length: 10, Lazy: true,
			Batches: []objtopic.BatchMeta{{Records: 2, ProducerID: -1}}}}}
	if r, err := fc.commit(ctx, retry); err != nil || !r.AlreadyCommitted || fc.partition(0).Object(0).Next != next {
		t.Fatalf("a forgotten run's retried commit: %+v, %v, next %d; want AlreadyCommitted, next %d", r, err, fc.partition(0).Object(0).Next, next)
	}
	// The retry made it a writer again; GC forgets it again, and drops it for good past the
	// TTL, though no other run is forgotten then.
	later := now.Add(13 * time.Minute)
	for _, at := range []time.Time{later, later.Add(controller.ForgottenWriterTTL + time.Minute)} {
		if _, err := m.GC(ctx, at); err != nil {
			t.Fatal(err)
		}
	}
	if img := fc.img.Clone(); img.ObjWriters["1-test"] != nil || img.ForgottenWriters["1-test"] != nil {
		t.Fatalf("past the TTL: writer %+v, forgotten %+v; want neither", img.ObjWriters["1-test"], img.ForgottenWriters["1-test"])
	}
}

// TestRetentionExpiresProducers: the retention pass forgets the idempotent producers of object
// partitions idle past producer.id.expiration.ms, as a local partition's does; before that it
// keeps them (a retry of their batch is still a duplicate).
func TestRetentionExpiresProducers(t *testing.T) {
	dir := testDir(t)
	fc := newFakeController(t, 1)
	w := newTestWriter(t, dir, fc, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	writeEager(t, ctx, w, controller.PartitionRef{Topic: topic}, testBatch(7, 0, "a", "b")) // last timestamp 1,001 ms
	m := newTestMaintainer(dir, fc, MaintainerConfig{Config: func(_, name string) string {
		return map[string]string{"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1", "producer.id.expiration.ms": "1000"}[name]
	}})
	// In a cluster below LevelForgottenWriters (a node of an older version, which would not
	// apply expire-producers) nothing is proposed.
	fc.mu.Lock()
	fc.img.Level = 0
	fc.mu.Unlock()
	if err := m.Retention(ctx, time.UnixMilli(2_001)); err != nil {
		t.Fatal(err)
	}
	if !fc.partition(0).Object(0).ProducersExpirable(2_001+1_000_000, 1) {
		t.Fatal("producers expired below the command level that brought expire-producers")
	}
	fc.mu.Lock()
	fc.img.Level = controller.Level
	fc.mu.Unlock()
	for _, step := range []struct {
		nowMs int64
		known bool
	}{{1_500, true}, {2_001, false}} {
		if err := m.Retention(ctx, time.UnixMilli(step.nowMs)); err != nil {
			t.Fatal(err)
		}
		known := fc.partition(0).Object(0).ProducersExpirable(step.nowMs+1_000_000, 1)
		if known != step.known {
			t.Fatalf("at %d ms with an expiration of 1,000 ms: producer 7 known %v; want %v", step.nowMs, known, step.known)
		}
	}
}

// TestRetentionSparesCompactOnlyTopics: retention.ms and retention.bytes apply only with delete
// in cleanup.policy; compact alone keeps each key's latest record however old, as in Kafka.
func TestRetentionSparesCompactOnlyTopics(t *testing.T) {
	dir := testDir(t)
	fc := newFakeController(t, 1)
	w := newTestWriter(t, dir, fc, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	writeEager(t, ctx, w, controller.PartitionRef{Topic: topic}, testBatch(-1, 0, "k-latest")) // a timestamp in 1970
	for _, tc := range []struct {
		policy string
		start  int64
	}{{"compact", 0}, {"compact,delete", 1}} {
		m := newTestMaintainer(dir, fc, MaintainerConfig{Config: func(_, name string) string {
			return map[string]string{"cleanup.policy": tc.policy, "retention.ms": "604800000", "retention.bytes": "-1"}[name]
		}})
		if err := m.Retention(ctx, time.Now()); err != nil {
			t.Fatal(err)
		}
		if s := fc.partition(0).Object(0).Start; s != tc.start {
			t.Fatalf("cleanup.policy=%s, a week's retention.ms, a record from 1970: log start %d, want %d", tc.policy, s, tc.start)
		}
	}
}

// TestMerge: runs of small extents become one object each; every offset reads back the same
// record (a duplicate skipped in its file stays skipped); the newest extents stay; a merge
// planned before a trim is refused; GC deletes the merged-away files after the grace period.
func TestMerge(t *testing.T) {
	dir := testDir(t)
	fc := newFakeController(t, 1)
	w := newTestWriter(t, dir, fc, nil)
	ref := controller.PartitionRef{Topic: topic}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	seq := int32(0)
	for i := range 20 {
		var pend []*Pending
		for _, b := range [][]byte{testBatch(3, seq, fmt.Sprint(i, "a"), fmt.Sprint(i, "b")), testBatch(-1, -1, fmt.Sprint(i, "c"))} {
			h, _ := batch.ParseHeader(b)
			pend = append(pend, w.Append(ref, b, h, false))
		}
		if i == 5 { // a retried batch: skipped in its file
			b := testBatch(3, seq, fmt.Sprint(i, "a"), fmt.Sprint(i, "b"))
			h, _ := batch.ParseHeader(b)
			pend = append(pend, w.Append(ref, b, h, false))
		}
		w.Flush()
		for _, p := range pend {
			if _, err := p.Wait(ctx); err != nil {
				t.Fatal(err)
			}
		}
		seq += 2
	}
	read := func() []string {
		data, err := NewCache(dir, 1<<20, nil).Read(ctx, fc.partition(0).Object(0), 0, 1<<20, true)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for len(data) > 0 {
			n, _ := batch.Split(data)
			h, _ := batch.ParseHeader(data[:n])
			batch.EachRecord(&h, data[:n], func(r *batch.Record) {
				out = append(out, fmt.Sprintf("%d=%s", h.BaseOffset+int64(r.OffsetDelta), r.Value))
			})
			data = data[n:]
		}
		return out
	}
	before := read()
	if len(before) != 60 {
		t.Fatalf("read %d records before merging; want 60", len(before))
	}
	m := newTestMaintainer(dir, fc, MaintainerConfig{
		MergeMinRun: 4, MergeKeepNewest: 4, MergeTarget: 1 << 20})
	n, err := m.Merge(ctx)
	if err != nil {
		t.Fatal(err)
	}
	exts := fc.partition(0).Object(0).Extents
	if n != 16 || len(exts) != 5 || exts[0].Base != 0 || exts[0].Last != 47 || len(exts[0].Skip) != 0 {
		t.Fatalf("merged %d extents; now %d, the first %+v; want 16 merged into one (offsets 0-47), 4 kept", n, len(exts), exts[0])
	}
	if after := read(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("records changed by the merge:\n%v\n%v", before, after)
	}
	if n, _ := m.Merge(ctx); n != 0 {
		t.Fatalf("a second merge round merged %d extents; want none (nothing small left outside the newest)", n)
	}
	// A merge planned on an image older than a trim is refused.
	stale := fc.partition(0).Object(0).Clone()
	if err := fc.propose(ctx, &controller.Command{Op: controller.OpTrimObjects, TrimObjects: &controller.TrimObjects{Items: []controller.TrimItem{{PartitionRef: ref, Start: 50}}}}); err != nil {
		t.Fatal(err)
	}
	err = fc.propose(ctx, &controller.Command{Op: controller.OpReplaceExtents, ReplaceExtents: &controller.ReplaceExtents{PartitionRef: ref,
		First: stale.Extents[0], Last: stale.Extents[1], Merged: &objtopic.Extent{File: "merged/x", Base: stale.Extents[0].Base, Last: stale.Extents[1].Last}}})
	if !errors.Is(err, objtopic.ErrMergeStale) {
		t.Fatalf("a merge of trimmed extents: %v; want ErrMergeStale", err)
	}
	// The merged-away files and the trimmed merged object go once the grace period is over.
	now := time.Now()
	m.GC(ctx, now)
	if n, err := m.GC(ctx, now.Add(11*time.Minute)); err != nil || n != 17 {
		t.Fatalf("GC deleted %d, %v; want the 16 merged-away files and the trimmed merged object", n, err)
	}
}

// TestLazyAndSlowPath: lazy batches are answered (offset -1) once their file is written, before
// any commit; when the writer cannot commit, the slow path commits the file's lazy section
// (not its eager one) after the grace period; the writer's own late commit is then
// AlreadyCommitted and its eager batch fails retriably; every lazy record reads back once.
func TestLazyAndSlowPath(t *testing.T) {
	dir := testDir(t)
	fc := newFakeController(t, 2)
	fc.refuse = 1 << 30 // the controller is unreachable for the writer
	w := newTestWriter(t, dir, fc, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	lazyB, eagerB := testBatch(6, 0, "l1", "l2"), testBatch(-1, -1, "e1")
	lh, _ := batch.ParseHeader(lazyB)
	eh, _ := batch.ParseHeader(eagerB)
	lp := w.Append(controller.PartitionRef{Topic: topic, Partition: 0}, lazyB, lh, true)
	ep := w.Append(controller.PartitionRef{Topic: topic, Partition: 1}, eagerB, eh, false)
	w.Flush()
	if base, err := lp.Wait(ctx); base != -1 || err != nil {
		t.Fatalf("a lazy batch: %d, %v; want -1 once written", base, err)
	}
	select {
	case <-ep.done:
		t.Fatalf("the eager batch was answered before its commit: %d, %v", ep.base, ep.err)
	default:
	}
	m := newTestMaintainer(dir, fc, MaintainerConfig{})
	if n, err := m.SlowPath(ctx, time.Now()); err != nil || n != 0 {
		t.Fatalf("slow path within the grace period: %d, %v; want nothing", n, err)
	}
	if n, err := m.SlowPath(ctx, time.Now().Add(5*time.Second)); err != nil || n != 0 {
		t.Fatalf("slow path 5 s after the write of a live writer: %d, %v; want none (the writer commits its files)", n, err)
	}
	if n, err := m.SlowPath(ctx, time.Now().Add(time.Minute)); err != nil || n != 1 {
		t.Fatalf("slow path once the file is long overdue: %d, %v; want one file", n, err)
	}
	if n, _ := m.SlowPath(ctx, time.Now().Add(2*time.Minute)); n != 0 {
		t.Fatalf("a second slow path round committed %d files", n)
	}
	tp := fc.partition(0)
	if tp.Object(0).Next != 2 || tp.Object(1).Next != 0 {
		t.Fatalf("after the slow path: partition 0 next %d, partition 1 next %d; want 2 and 0 (eager sections are not committed)",
			tp.Object(0).Next, tp.Object(1).Next)
	}
	fc.mu.Lock()
	fc.refuse = 0 // the controller is back: the writer's retry finds the file committed
	fc.mu.Unlock()
	if _, err := ep.Wait(ctx); !errors.Is(err, kerr.RequestTimedOut) {
		t.Fatalf("the eager batch of a file the slow path committed: %v; want a retriable error", err)
	}
	data, err := NewCache(dir, 1<<20, nil).Read(ctx, fc.partition(0).Object(0), 0, 1<<20, true)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	eachRecord(data, func(off, _ int64) bool { got = append(got, fmt.Sprint(off)); return true })
	if fmt.Sprint(got) != "[0 1]" {
		t.Fatalf("lazy records read back at %v; want [0 1]", got)
	}
}

// TestLazyAnswersDoNotWaitForCommits: with the controller unreachable, a lazy topic's files are
// answered one after another as they are written; when it answers again, the writer commits
// them itself (the slow path finds nothing left).
func TestLazyAnswersDoNotWaitForCommits(t *testing.T) {
	dir := testDir(t)
	fc := newFakeController(t, 1)
	fc.refuse = 1 << 30
	w := startWriter(t, fc, WriterConfig{Store: dir, BatchTimeout: time.Hour, LazyCommitPatience: 50 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	start := time.Now()
	for i := range 10 {
		b := testBatch(-1, -1, fmt.Sprint(i))
		h, _ := batch.ParseHeader(b)
		p := w.Append(controller.PartitionRef{Topic: topic}, b, h, true)
		w.Flush()
		if _, err := p.Wait(ctx); err != nil {
			t.Fatalf("file %d of a lazy topic, controller unreachable: %v", i, err)
		}
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("10 lazy files took %v to be answered; their answers waited for commits", d)
	}
	m := newTestMaintainer(dir, fc, MaintainerConfig{})
	// Every commit waits (the head is retried), then the controller answers again: the writer
	// commits its files itself, in order.
	for {
		n := w.PendingCommits()
		if n >= 9 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("%d of 10 commits waiting", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	fc.mu.Lock()
	fc.refuse = 0
	fc.mu.Unlock()
	for fc.partition(0).Object(0).Next != 10 {
		if ctx.Err() != nil {
			t.Fatalf("the writer caught up to %d of 10 records", fc.partition(0).Object(0).Next)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n, err := m.SlowPath(ctx, time.Now().Add(time.Minute)); err != nil || n != 0 {
		t.Fatalf("slow path after the writer caught up: %d files, %v; want none left", n, err)
	}
}

// TestSlowPathFindsUnknownRuns: a writer the controller never heard of (a Ripcord process that
// started while the controller was away) announced its run in the store; the slow path finds
// and commits its files from there.
func TestSlowPathFindsUnknownRuns(t *testing.T) {
	dir, fc := ghostSetup(t)
	w := ghostWriter(t, dir, fc, "7-ghost")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	writeLazy(t, ctx, w, "ghost")
	m := newTestMaintainer(dir, fc, MaintainerConfig{})
	if n, err := m.SlowPath(ctx, time.Now().Add(time.Minute)); err != nil || n != 1 {
		t.Fatalf("slow path: %d files, %v; want the unknown run's one", n, err)
	}
	if next := fc.partition(0).Object(0).Next; next != 1 {
		t.Fatalf("partition ends at %d; want 1", next)
	}
}

// TestBacklog: the journal backlog the console shows lists a run the controller never heard of
// (announced in the store) with its uncommitted files, and nothing once the slow path committed
// them.
func TestBacklog(t *testing.T) {
	dir, fc := ghostSetup(t)
	w := ghostWriter(t, dir, fc, "7-ghost")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	before := time.Now()
	for i := range 3 {
		writeLazy(t, ctx, w, fmt.Sprint(i))
	}
	m := newTestMaintainer(dir, fc, MaintainerConfig{})
	runs, err := m.Backlog(ctx)
	// The image's own run (the fake controller's node 1) and the announced one, in order.
	if err != nil || len(runs) != 2 || runs[0].Run != "1-test" || !runs[0].Live || runs[0].Files != 0 {
		t.Fatalf("Backlog = %+v, %v; want the live run 1-test without files, then 7-ghost", runs, err)
	}
	r := runs[1]
	if r.Run != "7-ghost" || r.Node != 7 || r.Live || r.Files != 3 || r.Bytes <= 0 || r.Oldest.Before(before.Add(-time.Second)) || r.Incomplete {
		t.Fatalf("the run's backlog: %+v; want 3 files of node 7, not live", r)
	}
	if n, err := m.SlowPath(ctx, time.Now().Add(time.Minute)); err != nil || n != 3 {
		t.Fatalf("slow path: %d, %v", n, err)
	}
	if runs, err = m.Backlog(ctx); err != nil || len(runs) != 2 || runs[1].Files != 0 || runs[1].Bytes != 0 {
		t.Fatalf("after the slow path: %+v, %v; want no files left", runs, err)
	}
}

// TestSlowPathPagesPastAHole: a run's first file cannot be read (so the committed prefix never
// moves), and the run has more files than one listing page: the slow path pages on and commits
// every other file, and counts the unreadable one in the backlog.
func TestSlowPathPagesPastAHole(t *testing.T) {
	defer func(p int) { slowPathPage = p }(slowPathPage)
	slowPathPage = 2
	dir, fc := ghostSetup(t)
	w := ghostWriter(t, dir, fc, "7-ghost")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 7 {
		writeLazy(t, ctx, w, fmt.Sprint(i))
	}
	if err := dir.Put(ctx, JournalKey("7-ghost", 1), []byte("not an object file")); err != nil {
		t.Fatal(err)
	}
	m := newTestMaintainer(dir, fc, MaintainerConfig{})
	if n, err := m.SlowPath(ctx, time.Now().Add(time.Minute)); err != nil || n != 6 {
		t.Fatalf("slow path: %d files, %v; want the 6 readable ones", n, err)
	}
	if next := fc.partition(0).Object(0).Next; next != 6 {
		t.Fatalf("partition ends at %d; want 6", next)
	}
	if n, err := m.SlowPath(ctx, time.Now().Add(time.Minute)); err != nil || n != 0 {
		t.Fatalf("second round: %d files, %v; want none (the unreadable file stays in the backlog)", n, err)
	}
}

// TestSlowPathSurvivesAHungStore: every store call hangs; the slow path returns an error after
// its call timeout instead of stalling for good, and commits once the store answers again.
func TestSlowPathSurvivesAHungStore(t *testing.T) {
	dir, fc := ghostSetup(t)
	w := ghostWriter(t, dir, fc, "7-ghost")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	writeLazy(t, ctx, w, "x")
	faulty := objstore.NewFaulty(dir, 1)
	faulty.Set(objstore.Faults{TimeoutRate: 1})
	m := newTestMaintainer(faulty, fc, MaintainerConfig{CallTimeout: 100 * time.Millisecond})
	if n, err := m.SlowPath(ctx, time.Now().Add(time.Minute)); !errors.Is(err, context.DeadlineExceeded) || n != 0 {
		t.Fatalf("slow path on a hung store: %d files, %v; want a deadline error", n, err)
	}
	faulty.Set(objstore.Faults{})
	if n, err := m.SlowPath(ctx, time.Now().Add(time.Minute)); err != nil || n != 1 {
		t.Fatalf("slow path once the store answers: %d files, %v; want 1", n, err)
	}
}

// TestSlowPathShared: the live processes share the slow path's runs: each commits the files of
// the runs SlowPathOwner gives it, and together they commit every run's.
func TestSlowPathShared(t *testing.T) {
	dir, fc := ghostSetup(t)
	fc.propose(context.Background(), &controller.Command{Op: controller.OpRegister, Register: &controller.Register{Node: 2, Run: "2-test", Level: controller.Level}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	runs := []string{"7-a", "8-b", "9-c", "10-d", "11-e", "12-f"}
	owned := map[int32]int{}
	for _, run := range runs {
		writeLazy(t, ctx, ghostWriter(t, dir, fc, run), run)
		owned[SlowPathOwner(run, []int32{1, 2})]++
	}
	if owned[1] == 0 || owned[2] == 0 {
		t.Fatalf("runs per owner: %v; want both processes to get some (pick other run names)", owned)
	}
	total := 0
	for _, node := range []int32{1, 2} {
		m := newTestMaintainer(dir, fc, MaintainerConfig{})
		m.cfg.Node = node
		n, err := m.SlowPath(ctx, time.Now().Add(time.Minute))
		if err != nil || n != owned[node] {
			t.Fatalf("node %d's slow path: %d files, %v; want the %d of its runs", node, n, err, owned[node])
		}
		total += n
	}
	if next := fc.partition(0).Object(0).Next; next != int64(len(runs)) || total != len(runs) {
		t.Fatalf("partition ends at %d after %d slow commits; want %d", next, total, len(runs))
	}
}

// TestCommitsStayInOrderAfterAnOutage: an idempotent producer's lazy batches wait for their
// commits while the controller is away; when it answers again, the same producer's next batch,
// eager now, is committed after them (not refused as out of sequence, which would make the
// producer bump its epoch and store a retried record twice), and every record is at its place.
func TestCommitsStayInOrderAfterAnOutage(t *testing.T) {
	dir := testDir(t)
	fc := newFakeController(t, 1)
	fc.refuse = 1 << 30
	w := startWriter(t, fc, WriterConfig{Store: dir, BatchTimeout: time.Hour, LazyCommitPatience: 50 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	ref := controller.PartitionRef{Topic: topic}
	for i := range 5 {
		b := testBatch(6, int32(i), fmt.Sprint(i))
		h, _ := batch.ParseHeader(b)
		p := w.Append(ref, b, h, true)
		w.Flush()
		if base, err := p.Wait(ctx); base != -1 || err != nil {
			t.Fatalf("lazy batch %d: %d, %v", i, base, err)
		}
	}
	for w.PendingCommits() < 4 {
		if ctx.Err() != nil {
			t.Fatalf("%d commits waiting", w.PendingCommits())
		}
		time.Sleep(10 * time.Millisecond)
	}
	fc.mu.Lock()
	fc.refuse = 0
	fc.mu.Unlock()
	b := testBatch(6, 5, "5")
	h, _ := batch.ParseHeader(b)
	p := w.Append(ref, b, h, false)
	w.Flush()
	if base, err := p.Wait(ctx); base != 5 || err != nil {
		t.Fatalf("the eager batch after the outage: base %d, %v; want 5", base, err)
	}
	data, err := NewCache(dir, 1<<20, nil).Read(ctx, fc.partition(0).Object(0), 0, 1<<20, true)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	eachRecord(data, func(off, _ int64) bool { got = append(got, fmt.Sprint(off)); return true })
	if fmt.Sprint(got) != "[0 1 2 3 4 5]" {
		t.Fatalf("records at %v; want [0 1 2 3 4 5]", got)
	}
}

// ghostSetup is a store and a controller that refuses every commit, for slow path tests.
func ghostSetup(t *testing.T) (*objstore.Dir, *fakeController) {
	dir := testDir(t)
	fc := newFakeController(t, 1)
	fc.refuse = 1 << 30
	return dir, fc
}

// ghostWriter is a writer of run (node: the run's prefix) whose files are flushed only on
// demand; it is closed at the test's end, without waiting for its (refused) commits.
func ghostWriter(t *testing.T, dir objstore.Store, fc *fakeController, run string) *Writer {
	w := NewWriter(WriterConfig{Store: dir, Commit: fc.commit, Node: runNode(run), Run: run, Incarnation: func() uint64 { return 0 },
		BatchTimeout: time.Hour})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		w.Close(ctx)
	})
	return w
}

// writeLazy writes one file holding a plain lazy batch of value to partition 0, and waits for
// its answer.
func writeLazy(t *testing.T, ctx context.Context, w *Writer, value string) {
	t.Helper()
	b := testBatch(-1, -1, value)
	h, _ := batch.ParseHeader(b)
	p := w.Append(controller.PartitionRef{Topic: topic}, b, h, true)
	w.Flush()
	if _, err := p.Wait(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestRipcordGivesUpEagerSections: a file with an eager and a lazy section waits for its
// commit when the process enters Ripcord mode: the eager batch fails at once (retriable; its
// retry will be lazy), and when the controller answers again the file is committed with its
// lazy section only, so the eager batch is never stored.
func TestRipcordGivesUpEagerSections(t *testing.T) {
	dir := testDir(t)
	fc := newFakeController(t, 2)
	fc.refuse = 1 << 30
	var ripcord atomic.Bool
	w := startWriter(t, fc, WriterConfig{Store: dir, BatchTimeout: time.Hour, Ripcording: ripcord.Load})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	eagerB, lazyB := testBatch(5, 0, "e"), testBatch(6, 0, "l")
	eh, _ := batch.ParseHeader(eagerB)
	lh, _ := batch.ParseHeader(lazyB)
	ep := w.Append(controller.PartitionRef{Topic: topic, Partition: 0}, eagerB, eh, false)
	lp := w.Append(controller.PartitionRef{Topic: topic, Partition: 1}, lazyB, lh, true)
	w.Flush()
	if base, err := lp.Wait(ctx); base != -1 || err != nil {
		t.Fatalf("lazy batch: %d, %v", base, err)
	}
	time.Sleep(100 * time.Millisecond)
	select {
	case <-ep.done:
		t.Fatalf("the eager batch was answered with the controller away and no Ripcord: %d, %v", ep.base, ep.err)
	default:
	}
	ripcord.Store(true)
	wctx, wcancel := context.WithTimeout(ctx, 2*time.Second)
	defer wcancel()
	if _, err := ep.Wait(wctx); !errors.Is(err, kerr.RequestTimedOut) {
		t.Fatalf("the eager batch in Ripcord mode: %v; want a prompt retriable error", err)
	}
	fc.mu.Lock()
	fc.refuse = 0
	fc.mu.Unlock()
	for w.PendingCommits() > 0 || fc.partition(0).Object(1).Next == 0 {
		if ctx.Err() != nil {
			t.Fatalf("the file was not committed: %d waiting", w.PendingCommits())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if p0, p1 := fc.partition(0).Object(0).Next, fc.partition(0).Object(1).Next; p0 != 0 || p1 != 1 {
		t.Fatalf("after the commit: the eager partition ends at %d, the lazy one at %d; want 0 and 1", p0, p1)
	}
}

// TestRipcordEndsAHangingCommit: a commit attempt hangs (the controller paused, its answer never
// comes) when the process enters Ripcord mode: the eager batches waiting on it, and those of the
// file queued behind it, fail at once (retriable), not after the attempt's 5 s, and are never
// stored.
func TestRipcordEndsAHangingCommit(t *testing.T) {
	dir := testDir(t)
	fc := newFakeController(t, 2)
	fc.hang = true
	var ripcord atomic.Bool
	w := startWriter(t, fc, WriterConfig{Store: dir, BatchTimeout: time.Hour, Ripcording: ripcord.Load})
	var commits atomic.Int32
	w.SetHooks(nil, func(string) { commits.Add(1) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var waits []*Pending
	for i, v := range []string{"a", "b"} {
		b := testBatch(-1, -1, v)
		h, _ := batch.ParseHeader(b)
		waits = append(waits, w.Append(controller.PartitionRef{Topic: topic, Partition: int32(i)}, b, h, false))
		w.Flush() // a file each: the second waits behind the first's commit
	}
	time.Sleep(300 * time.Millisecond)
	for i, p := range waits {
		select {
		case <-p.done:
			t.Fatalf("eager batch %d was answered with the controller paused and no Ripcord: %d, %v", i, p.base, p.err)
		default:
		}
	}
	ripcord.Store(true)
	since := time.Now()
	wctx, wcancel := context.WithTimeout(ctx, 2*time.Second)
	defer wcancel()
	for i, p := range waits {
		if _, err := p.Wait(wctx); !errors.Is(err, kerr.RequestTimedOut) {
			t.Fatalf("eager batch %d in Ripcord mode: %v after %v; want a prompt retriable error", i, err, time.Since(since))
		}
	}
	// The controller answers again, and Ripcord ends: both files are committed without their
	// failed batches, which the producers' retries bring (a batch both failed and stored would
	// be twice), the second one too although it never tried its eager form.
	ripcord.Store(false)
	fc.mu.Lock()
	fc.hang = false
	fc.mu.Unlock()
	for commits.Load() < 2 {
		if ctx.Err() != nil {
			t.Fatalf("the files were not committed: %d of 2", commits.Load())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if p0, p1 := fc.partition(0).Object(0).Next, fc.partition(0).Object(1).Next; p0 != 0 || p1 != 0 {
		t.Fatalf("after the commits: the partitions end at %d and %d; want 0 and 0", p0, p1)
	}
}

// gaugedStore counts the GETs in flight at once, each taking delay.
type gaugedStore struct {
	objstore.Store
	delay         time.Duration
	inflight, max atomic.Int64
	gets, bytes   atomic.Int64
}

func (g *gaugedStore) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	now := g.inflight.Add(1)
	defer g.inflight.Add(-1)
	for {
		m := g.max.Load()
		if now <= m || g.max.CompareAndSwap(m, now) {
			break
		}
	}
	g.gets.Add(1)
	time.Sleep(g.delay)
	b, err := g.Store.GetRange(ctx, key, off, n)
	g.bytes.Add(int64(len(b)))
	return b, err
}

// TestReadOverlapsGets: a read over many small files (a partition written during a Ripcord
// outage) and a fetch of many partitions have their GETs in flight together, within bounds, and
// still return the batches in order.
func TestReadOverlapsGets(t *testing.T) {
	dir := testDir(t)
	store := &gaugedStore{Store: dir, delay: 20 * time.Millisecond}
	ctx := context.Background()
	const files = 3 * readAhead
	parts := []*objtopic.Partition{{}, {}}
	for i := range files {
		key := fmt.Sprintf("f%03d", i)
		var body []byte
		for _, p := range parts {
			b := testBatch(-1, 0, fmt.Sprintf("v%d", i))
			p.Extents = append(p.Extents, objtopic.Extent{File: key, Offset: uint64(len(body)), Length: uint32(len(b)),
				Base: int64(i), Last: int64(i)})
			body = append(body, b...)
		}
		if err := dir.Put(ctx, key, body); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range parts {
		p.Next = files
	}

	c := NewCache(store, 0, nil)
	start := time.Now()
	data, err := c.Read(ctx, parts[0], 1, 1<<20, true)
	if err != nil {
		t.Fatal(err)
	}
	var offsets []int64
	if err := eachRecord(data, func(off, _ int64) bool { offsets = append(offsets, off); return true }); err != nil {
		t.Fatal(err)
	}
	if len(offsets) != files-1 || offsets[0] != 1 || offsets[len(offsets)-1] != files-1 {
		t.Fatalf("read offsets %v, want 1..%d", offsets, files-1)
	}
	if m := store.max.Load(); m < 2 || m > concurrentGets {
		t.Fatalf("%d GETs in flight at most, want 2..%d", m, concurrentGets)
	}
	if g := store.gets.Load(); g != files-1 {
		t.Fatalf("%d GETs for %d sections", g, files-1)
	}
	t.Logf("%d sections in %v (%d GETs at once at most)", files-1, time.Since(start), store.max.Load())

	// A small read reads ahead no further than it needs.
	data, err = c.Read(ctx, parts[1], 0, 1, true)
	if err != nil || len(data) == 0 {
		t.Fatalf("read: %d bytes, %v", len(data), err)
	}
	if g := store.gets.Load(); g != files {
		t.Fatalf("a read of one batch made %d GETs", g-(files-1))
	}

	// A fetch's prefetch reads both partitions' sections of a file with one GET, and each
	// read then finds its own (a fresh cache; partition 0 from offset 2, partition 1 from 1:
	// their next sections lie side by side in files f002 and after).
	c = NewCache(store, 0, nil)
	before := store.gets.Load()
	c.Prefetch([]PrefetchRead{{parts[0], 2, 1}, {parts[1], 2, 1}, {parts[1], 2, 1}})
	for i, p := range parts {
		data, err := c.Read(ctx, p, 2, 1, true)
		var got []string
		if err == nil {
			err = eachRecordValue(data, func(v string) { got = append(got, v) })
		}
		if err != nil || len(got) != 1 || got[0] != "v2" {
			t.Fatalf("partition %d after the prefetch: %v, %v", i, got, err)
		}
	}
	if g := store.gets.Load() - before; g != 1 {
		t.Fatalf("two partitions' sections of one file: %d GETs, want 1", g)
	}
}

// eachRecordValue calls fn with the value of each record of data's batches.
func eachRecordValue(data []byte, fn func(string)) error {
	for len(data) > 0 {
		size, err := batch.Split(data)
		if err != nil {
			return err
		}
		h, err := batch.ParseHeader(data[:size])
		if err != nil {
			return err
		}
		if err := batch.EachRecord(&h, data[:size], func(r *batch.Record) { fn(string(r.Value)) }); err != nil {
			return err
		}
		data = data[size:]
	}
	return nil
}

// TestTimesOfALogAppendTimeBatch: a batch stamped with the broker's time (LogAppendTime) keeps
// its records' create times; ListOffsets by time and MAX_TIMESTAMP go by the broker's time, as
// the local log does.
func TestTimesOfALogAppendTimeBatch(t *testing.T) {
	dir := testDir(t)
	fc := newFakeController(t, 1)
	w := newTestWriter(t, dir, fc, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b := testBatch(-1, 0, "a", "b") // create times 1000 and 1001
	batch.SetLogAppendTime(b, 5000)
	writeEager(t, ctx, w, controller.PartitionRef{Topic: topic}, b)
	part := fc.partition(0).Object(0)
	c := NewCache(dir, 1<<20, nil)
	if off, ts, err := c.OffsetForTime(ctx, part, 3000); off != 0 || ts != 5000 || err != nil {
		t.Errorf("OffsetForTime(3000) = %d, %d, %v; want 0, 5000 (both records are at 5000)", off, ts, err)
	}
	if off, ts, err := c.MaxTimestamp(ctx, part); off != 0 || ts != 5000 || err != nil {
		t.Errorf("MaxTimestamp = %d, %d, %v; want 0, 5000", off, ts, err)
	}
}

// TestModeChangeSplitsAPartitionsBatches: a lazy batch arriving while an eager (here
// transactional) batch of the same partition is buffered goes in a file of its own. In one
// lazy section the transactional batch was answered at the write and then refused by the lazy
// commit: acknowledged and never stored.
func TestModeChangeSplitsAPartitionsBatches(t *testing.T) {
	dir := testDir(t)
	fc := newFakeController(t, 1)
	w := startWriter(t, fc, WriterConfig{Store: dir, BatchTimeout: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b := testBatch(5, 0, "txn")
	h, _ := batch.ParseHeader(b)
	body, _ := batch.Records(&h, b)
	h.Attributes |= batch.AttrTransactional
	b = batch.AppendBatch(nil, h, body)
	h, _ = batch.ParseHeader(b)
	ref := controller.PartitionRef{Topic: topic, Partition: 0}
	txn := w.Append(ref, b, h, false) // eager: before the process went into Ripcord
	lb := testBatch(-1, 0, "plain")
	lh, _ := batch.ParseHeader(lb)
	lazy := w.Append(ref, lb, lh, true) // lazy: in Ripcord
	w.Flush()
	if base, err := txn.Wait(ctx); base != 0 || err != nil {
		t.Fatalf("the transactional batch: %d, %v; want committed at 0", base, err)
	}
	if base, err := lazy.Wait(ctx); base != -1 || err != nil {
		t.Fatalf("the lazy batch: %d, %v; want answered at the write (-1)", base, err)
	}
	for fc.partition(0).Object(0).Next < 2 {
		if ctx.Err() != nil {
			t.Fatalf("the lazy batch was not committed after the transactional one: partition ends at %d", fc.partition(0).Object(0).Next)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSlowPathSkipsWhatItCommitted: a run whose first file number was never written (its write
// failed) keeps a committed prefix of 0. Each round of the slow path lists its journal from
// there, at most slowPathPages pages; it must go on past the files it committed already, or the
// files beyond the first pages are never committed.
func TestSlowPathSkipsWhatItCommitted(t *testing.T) {
	defer func(p, n int) { slowPathPage, slowPathPages = p, n }(slowPathPage, slowPathPages)
	slowPathPage, slowPathPages = 2, 2
	dir, fc := ghostSetup(t)
	w := ghostWriter(t, dir, fc, "7-ghost")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 8 {
		writeLazy(t, ctx, w, fmt.Sprint(i))
	}
	if err := dir.Delete(ctx, JournalKey("7-ghost", 1)); err != nil { // as if its write had failed
		t.Fatal(err)
	}
	m := newTestMaintainer(dir, fc, MaintainerConfig{})
	for round := range 5 {
		if _, err := m.SlowPath(ctx, time.Now().Add(time.Duration(round+1)*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	if next := fc.partition(0).Object(0).Next; next != 7 {
		t.Fatalf("partition ends at %d; want the 7 acknowledged records of files 2-8", next)
	}
}

// TestStaleMixedFileCommitsItsLazySections: a file of eager and lazy sections whose commit is
// refused as stale (the node registered again between the file's flush and its commit) fails
// its eager batches, and commits its lazy ones (acknowledged at the write) itself, before the
// writer's next file: left to the slow path, they came 30 s later and after newer records of
// the same producer.
func TestStaleMixedFileCommitsItsLazySections(t *testing.T) {
	dir := testDir(t)
	fc := newFakeController(t, 2)
	var inc atomic.Uint64
	inc.Store(1)
	w := startWriter(t, fc, WriterConfig{Store: dir, Incarnation: inc.Load, BatchTimeout: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The node registers again (the same run): a new incarnation in the image, the writer's
	// still the old one.
	fc.mu.Lock()
	fc.index++
	r := controller.Apply(fc.img, fc.index, &controller.Command{Op: controller.OpRegister, Register: &controller.Register{Node: 1, Run: "1-test", Level: controller.Level}})
	fc.mu.Unlock()
	e := testBatch(-1, 0, "eager")
	eh, _ := batch.ParseHeader(e)
	l0 := testBatch(9, 0, "lazy-seq0")
	l0h, _ := batch.ParseHeader(l0)
	ep := w.Append(controller.PartitionRef{Topic: topic, Partition: 0}, e, eh, false)
	lp := w.Append(controller.PartitionRef{Topic: topic, Partition: 1}, l0, l0h, true)
	w.Flush()
	if _, err := lp.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := ep.Wait(ctx); !errors.Is(err, kerr.RequestTimedOut) {
		t.Fatalf("the eager batch of the stale file: %v; want a retriable timeout", err)
	}
	inc.Store(uint64(r.Value))
	l1 := testBatch(9, 1, "lazy-seq1")
	l1h, _ := batch.ParseHeader(l1)
	lp1 := w.Append(controller.PartitionRef{Topic: topic, Partition: 1}, l1, l1h, true)
	w.Flush()
	if _, err := lp1.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	// PendingCommits counts the files queued, not one being committed (nor one whose lazy
	// batches were answered just before it was queued): wait for the partition too.
	for w.PendingCommits() > 0 || fc.partition(0).Object(1).Next < 2 {
		if ctx.Err() != nil {
			t.Fatalf("the writer's files are still waiting for their commits (%d queued; partition 1 ends at %d)",
				w.PendingCommits(), fc.partition(0).Object(1).Next)
		}
		time.Sleep(10 * time.Millisecond)
	}
	p := fc.partition(0).Object(1)
	data, err := NewCache(dir, 1<<20, nil).Read(ctx, p, 0, 1<<20, true)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	eachRecordValue(data, func(v string) { got = append(got, v) })
	if fmt.Sprint(got) != "[lazy-seq0 lazy-seq1]" {
		t.Fatalf("partition 1 holds %v; want the acknowledged lazy records in the writer's order, [lazy-seq0 lazy-seq1]", got)
	}
	if n := fc.partition(0).Object(0).Next; n != 0 {
		t.Fatalf("partition 0 holds %d records; the stale file's eager batch failed and must not be stored", n)
	}
}

// afterList is a store that runs a hook once after its first listing of a prefix: what another
// process does between a garbage collection's listing and its deletes.
type afterList struct {
	objstore.Store
	prefix string
	hook   func()
	once   sync.Once
}

func (s *afterList) List(ctx context.Context, prefix, startAfter string, limit int) ([]objstore.Object, error) {
	objs, err := s.Store.List(ctx, prefix, startAfter, limit)
	if prefix == s.prefix {
		s.once.Do(s.hook)
	}
	return objs, err
}

// TestGCKeepsAMarkerWrittenAfterItsListing: a run the controller never heard of (Ripcord),
// idle so long its marker is old and its files are gone, announces itself again and writes a
// file while a garbage collection runs, after the collection listed the markers. The
// collection deletes the old marker it listed, not the new one, so the slow path still finds
// the run and commits the acknowledged file. With one marker key per run, the new announcement
// replaced the listed object and was deleted with it.
func TestGCKeepsAMarkerWrittenAfterItsListing(t *testing.T) {
	dir, fc := ghostSetup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := dir.Put(ctx, RunKey("7-ghost", time.Now().Add(-time.Hour)), []byte("node 7\n")); err != nil {
		t.Fatal(err) // the run's marker from long ago
	}
	w := ghostWriter(t, dir, fc, "7-ghost")
	later := time.Now().Add(time.Hour) // the old marker is past the grace period
	store := &afterList{Store: dir, prefix: "runs/", hook: func() { writeLazy(t, ctx, w, "acknowledged") }}
	m := newTestMaintainer(store, fc, MaintainerConfig{})
	if _, err := m.GC(ctx, later); err != nil {
		t.Fatal(err)
	}
	markers, err := dir.List(ctx, "runs/", "", 0)
	if err != nil || len(markers) != 1 || MarkerRun(markers[0].Key) != "7-ghost" {
		t.Fatalf("markers after the collection: %v, %v; want the run's new one", markers, err)
	}
	if n, err := m.SlowPath(ctx, later); err != nil || n != 1 {
		t.Fatalf("slow path: %d files, %v; want the run's acknowledged file", n, err)
	}
	if next := fc.partition(0).Object(0).Next; next != 1 {
		t.Fatalf("partition ends at %d; want the acknowledged record", next)
	}
}
