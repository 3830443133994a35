package group

import (
	"bytes"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzLoad: no __consumer_offsets record, however mangled, makes Load panic; and a consumer or
// share group's state that loads re-encodes canonically (encode, load, encode gives the same
// bytes).
func FuzzLoad(f *testing.F) {
	h := newConsumerHarness(&testing.T{})
	h.hb("m1", 0, []string{"t"}, map[string][]int32{}, "")
	h.hb("m2", 0, []string{"t", "u"}, map[string][]int32{}, "range")
	stableGroup(newHarness(&testing.T{}))
	mixed := newConsumerHarness(&testing.T{}) // classic members in a consumer group
	classicGroupOnT(mixed)
	mixed.hb("c", 0, []string{"t"}, map[string][]int32{}, "")
	h.records = append(h.records, mixed.records...)
	h.shb("s1", 0, []string{"t", "u"}) // a share group
	h.shb("s2", 0, []string{"u"})
	for _, r := range h.records {
		f.Add(r.Key, r.Value)
	}
	sh := newStreamsHarness(&testing.T{}) // a streams group
	sh.c.cfg.StreamsStandbyReplicas = 1
	r := sh.shb("m1", "p1", 0, nil)
	sh.createInternal()
	sh.shb("m1", "", r.MemberEpoch, &streamsOwned{streamsTasks{}, streamsTasks{}})
	sh.shb("m2", "p2", 0, nil)
	for _, r := range sh.records {
		f.Add(r.Key, r.Value)
	}
	snap := []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0} // a share.Snapshot need not decode to seed
	for _, epoch := range []int64{5, 1 << 40} {              // share-partition records, versions 0 and 1
		r := sharePartRecord("s1", SharePartition{Partition: 1}, &storedShare{leaderEpoch: epoch, snapshot: snap})
		f.Add(r.Key, r.Value)
	}
	f.Add(groupKey("g"), []byte{0, 3})
	f.Add(offsetRecord("g", TopicPartition{"t", 1}, &Offset{Offset: 5}).Key, []byte{0, 1, 2})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		c := New(DefaultConfig())
		now := time.UnixMilli(1_700_000_000_000)
		if err := c.Load(now, key, value); err != nil || len(key) < 2 || value == nil {
			return
		}
		switch int16(key[0])<<8 | int16(key[1]) {
		case consumerKeyVersion:
		case streamsKeyVersion:
			// What loads re-encodes canonically, and the group takes heartbeats and ticks.
			for _, g := range c.Groups() {
				first := c.streamsStateValue(g.ID)
				c2 := New(DefaultConfig())
				if err := c2.Load(now, key, first); err != nil {
					t.Fatalf("reloading the re-encoded streams state: %v", err)
				}
				if again := c2.streamsStateValue(g.ID); !bytes.Equal(again, first) {
					t.Fatalf("streams state re-encodes to %q; then to %q", first, again)
				}
				c.StreamsGroupDescribe(&kmsg.StreamsGroupDescribeRequest{Groups: []string{g.ID}})
				for _, m := range sortedStreamsMembers(g.streams.members) {
					req := kmsg.NewPtrStreamsGroupHeartbeatRequest()
					req.Group, req.MemberID, req.MemberEpoch = g.ID, m.ID, m.Epoch
					c.StreamsGroupHeartbeat(now, req, "c", "/h")
				}
				c.Tick(now.Add(time.Hour))
			}
			return
		case shareKeyVersion:
			for _, g := range c.Groups() {
				first := g.share.appendTo(nil, g.StateSince)
				c2 := New(DefaultConfig())
				if err := c2.Load(now, key, first); err != nil {
					t.Fatalf("reloading the re-encoded share state: %v", err)
				}
				g2, _ := c2.Group(g.ID)
				if again := g2.share.appendTo(nil, g2.StateSince); !bytes.Equal(again, first) {
					t.Fatalf("share state re-encodes to %x; then to %x", first, again)
				}
			}
			return
		default:
			return
		}
		// The encoding is canonical once written: loading what it writes gives the same bytes.
		for _, g := range c.Groups() {
			if g.consumer == nil {
				continue
			}
			first := g.consumer.appendTo(nil, g.StateSince)
			c2 := New(DefaultConfig())
			if err := c2.Load(now, key, first); err != nil {
				t.Fatalf("reloading the re-encoded state: %v", err)
			}
			g2, _ := c2.Group(g.ID)
			if again := g2.consumer.appendTo(nil, g2.StateSince); !bytes.Equal(again, first) {
				t.Fatalf("consumer state re-encodes to %x; then to %x", first, again)
			}
		}
	})
}
