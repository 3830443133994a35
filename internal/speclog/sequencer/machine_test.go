package sequencer

import (
	"testing"

	"github.com/runnel-dev/runnel/internal/speclog/order"
)

func create() *Command {
	return &Command{Topic: "t1", Create: &Create{Name: "t", Shards: []int32{0, 1}, Config: order.DefaultConfig()}}
}

// TestMachineSnapshot: a machine with a topic, its entries applied, survives its snapshot, and a
// stale decision is refused the same way on every replica.
func TestMachineSnapshot(t *testing.T) {
	m := NewMachine()
	if ch, err := m.Apply(create()); !ch || err != nil {
		t.Fatalf("create: %v %v", ch, err)
	}
	if ch, _ := m.Apply(create()); ch {
		t.Fatal("a second create changed the machine")
	}
	if _, err := m.Apply(&Command{Topic: "t1", Entries: []order.Entry{{Cut: &order.CutID{Window: 0, Cut: 0}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Apply(&Command{Topic: "t1", Entries: []order.Entry{{Cut: &order.CutID{Window: 0, Cut: 5}}}}); err == nil {
		t.Fatal("a cut out of order was applied")
	}
	back, err := DecodeMachine(m.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if string(back.Encode()) != string(m.Encode()) || back.Topics["t1"].Seq != 1 {
		t.Fatalf("snapshot round trip differs")
	}
	if _, ok := back.Topics["t1"].Since(0); ok {
		t.Fatal("entries before a snapshot are offered after it")
	}
	if e, ok := m.Topics["t1"].Since(0); !ok || len(e) != 1 {
		t.Fatalf("Since(0) = %v, %v", e, ok)
	}
}

// FuzzDecodeCommand: no log entry panics the decoder or the machine applying it, and what
// decodes re-encodes to a command that decodes the same.
func FuzzDecodeCommand(f *testing.F) {
	f.Add(EncodeCommand(create()))
	f.Add(EncodeCommand(&Command{Topic: "t1", Entries: []order.Entry{{Cut: &order.CutID{Window: 0, Cut: 0}}}}))
	f.Add(EncodeCommand(&Command{Topic: "t1", Drop: true}))
	trim := uint64(3)
	f.Add(EncodeCommand(&Command{Topic: "t1", Trim: &trim}))
	f.Add([]byte(`{"topic":"t1","entries":[{"join":{"shard":4}}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeCommand(b)
		if err != nil {
			return
		}
		again, err := DecodeCommand(EncodeCommand(c))
		if err != nil || string(EncodeCommand(again)) != string(EncodeCommand(c)) {
			t.Fatalf("re-encoding %q: %v", b, err)
		}
		m := NewMachine()
		m.Apply(create())
		m.Apply(c)
		if _, err := DecodeMachine(m.Encode()); err != nil {
			t.Fatalf("a machine after %q does not survive its snapshot: %v", b, err)
		}
	})
}

// FuzzDecodeMachine: a snapshot either fails to decode with an error or gives a machine that
// encodes to a snapshot decoding to the same, and takes commands without panicking.
func FuzzDecodeMachine(f *testing.F) {
	m := NewMachine()
	m.Apply(create())
	m.Apply(&Command{Topic: "t1", Entries: []order.Entry{{Cut: &order.CutID{Window: 0, Cut: 0}}}})
	f.Add(m.Encode())
	f.Add(NewMachine().Encode())
	f.Add([]byte(`{"topics":{"1":null}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMachine(b)
		if err != nil {
			return
		}
		enc := m.Encode()
		again, err := DecodeMachine(enc)
		if err != nil || string(again.Encode()) != string(enc) {
			t.Fatalf("re-encoding the snapshot %q: %v", b, err)
		}
		m.Apply(create())
		m.Apply(&Command{Topic: "t1", Entries: []order.Entry{{Cut: &order.CutID{Window: 0, Cut: 0}}}})
		trim := uint64(2)
		m.Apply(&Command{Topic: "t1", Trim: &trim})
		m.Encode()
	})
}
