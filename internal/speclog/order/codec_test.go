package order

import (
	"bytes"
	"testing"
	"time"
)

// TestStateSnapshot: a state restored from its snapshot applies the rest of the log to the same
// state as the original (the sequencer group's snapshots lose nothing).
func TestStateSnapshot(t *testing.T) {
	s := newSim(t, 3, 3, 0.02)
	for range 3000 {
		s.step(0.6, 0)
	}
	half := len(s.log)
	st, err := NewState(s.cfg, firstTable(3, s.cfg.InitialQuota))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range s.log[:half] {
		b := EncodeEntry(e)
		d, err := DecodeEntry(b)
		if err != nil || !bytes.Equal(EncodeEntry(d), b) {
			t.Fatalf("entry %s: decodes to %+v, %v", b, d, err)
		}
		if err := st.Apply(d); err != nil {
			t.Fatal(err)
		}
	}
	restored, err := DecodeState(s.cfg, st.Encode())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range s.log[half:] {
		if err := st.Apply(e); err != nil {
			t.Fatal(err)
		}
		if err := restored.Apply(e); err != nil {
			t.Fatalf("the restored state refused %s: %v", EncodeEntry(e), err)
		}
	}
	if !bytes.Equal(st.Encode(), restored.Encode()) || st.Committed() != s.st.Committed() {
		t.Fatalf("restored state differs:\n%s\n%s", st.Encode(), restored.Encode())
	}
}

func TestDecodeEntryRefuses(t *testing.T) {
	for _, b := range []string{
		``, `{}`, `{"cut":{"window":1,"cut":2},"join":{"shard":1}}`, `{"cut":{"window":1,"cut":-1}}`,
		`{"table":{"window":1,"shards":[2,1],"quotas":[1,1],"slot_base":[0,0]}}`,
		`{"table":{"window":1,"shards":[1],"quotas":[1,1],"slot_base":[0]}}`,
		`{"table":{"window":1,"shards":[1],"quotas":[-1],"slot_base":[0]}}`,
		`{"bogus":1}`,
	} {
		if e, err := DecodeEntry([]byte(b)); err == nil {
			t.Errorf("DecodeEntry(%s) = %+v; want an error", b, e)
		}
	}
}

// FuzzDecodeEntry: no input panics DecodeEntry, or Apply of what it accepts on a running
// state; an accepted entry re-encodes to one that decodes the same.
func FuzzDecodeEntry(f *testing.F) {
	f.Add(EncodeEntry(Entry{Cut: &CutID{Window: 0, Cut: 0}}))
	f.Add(EncodeEntry(Entry{Table: firstTable(3, 2)}))
	f.Add(EncodeEntry(Entry{Fail: &FailEntry{Shard: 1, After: CutID{Cut: -1}}}))
	f.Add(EncodeEntry(Entry{Join: &JoinEntry{Shard: 4}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := DecodeEntry(b)
		if err != nil {
			return
		}
		again, err := DecodeEntry(EncodeEntry(e))
		if err != nil || !bytes.Equal(EncodeEntry(again), EncodeEntry(e)) {
			t.Fatalf("re-encoded %s decodes to %s, %v", EncodeEntry(e), EncodeEntry(again), err)
		}
		cfg := DefaultConfig()
		cfg.W, cfg.DecideAt = 4, 2
		st, _ := NewState(cfg, firstTable(3, 2))
		l := NewLeader(st)
		st.Apply(e) // may refuse it; must not panic
		now := time.Unix(0, 0)
		for i := range 3 {
			l.Report(Report{Shard: int32(i), Through: CutID{Window: 0, Cut: 3}, Slots: 8}, now)
		}
		for range 5 {
			now = now.Add(time.Millisecond)
			ents, _ := l.Tick(now)
			for _, x := range ents {
				st.Apply(x)
			}
			for i := range 3 {
				if t := st.Tables[st.Last.next(cfg.W).Window]; t != nil {
					t.Position(cfg.W, int32(i), 5)
					t.Owner(cfg.W, t.Start+3)
				}
			}
		}
	})
}
