package txncoord

import (
	"testing"
)

func TestCodecRoundTrip(t *testing.T) {
	in := Record{ID: "tx", Txn: &Txn{ID: "tx", ProducerID: 7, PrevProducerID: 3, Epoch: 2, LastEpoch: -1, TimeoutMs: 60000,
		State: PrepareCommit, Partitions: map[TP]bool{{"a", 1}: true, {"a", 0}: true, {"b", 9}: true}, StartMs: 5, UpdateMs: 6, V2: true}}
	k, v := Encode(in)
	out, err := Decode(k, v)
	if err != nil {
		t.Fatal(err)
	}
	if out.ID != in.ID || out.Txn.String() != in.Txn.String() || out.Txn.PrevProducerID != 3 || !out.Txn.V2 ||
		out.Txn.TimeoutMs != 60000 || out.Txn.StartMs != 5 || out.Txn.UpdateMs != 6 || len(out.Txn.Partitions) != 3 {
		t.Errorf("round trip: %+v; want %+v", out.Txn, in.Txn)
	}
	k, v = Encode(Record{ID: "gone"})
	if out, err := Decode(k, v); err != nil || out.Txn != nil || out.ID != "gone" {
		t.Errorf("tombstone round trip = %+v, %v", out, err)
	}
}

// FuzzDecode: no key or value panics Decode, and what decodes encodes to a record that decodes
// the same.
func FuzzDecode(f *testing.F) {
	k, v := Encode(Record{ID: "tx", Txn: &Txn{ID: "tx", ProducerID: 7, Epoch: 2, State: Ongoing, Partitions: map[TP]bool{{"a", 1}: true}}})
	f.Add(k, v)
	f.Add(k, []byte(nil))
	f.Fuzz(func(t *testing.T, key, value []byte) {
		r, err := Decode(key, value)
		if err != nil {
			return
		}
		k2, v2 := Encode(r)
		r2, err := Decode(k2, v2)
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		if r2.ID != r.ID || (r.Txn == nil) != (r2.Txn == nil) || (r.Txn != nil && r.Txn.String() != r2.Txn.String()) {
			t.Fatalf("re-encoded record decodes to %+v; was %+v", r2, r)
		}
	})
}
