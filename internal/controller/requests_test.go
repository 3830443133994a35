package controller

import (
	"errors"
	"testing"
)

// TestRequestsAppliedOnce: a command carrying a request applied before is answered with the
// first result and changes nothing; a failed one is applied again; results survive a
// snapshot; each run keeps its latest requestsKept; a node registering again forgets its
// previous run's.
func TestRequestsAppliedOnce(t *testing.T) {
	im := NewImage()
	idx := uint64(1)
	apply := func(c *Command) Result { idx++; return Apply(im, idx, c) }
	apply(&Command{Op: OpRegister, Register: &Register{Node: 1, Run: "run-a"}})
	create := func(name string, id byte, req *Request) Result {
		return apply(&Command{Op: OpCreateTopic, Req: req, CreateTopic: &CreateTopic{Name: name, ID: TopicID{id}, Assignments: [][]int32{{1}}}})
	}
	alloc := func(req *Request) Result {
		return apply(&Command{Op: OpAllocProducerIDs, Req: req, AllocProducerIDs: &AllocProducerIDs{Node: 1, Count: 10}})
	}
	r1 := &Request{Run: "run-a", Seq: 1}
	if res := create("t", 1, r1); res.Err != nil {
		t.Fatal(res.Err)
	}
	if res := create("t", 1, r1); res.Err != nil {
		t.Fatalf("the same request again: %v; want the first result", res.Err)
	}
	if res := create("t", 1, &Request{Run: "run-a", Seq: 2}); !errors.Is(res.Err, ErrTopicExists) {
		t.Fatalf("a new request: %v; want ErrTopicExists", res.Err)
	}
	first := alloc(&Request{Run: "run-a", Seq: 3})
	if again := alloc(&Request{Run: "run-a", Seq: 3}); again.Value != first.Value || im.NextProducerID != first.Value+10 {
		t.Fatalf("producer ids %d then %d, next %d; want the same block once", first.Value, again.Value, im.NextProducerID)
	}
	// A failed request is applied again when tried again.
	if res := create("u", 1, &Request{Run: "run-a", Seq: 4}); !errors.Is(res.Err, ErrTopicExists) { // the id is taken
		t.Fatalf("a clashing id: %v", res.Err)
	}
	// Through a snapshot.
	dec, err := decodeImage(encodeImage(im))
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := dec.appliedRequest(&Request{Run: "run-a", Seq: 3}); !ok || r.Value != first.Value {
		t.Fatalf("after a snapshot: %v, %v", r, ok)
	}
	if _, ok := dec.appliedRequest(&Request{Run: "run-a", Seq: 4}); ok {
		t.Fatal("a failed request was kept")
	}
	// The bound.
	for seq := uint64(10); seq < 10+requestsKept; seq++ {
		alloc(&Request{Run: "run-a", Seq: seq})
	}
	if _, ok := im.appliedRequest(r1); ok || len(im.Requests["run-a"].Done) != requestsKept {
		t.Fatalf("%d results kept, the oldest still there: %v", len(im.Requests["run-a"].Done), ok)
	}
	// Registering again forgets the previous run.
	apply(&Command{Op: OpRegister, Register: &Register{Node: 1, Run: "run-b"}})
	if im.Requests["run-a"] != nil {
		t.Fatal("the previous run's results are kept after the node registered again")
	}
}
