package speclog_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/runnel-dev/runnel/internal/speclog/speclogtest"
	"github.com/runnel-dev/runnel/speclog"
	pb "github.com/runnel-dev/runnel/speclog/speclogpb"
)

// TestSpecLogEndToEnd: on the one-node default, appends through the SpecLog API and Kafka
// producers get positions; a subscriber from 0 sees every record once, in position order,
// speculative first and confirmed after; Read returns the confirmed records in the same order;
// Kafka consumers read each partition's records (the no-op entries skipped); Trim moves the
// start of every shard.
func TestSpecLogEndToEnd(t *testing.T) {
	n := speclogtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	log := n.Log(ctx, t, "orders", 3)
	d, err := log.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Shards) != 3 || d.WindowCuts != 100 || d.Interval != time.Millisecond {
		t.Fatalf("description %+v", d)
	}

	sub := log.Subscribe(ctx, 0, speclog.SubscribeOptions{})
	const perShard = 200
	var mu sync.Mutex
	appended := map[uint64]string{} // position → value
	var wg sync.WaitGroup
	for sh := range int32(3) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perShard {
				v := fmt.Sprintf("s%d-%d", sh, i)
				pos, err := log.Append(ctx, sh, speclog.Record{Key: []byte("k"), Value: []byte(v), Headers: []speclog.Header{{Key: "h", Value: []byte(v)}}})
				if err != nil {
					t.Errorf("append %s: %v", v, err)
					return
				}
				mu.Lock()
				if prev, dup := appended[pos]; dup {
					t.Errorf("position %d given to %s and %s", pos, prev, v)
				}
				appended[pos] = v
				mu.Unlock()
			}
		}()
	}
	// Kafka producers append to the same shards, unchanged.
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Kafka), kgo.DefaultProduceTopic("orders"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range 30 {
		r := &kgo.Record{Partition: int32(i % 3), Value: []byte(fmt.Sprintf("kafka-%d", i))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("kafka produce: %v", err)
		}
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	want := len(appended) + 30
	// The node measured every answered append's stages.
	for _, stage := range []string{"durable", "sequenced"} {
		if got := appendStageCount(t, n.S.AdminAddr(), stage); got < float64(len(appended)) {
			t.Errorf("runnel_speclog_append_stage_seconds_count{stage=%q} = %v after %d appends", stage, got, len(appended))
		}
	}

	// The subscriber: every record once, positions increasing, confirmed in the end.
	var got []speclog.Event
	var confirmed uint64
	spec := 0
	for len(got) < want || confirmed <= got[len(got)-1].Position {
		ev, err := sub.Next()
		if err != nil {
			t.Fatalf("after %d of %d records: %v", len(got), want, err)
		}
		switch ev.Kind {
		case speclog.EventRecord:
			if len(got) > 0 && ev.Position <= got[len(got)-1].Position {
				t.Fatalf("position %d after %d", ev.Position, got[len(got)-1].Position)
			}
			if ev.Speculative {
				spec++
			}
			got = append(got, ev)
		case speclog.EventConfirm:
			confirmed = ev.UpTo
		case speclog.EventFail:
			t.Fatalf("a fail notice with no failure: %+v", ev)
		}
	}
	kafkaSeen := 0
	for _, ev := range got {
		v := string(ev.Record.Value)
		if w, ok := appended[ev.Position]; ok && w != v {
			t.Fatalf("position %d holds %q; the append of %q got it", ev.Position, v, w)
		}
		if _, ok := appended[ev.Position]; !ok {
			kafkaSeen++
		} else if len(ev.Record.Headers) != 1 || string(ev.Record.Headers[0].Value) != v {
			t.Fatalf("position %d headers %+v", ev.Position, ev.Record.Headers)
		}
	}
	if kafkaSeen != 30 {
		t.Fatalf("%d records produced through Kafka seen; want 30", kafkaSeen)
	}
	t.Logf("%d records, %d delivered speculatively, confirmed up to %d", len(got), spec, confirmed)

	// Read: the confirmed records, in the same order.
	var read []speclog.Event
	for from := uint64(0); len(read) < len(got); {
		evs, next, err := log.Read(ctx, from, 100)
		if err != nil {
			t.Fatal(err)
		}
		if next == from {
			t.Fatalf("Read stalled at %d with %d of %d records", from, len(read), len(got))
		}
		read, from = append(read, evs...), next
	}
	for i := range got {
		if read[i].Position != got[i].Position || string(read[i].Record.Value) != string(got[i].Record.Value) || read[i].Speculative {
			t.Fatalf("read %d: %d %q; subscribed %d %q", i, read[i].Position, read[i].Record.Value, got[i].Position, got[i].Record.Value)
		}
	}

	// Kafka consumers: each partition's records in order, no-op entries skipped.
	cons, err := kgo.NewClient(kgo.SeedBrokers(n.Kafka), kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	perPartition := map[int32][]string{}
	for seen := 0; seen < want; {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			perPartition[r.Partition] = append(perPartition[r.Partition], string(r.Value))
			seen++
		})
	}
	for p, vs := range perPartition {
		var ours []string
		for _, v := range vs {
			if v[0] == 's' {
				ours = append(ours, v)
			}
		}
		for i, v := range ours {
			if v != fmt.Sprintf("s%d-%d", p, i) {
				t.Fatalf("partition %d record %d is %q", p, i, v)
			}
		}
	}

	// Trim: positions below the middle go, on every shard.
	mid := got[len(got)/2].Position
	if err := log.Trim(ctx, mid); err != nil {
		t.Fatal(err)
	}
	if d, err = log.Describe(ctx); err != nil || d.Trimmed != mid {
		t.Fatalf("after Trim(%d): %+v, %v", mid, d, err)
	}
	if _, _, err := log.Read(ctx, 0, 10); err == nil {
		t.Fatal("Read from a trimmed position succeeded")
	}
	evs, _, err := log.Read(ctx, mid, 1)
	if err != nil || len(evs) != 1 || evs[0].Position != mid {
		t.Fatalf("Read(%d) after the trim = %+v, %v", mid, evs, err)
	}
	ends, err := kadm.NewClient(cl).ListStartOffsets(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	var starts []int64
	ends.Each(func(o kadm.ListedOffset) { starts = append(starts, o.Offset) })
	if slices.Contains(starts, 0) {
		t.Fatalf("log start offsets after the trim: %v", starts)
	}
}

// TestSpecLogShardFailure: a shard that stops (its runner frozen, as a whole shard failing) is
// failed by the sequencer after runnel.order.fail.ms: the subscriber gets a fail notice, and
// what it keeps after rolling back (every record before the notice's position, then what
// follows) is exactly the confirmed log Read returns; every acknowledged append is in it at the
// position its append returned; the shard joins again and takes appends.
func TestSpecLogShardFailure(t *testing.T) {
	n := speclogtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	log := n.Log(ctx, t, "fraud", 3)
	sub := log.Subscribe(ctx, 0, speclog.SubscribeOptions{})
	var kept []speclog.Event // the subscriber's view: rolled back at each fail notice
	var fails int
	var confirmed uint64
	var subMu sync.Mutex
	subDone := make(chan struct{})
	go func() {
		defer close(subDone)
		for {
			ev, err := sub.Next()
			if err != nil {
				return
			}
			subMu.Lock()
			switch ev.Kind {
			case speclog.EventRecord:
				if len(kept) > 0 && ev.Position <= kept[len(kept)-1].Position {
					t.Errorf("position %d after %d without a fail notice", ev.Position, kept[len(kept)-1].Position)
				}
				kept = append(kept, ev)
			case speclog.EventFail:
				fails++
				if ev.After < confirmed {
					t.Errorf("fail after %d, below the confirmed %d", ev.After, confirmed)
				}
				i := sort.Search(len(kept), func(i int) bool { return kept[i].Position >= ev.After })
				kept = kept[:i]
			case speclog.EventConfirm:
				confirmed = ev.UpTo
			}
			subMu.Unlock()
		}
	}()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	acked := map[uint64]string{}
	for sh := range int32(3) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				v := fmt.Sprintf("s%d-%d", sh, i)
				pos, err := log.Append(ctx, sh, speclog.Record{Value: []byte(v)})
				if err != nil {
					t.Errorf("append %s: %v", v, err)
					return
				}
				mu.Lock()
				acked[pos] = v
				mu.Unlock()
				time.Sleep(time.Millisecond)
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	n.Stall(t, "fraud", 1, 300*time.Millisecond)
	time.Sleep(1200 * time.Millisecond)
	close(stop)
	wg.Wait()
	d, err := log.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d.View == 0 || d.Shards[1].Failed {
		t.Fatalf("after the stall: view %d, shard 1 failed %v (want a view change and shard 1 back)", d.View, d.Shards[1].Failed)
	}
	if _, err := log.Append(ctx, 1, speclog.Record{Value: []byte("after")}); err != nil {
		t.Fatalf("append to the shard that came back: %v", err)
	}
	// Everything confirmed: the subscriber's kept records must be the confirmed log.
	d, _ = log.Describe(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for {
		subMu.Lock()
		c := confirmed
		subMu.Unlock()
		if c >= d.Confirmed || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	var read []speclog.Event
	for from := uint64(0); from < d.Confirmed; {
		evs, next, err := log.Read(ctx, from, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if next == from {
			break
		}
		read, from = append(read, evs...), next
	}
	byPos := map[uint64]string{}
	for _, e := range read {
		byPos[e.Position] = string(e.Record.Value)
	}
	mu.Lock()
	for pos, v := range acked {
		if byPos[pos] != v {
			t.Fatalf("acknowledged %q at %d; the log has %q there", v, pos, byPos[pos])
		}
	}
	mu.Unlock()
	cancel()
	<-subDone
	subMu.Lock()
	defer subMu.Unlock()
	if fails == 0 { // legitimate when the subscriber had delivered nothing past the confirmed prefix then
		t.Logf("no fail notice: the subscriber was not ahead of the confirmed prefix when the shard failed")
	}
	var keptConfirmed []speclog.Event
	for _, e := range kept {
		if e.Position < d.Confirmed {
			keptConfirmed = append(keptConfirmed, e)
		}
	}
	if len(keptConfirmed) != len(read) {
		t.Fatalf("the subscriber kept %d confirmed records; the log has %d", len(keptConfirmed), len(read))
	}
	for i := range read {
		if keptConfirmed[i].Position != read[i].Position || string(keptConfirmed[i].Record.Value) != string(read[i].Record.Value) {
			t.Fatalf("record %d: kept %d %q, log %d %q", i, keptConfirmed[i].Position, keptConfirmed[i].Record.Value, read[i].Position, read[i].Record.Value)
		}
	}
	t.Logf("view %d, %d fail notices, %d acknowledged appends, %d confirmed records", d.View, fails, len(acked), len(read))
}

// TestIdempotentAppends: an append carrying a producer id and sequence numbers is stored once
// however often it is sent (a retry gets the first append's positions); one whose sequence
// skips ahead is refused (ABORTED) and stores nothing; and the client's appends, concurrent on
// one shard, are each stored exactly once.
func TestIdempotentAppends(t *testing.T) {
	n := speclogtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	log := n.Log(ctx, t, "once", 2)
	cc, err := grpc.NewClient(n.S.SpecLogAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	api := pb.NewSpecLogClient(cc)
	p, err := api.InitProducer(ctx, &pb.InitProducerRequest{})
	if err != nil {
		t.Fatal(err)
	}
	pid := p.GetProducerId()
	req := &pb.AppendRequest{Topic: "once", Shard: 1, ProducerId: &pid, ProducerEpoch: p.GetProducerEpoch(),
		Records: []*pb.Record{{Value: []byte("a")}, {Value: []byte("b")}}}
	first, err := api.Append(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	again, err := api.Append(ctx, req) // a retry: the answer of the first was lost
	if err != nil || !slices.Equal(again.GetPositions(), first.GetPositions()) {
		t.Fatalf("the retry: %v, %v; want the first append's positions %v", again.GetPositions(), err, first.GetPositions())
	}
	skip := &pb.AppendRequest{Topic: "once", Shard: 1, ProducerId: &pid, BaseSequence: 7, Records: []*pb.Record{{Value: []byte("gap")}}}
	if _, err := api.Append(ctx, skip); status.Code(err) != codes.Aborted {
		t.Fatalf("an append whose sequence skips ahead: %v; want ABORTED", err)
	}

	// The client: 8 appenders on shard 0 at once, each append once.
	var wg sync.WaitGroup
	var mu sync.Mutex
	positions := map[uint64]string{}
	for g := range 8 {
		wg.Go(func() {
			for i := range 40 {
				v := fmt.Sprintf("g%d-%d", g, i)
				pos, err := log.Append(ctx, 0, speclog.Record{Value: []byte(v)})
				if err != nil {
					t.Errorf("append %s: %v", v, err)
					return
				}
				mu.Lock()
				positions[pos] = v
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	var values []string
	for from := uint64(0); ; {
		d, err := log.Describe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if from >= d.Confirmed {
			if len(values) >= 2+8*40 {
				break
			}
			time.Sleep(20 * time.Millisecond)
			continue
		}
		evs, next, err := log.Read(ctx, from, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			values = append(values, string(e.Record.Value))
			if v, ok := positions[e.Position]; ok && v != string(e.Record.Value) {
				t.Fatalf("position %d holds %q; its append was %q", e.Position, e.Record.Value, v)
			}
		}
		from = next
	}
	slices.Sort(values)
	if len(values) != 2+8*40 || len(slices.Compact(slices.Clone(values))) != len(values) {
		t.Fatalf("the log holds %d records (%d distinct); want 2 + 320, each once", len(values), len(slices.Compact(slices.Clone(values))))
	}
	if slices.Contains(values, "gap") {
		t.Fatal("the refused append was stored")
	}
}

// TestBacklogDrainedAtOnce: a batch far larger than runnel.order.drain.cuts quotas on one
// shard is reported at once (a drain), the other shard is signalled to catch up (a lag-fix
// answer, with a no-op entry); with drain.cuts=0 the same batch is reported at the shard's
// pace. The node's metrics say so, with the quotas and the view.
func TestBacklogDrainedAtOnce(t *testing.T) {
	n := speclogtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, c := range []struct {
		topic, drain string
		drains       bool
	}{{"drained", "4", true}, {"paced", "0", false}} {
		// A runner starved past the 50 ms default (the race detector on a loaded machine) would
		// have its shard failed and the view changed; this test is about reports, not failures.
		log := n.Log(ctx, t, c.topic, 2, "runnel.order.drain.cuts", c.drain, "runnel.order.fail.ms", "5000")
		recs := make([]speclog.Record, 400) // 40 cuts of the initial quota 10
		for i := range recs {
			recs[i].Value = []byte(strconv.Itoa(i))
		}
		// Bursts: one made durable while the shard answers a lag-fix or waits for a no-op entry
		// is reported at once on that account, not as a drain, so with drains on they go on
		// (up to 50) until one is drained; without, ten must give none.
		var m map[string]float64
		label := func(name string, shard int) float64 {
			return m[fmt.Sprintf(`%s{shard="%d",topic="%s"}`, name, shard, c.topic)]
		}
		for i := 0; i < 50 && (i < 10 || c.drains && label("runnel_speclog_shard_backlog_drains_total", 0) == 0); i++ {
			ps, err := log.AppendBatch(ctx, 0, recs)
			if err != nil || len(ps) != len(recs) {
				t.Fatalf("%s: appending %d records: %d positions, %v", c.topic, len(recs), len(ps), err)
			}
			time.Sleep(10 * time.Millisecond)
			if i >= 9 {
				m = scrape(t, n.S.AdminAddr())
			}
		}
		drains, lagFixes := label("runnel_speclog_shard_backlog_drains_total", 0), label("runnel_speclog_shard_lag_fix_reports_total", 1)
		if c.drains != (drains > 0) || c.drains && lagFixes == 0 {
			t.Errorf("%s: %v drains on shard 0, %v lag-fix answers on shard 1", c.topic, drains, lagFixes)
		}
		if label("runnel_speclog_shard_reports_total", 0) == 0 || label("runnel_speclog_shard_noop_slots_total", 1) == 0 ||
			m[`runnel_speclog_view{topic="`+c.topic+`"}`] != 0 {
			t.Errorf("%s: metrics %v", c.topic, m)
		}
		// The idle shard 1 may be benched as a straggler now and then (it only pads; quota 0):
		// its quota and bench state are exposed either way.
		for _, name := range []string{"runnel_speclog_shard_quota", "runnel_speclog_shard_benched"} {
			if _, ok := m[fmt.Sprintf(`%s{shard="1",topic="%s"}`, name, c.topic)]; !ok {
				t.Errorf("%s: no %s for shard 1", c.topic, name)
			}
		}
		// A runner on a healthy node follows its member entry by entry: no rebase.
		if v, ok := m[fmt.Sprintf(`runnel_speclog_shard_rebases_total{shard="0",topic="%s"}`, c.topic)]; !ok || v != 0 {
			t.Errorf("%s: runnel_speclog_shard_rebases_total on shard 0: %v (exposed %v); want 0", c.topic, v, ok)
		}
	}
}

// scrape reads the node's metrics: series (name and labels as exposed) → value.
func scrape(t *testing.T, admin string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	out := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		if i := strings.LastIndexByte(line, ' '); i > 0 && !strings.HasPrefix(line, "#") {
			out[line[:i]], _ = strconv.ParseFloat(line[i+1:], 64)
		}
	}
	return out
}

// appendStageCount scrapes the node's count of appends measured at stage.
func appendStageCount(t *testing.T, admin, stage string) float64 {
	t.Helper()
	return scrape(t, admin)[`runnel_speclog_append_stage_seconds_count{stage="`+stage+`"}`]
}

// TestDeleteRecordsTrimsTheLog: a Kafka DeleteRecords on one shard's partition (as its
// retention would) moves the log's trim point up to the end of the shard's last slot deleted,
// so that the total order has no hole: positions below are refused, and the other shards'
// log starts follow to their first slot at or after it.
func TestDeleteRecordsTrimsTheLog(t *testing.T) {
	n := speclogtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	log := n.Log(ctx, t, "sensors", 2)
	var last uint64
	for i := range 100 {
		for sh := range int32(2) {
			pos, err := log.Append(ctx, sh, speclog.Record{Value: fmt.Appendf(nil, "s%d-%d", sh, i)})
			if err != nil {
				t.Fatal(err)
			}
			last = max(last, pos)
		}
	}
	var all []speclog.Event
	for from := uint64(0); from <= last; {
		evs, next, err := log.Read(ctx, from, 1000)
		if err != nil {
			t.Fatal(err)
		}
		all, from = append(all, evs...), next
	}
	var shard0 []speclog.Event
	for _, e := range all {
		if e.Shard == 0 {
			shard0 = append(shard0, e)
		}
	}
	gone := shard0[60] // shard 0's records up to this one are deleted
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Kafka))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	del := kadm.Offsets{}
	del.Add(kadm.Offset{Topic: "sensors", Partition: 0, At: gone.Offset + 1})
	res, err := adm.DeleteRecords(ctx, del)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	want := gone.Position + 1
	var d *speclog.Description
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if d, err = log.Describe(ctx); err == nil && d.Trimmed >= want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the log's trim point after deleting shard 0 up to its slot %d (position %d): %+v, %v", gone.Offset, gone.Position, d, err)
		}
	}
	if d.Trimmed != want {
		t.Fatalf("trim point %d; want %d (after shard 0's last slot deleted)", d.Trimmed, want)
	}
	if _, _, err := log.Read(ctx, want-1, 1); status.Code(err) != codes.OutOfRange {
		t.Fatalf("Read(%d) below the trim point: %v; want OUT_OF_RANGE", want-1, err)
	}
	var next speclog.Event // the first record at or after the trim point
	for _, e := range all {
		if e.Position >= want {
			next = e
			break
		}
	}
	evs, _, err := log.Read(ctx, want, 1000)
	if err != nil || len(evs) == 0 || evs[0].Position != next.Position {
		t.Fatalf("Read(%d) at the trim point: %+v, %v; want the record at %d first", want, evs, err, next.Position)
	}
	// Shard 1 follows: its log start is past its last record below the trim point and at most
	// its first record at or after it.
	var below, above int64 = -1, -1
	for _, e := range all {
		if e.Shard == 1 && e.Position < want {
			below = e.Offset
		} else if e.Shard == 1 && above < 0 {
			above = e.Offset
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		so, err := adm.ListStartOffsets(ctx, "sensors")
		if err != nil {
			t.Fatal(err)
		}
		s1, _ := so.Lookup("sensors", 1)
		if s1.Offset > below && s1.Offset <= above {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("shard 1's log start %d; its last record below the trim point is at %d, its first after at %d", s1.Offset, below, above)
		}
	}
}

// TestReadCutsLargeRecords: a Read answer holds at most about 3 MiB of records (the client
// receives 4 MiB), and Next says where the rest begins; reading on from there gives every
// record once, in order.
func TestReadCutsLargeRecords(t *testing.T) {
	n := speclogtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	log := n.Log(ctx, t, "big", 2)
	big := make([]byte, 900<<10)
	var want []uint64
	for i := range 10 {
		big[0] = byte(i)
		pos, err := log.Append(ctx, int32(i%2), speclog.Record{Value: big})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, pos)
	}
	var got []uint64
	reads := 0
	for from := uint64(0); len(got) < len(want); reads++ {
		evs, next, err := log.Read(ctx, from, 1000)
		if err != nil {
			t.Fatal(err)
		}
		size := 0
		for _, e := range evs {
			size += len(e.Record.Value)
			got = append(got, e.Position)
			if int(e.Record.Value[0]) != len(got)-1 {
				t.Fatalf("record at %d is the %dth appended; want the %dth", e.Position, e.Record.Value[0], len(got)-1)
			}
		}
		if size > 4<<20 || len(evs) == 0 {
			t.Fatalf("a Read from %d answered %d records, %d bytes", from, len(evs), size)
		}
		from = next
	}
	if !slices.Equal(got, want) || reads < 3 {
		t.Fatalf("read %v in %d reads; want %v in at least 3", got, reads, want)
	}
}
