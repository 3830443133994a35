package server_test

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/server"
)

// TestObjectReadsThroughTheFilesOwner: consumers of an object topic on every node of a
// cluster cost no GET of the object store: each node reads a file it does not have from the
// node that wrote it (whose cache holds what it wrote). With peer reads off, the other nodes
// GET it themselves. When the writer is gone, the others still serve every record (from the
// store, or through the node the file now hashes to).
func TestObjectReadsThroughTheFilesOwner(t *testing.T) {
	for _, peers := range []bool{true, false} {
		t.Run(fmt.Sprintf("peers=%v", peers), func(t *testing.T) { testObjectPeerReads(t, peers) })
	}
}

func testObjectPeerReads(t *testing.T, peers bool) {
	store := "file://" + t.TempDir()
	c := startClusterWith(t, 3, func(c *testCluster) {
		c.objectStore, c.batchTimeout = store, 20*time.Millisecond
		c.tune = func(_ int32, cfg *server.Config) { cfg.NoObjectPeerReads = !peers }
	})
	c.waitNodes(3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl, adm := c.client()
	const n = 300
	produce := func(topic string) {
		t.Helper()
		createObjectTopic(t, c.addrs[1], topic, 1, nil)
		for i := range n {
			cl.Produce(ctx, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "%s %d", topic, i)}, nil)
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// readFrom reads the whole partition from one node with Fetch requests sent to it alone.
	readFrom := func(node int32, topic string) {
		t.Helper()
		td, err := adm.ListTopics(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		// A node's image may trail the controller's for a moment (more so right after a node
		// stopped: the others learn the last commits from the next leader), and a fetch at its
		// end is answered empty, as a caught-up consumer is; an empty answer is retried until
		// this deadline.
		deadline := time.Now().Add(15 * time.Second)
		for len(got) < n {
			req := kmsg.NewPtrFetchRequest()
			req.Version, req.MaxWaitMillis, req.MaxBytes, req.ReplicaID = 12, 100, 10<<20, -1
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = topic, td[topic].ID
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = int64(len(got)), 10<<20, -1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := cl.Broker(int(node)).Request(ctx, req)
			if err != nil {
				t.Fatalf("fetch %s from node %d: %v", topic, node, err)
			}
			fr := resp.(*kmsg.FetchResponse)
			if len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 1 {
				t.Fatalf("fetch %s from node %d: %+v", topic, node, fr)
			}
			p := fr.Topics[0].Partitions[0]
			if err := kerr.ErrorForCode(p.ErrorCode); kerr.IsRetriable(err) {
				// e.g. OFFSET_NOT_AVAILABLE: the stopped node led the controller
				time.Sleep(100 * time.Millisecond)
				continue
			} else if err != nil {
				t.Fatalf("fetch %s from node %d at %d: %v", topic, node, len(got), err)
			}
			before := len(got)
			for data := p.RecordBatches; len(data) > 0; {
				size, err := batch.Split(data)
				if err != nil {
					t.Fatal(err)
				}
				h, err := batch.Validate(data[:size])
				if err != nil {
					t.Fatalf("node %d served an invalid batch: %v", node, err)
				}
				recs, err := batch.Records(&h, data[:size])
				if err != nil {
					t.Fatal(err)
				}
				rd := batch.NewRecordReader(recs)
				var rec batch.Record
				for off := h.BaseOffset; rd.Next(&rec); off++ {
					if off >= int64(len(got)) {
						got = append(got, string(rec.Value))
					}
				}
				data = data[size:]
			}
			if len(got) == before {
				if time.Now().After(deadline) {
					t.Fatalf("fetch %s from node %d at %d: nothing for 15 s (high watermark %d)", topic, node, before, p.HighWatermark)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		for i, v := range got {
			if want := fmt.Sprintf("%s %d", topic, i); v != want {
				t.Fatalf("node %d served %q at offset %d; want %q", node, v, i, want)
			}
		}
	}
	gets := func() (sum float64, peerReads float64) {
		for id := int32(1); id <= 3; id++ {
			if s := c.servers[id]; s != nil {
				m := scrape(t, s.AdminAddr())
				sum += m[`runnel_object_requests_total{op="get"}`]
				peerReads += m[`runnel_object_peer_reads_total{result="ok"}`]
			}
		}
		return sum, peerReads
	}

	produce("tail")
	for id := int32(1); id <= 3; id++ {
		readFrom(id, "tail")
	}
	got, peerReads := gets()
	t.Logf("peer reads %v: %v GETs, %v peer reads", peers, got, peerReads)
	switch {
	case peers && (got != 0 || peerReads == 0):
		t.Errorf("with peer reads, three nodes reading the tail made %v GETs and %v peer reads; want 0 GETs (the writer serves the others)", got, peerReads)
	case !peers && (got == 0 || peerReads != 0):
		t.Errorf("without peer reads, three nodes reading the tail made %v GETs and %v peer reads; want GETs and no peer reads", got, peerReads)
	}

	// The writer of a second topic stops before anyone else has read it.
	before := journalWriters(t, c.objectStore)
	produce("orphaned")
	var writers []int32
	for id, files := range journalWriters(t, c.objectStore) {
		if files > before[id] {
			writers = append(writers, id)
		}
	}
	if len(writers) != 1 {
		t.Fatalf("nodes %v wrote the second topic's files; want one", writers)
	}
	c.stop(writers[0])
	for id := int32(1); id <= 3; id++ {
		if id != writers[0] {
			readFrom(id, "orphaned")
		}
	}
}

// journalWriters counts the journal files in a file:// store by the node that wrote them (a
// run id starts with its node id).
func journalWriters(t *testing.T, store string) map[int32]int {
	t.Helper()
	out := map[int32]int{}
	root := filepath.Join(strings.TrimPrefix(store, "file://"), "journal")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		run, _, _ := strings.Cut(rel, string(filepath.Separator))
		node, _, _ := strings.Cut(run, "-")
		id, err := strconv.Atoi(node)
		if err != nil {
			return fmt.Errorf("journal file %s: run %q names no node", rel, run)
		}
		out[int32(id)]++
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return out
}

// TestObjectMetadataByClientZone: a client that names its zone in its client.id, as
// WarpStream's do (warpstream_az=), is given object partition leaders in that zone (the nodes
// of that --rack), so that its produces and fetches stay there; a zone without nodes, or no
// zone, spreads the partitions over every node. It produces and consumes through its zone.
func TestObjectMetadataByClientZone(t *testing.T) {
	store := "file://" + t.TempDir()
	racks := map[int32]string{1: "zone-a", 2: "zone-b", 3: "zone-b"}
	c := startClusterWith(t, 3, func(c *testCluster) {
		c.objectStore, c.batchTimeout = store, 20*time.Millisecond
		c.tune = func(id int32, cfg *server.Config) { cfg.Rack = racks[id] }
	})
	c.waitNodes(3)
	createObjectTopic(t, c.addrs[1], "zoned", 48, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	leaders := func(clientID string) map[int32]int {
		t.Helper()
		cl, _ := c.client(kgo.ClientID(clientID))
		req := kmsg.NewPtrMetadataRequest()
		req.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("zoned")}}
		var resp *kmsg.MetadataResponse
		eventually(t, "every node to know the topic", 20*time.Second, func() bool {
			var err error
			resp, err = req.RequestWith(ctx, cl)
			return err == nil && len(resp.Topics) == 1 && resp.Topics[0].ErrorCode == 0 && len(resp.Topics[0].Partitions) == 48
		})
		out := map[int32]int{}
		for _, p := range resp.Topics[0].Partitions {
			out[p.Leader]++
		}
		return out
	}
	for _, tc := range []struct {
		clientID string
		want     []int32
	}{
		{"app,warpstream_az=zone-b", []int32{2, 3}},
		{"runnel_rack=zone-a,app", []int32{1}},
		{"app,warpstream_az=zone-z", []int32{1, 2, 3}},
		{"app", []int32{1, 2, 3}},
	} {
		got := leaders(tc.clientID)
		var nodes []int32
		for n := range got {
			nodes = append(nodes, n)
		}
		slices.Sort(nodes)
		if !slices.Equal(nodes, tc.want) {
			t.Errorf("client %q: partition leaders %v; want nodes %v", tc.clientID, got, tc.want)
		}
	}
	cl, _ := c.client(kgo.ClientID("app,warpstream_az=zone-a"), kgo.ConsumeTopics("zoned"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for i := range 100 {
		cl.Produce(ctx, &kgo.Record{Topic: "zoned", Value: fmt.Appendf(nil, "%d", i)}, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for got := 0; got < 100; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of 100 records through zone-a", got)
		}
		got += fs.NumRecords()
	}
	if m := scrape(t, c.servers[1].AdminAddr()); m[`runnel_object_bytes_total{dir="written"}`] == 0 {
		t.Error("zone-a's node wrote no file for a zone-a client's records")
	}
	for _, id := range []int32{2, 3} {
		if m := scrape(t, c.servers[id].AdminAddr()); m[`runnel_object_bytes_total{dir="written"}`] != 0 {
			t.Errorf("node %d of zone-b wrote files for a zone-a client", id)
		}
	}
}

// TestObjectMergesOnAnAgent: the active controller of three serve nodes and an agent has the
// agent write the merged objects of an object topic's small files, run the compaction
// passes of a compacted one and collect the garbage they leave (as WarpStream's agents
// compact and delete), and every record reads back in order afterwards, the compacted topic
// with only the latest values outside its newest files.
func TestObjectMergesOnAnAgent(t *testing.T) {
	dir := t.TempDir()
	c := startClusterWith(t, 3, func(c *testCluster) {
		c.objectStore, c.batchTimeout = "file://"+dir, 5*time.Millisecond
		c.tune = func(_ int32, cfg *server.Config) {
			cfg.ObjectCompactionInterval = 200 * time.Millisecond
			cfg.ObjectGCInterval, cfg.ObjectGCGrace = 200*time.Millisecond, time.Second
		}
	})
	c.waitNodes(3)
	agent := c.startAgent(9)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// Until the agent registers, the controller rightly has a serve node collect garbage; the
	// passes run one after another, so once the agent has run one, every later one is its.
	eventually(t, "a garbage collection pass on the agent", 30*time.Second, func() bool {
		return scrape(t, c.servers[9].AdminAddr())[`runnel_object_gc_passes_total{how="for_controller"}`] > 0
	})
	collected := func(id int32) float64 {
		m := scrape(t, c.servers[id].AdminAddr())
		return m[`runnel_object_gc_passes_total{how="local"}`] + m[`runnel_object_gc_passes_total{how="for_controller"}`] + m[`runnel_object_gc_deleted_total`]
	}
	before := map[int32]float64{}
	for id := int32(1); id <= 3; id++ {
		before[id] = collected(id)
	}
	createObjectTopic(t, c.addrs[1], "merging", 1, nil)
	cl, _ := c.client(kgo.DefaultProduceTopic("merging"))
	const n = 60 // one file each: 28 past the 32 newest, merged in runs of at least 8
	for i := range n {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "r%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "a merge written by the agent", 40*time.Second, func() bool {
		return scrape(t, c.servers[9].AdminAddr())[`runnel_object_merges_total{how="for_controller"}`] > 0
	})
	// The agent counts its merge when it answers; the controller counts it once it committed the
	// replacement, a moment later.
	eventually(t, "a controller counting a delegated merge", 10*time.Second, func() bool {
		var delegated float64
		for id := int32(1); id <= 3; id++ {
			m := scrape(t, c.servers[id].AdminAddr())
			delegated += m[`runnel_object_merges_total{how="delegated"}`]
			if m[`runnel_object_merges_total{how="local"}`] > 0 {
				t.Fatalf("node %d merged locally with an agent live", id)
			}
		}
		return delegated > 0
	})
	// The merged-away files are deleted by the agent, and only by it.
	eventually(t, "merged-away files deleted by the agent", 40*time.Second, func() bool {
		m := scrape(t, c.servers[9].AdminAddr())
		return m[`runnel_object_gc_passes_total{how="for_controller"}`] > 0 && m[`runnel_object_gc_deleted_total`] > 0
	})
	for id := int32(1); id <= 3; id++ {
		if collected(id) != before[id] {
			t.Fatalf("node %d collected garbage with an agent live", id)
		}
	}
	cons, _ := c.client(kgo.ConsumeTopics("merging"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.SeedBrokers(agent))
	var got []string
	for len(got) < n {
		fs := cons.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	for i, v := range got {
		if v != fmt.Sprintf("r%d", i) {
			t.Fatalf("offset %d reads %q; want r%d", i, v, i)
		}
	}

	createObjectTopic(t, c.addrs[1], "compacting", 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact"),
		"min.cleanable.dirty.ratio": kadm.StringPtr("0")})
	const m = 40 // the 8 oldest files are past the 32 newest
	for i := range m {
		r := &kgo.Record{Topic: "compacting", Key: []byte("a"), Value: fmt.Appendf(nil, "a%d", i)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// A pass can run before a superseded record is in the extents it may rewrite (it only
	// marks them clean): wait for one that removed records.
	eventually(t, "a compaction pass run by the agent that removed records", 40*time.Second, func() bool {
		m := scrape(t, c.servers[9].AdminAddr())
		return m[`runnel_object_compaction_passes_total{how="for_controller"}`] > 0 && m[`runnel_object_compaction_records_removed_total`] > 0
	})
	// Read from the start to the last record, until the read is compacted (the node serving it
	// may apply the replacement a moment after the agent's proposal).
	read := func() map[int64]string {
		cons, _ := c.client(kgo.ConsumeTopics("compacting"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		defer cons.Close()
		offsets := map[int64]string{}
		for len(offsets) == 0 || !slices.Contains(slices.Collect(maps.Values(offsets)), fmt.Sprintf("a%d", m-1)) {
			fs := cons.PollFetches(ctx)
			if err := fs.Err(); err != nil {
				t.Fatal(err)
			}
			fs.EachRecord(func(r *kgo.Record) { offsets[r.Offset] = string(r.Value) })
		}
		for off, v := range offsets {
			if v != fmt.Sprintf("a%d", off) {
				t.Fatalf("offset %d reads %q; want a%d", off, v, off)
			}
		}
		return offsets
	}
	eventually(t, "fewer than 40 records read back (compacted)", 20*time.Second, func() bool { return len(read()) < m })
}
