package broker

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/txncoord"
)

// TestDiscoverCoverage: a Lost transaction's discovery is complete only when every partition
// of the image (object topics aside) was answered for by a node leading it in the epoch the
// image names or a later one; until then it asks the image's leaders of what is missing again
// (docs/transactions.md §3.4).
func TestDiscoverCoverage(t *testing.T) {
	img := &controller.Image{Topics: map[string]*controller.Topic{
		"a": {Name: "a", Partitions: []*controller.Partition{{Leader: 1, LeaderEpoch: 4}, {Leader: 2, LeaderEpoch: 7}}},
		"b": {Name: "b", Partitions: []*controller.Partition{{Leader: -1, LeaderEpoch: 2}}},
		"o": {Name: "o", Configs: map[string]string{controller.StorageConfig: controller.StorageObject},
			Partitions: []*controller.Partition{{Leader: -1}}},
	}}
	covered := map[txncoord.TP]bool{}
	ask, missing := discoverAsk(img, covered)
	slices.Sort(ask)
	if !slices.Equal(ask, []int32{1, 2}) {
		t.Errorf("asked %v; want the leaders [1 2]", ask)
	}
	if len(missing) != 1 || !strings.Contains(missing[0].Error(), "b[0] has no leader") {
		t.Errorf("missing %v; want b[0] without a leader (and not the object partition)", missing)
	}

	// Node 1 answers for a[0] in the image's epoch. Node 2 has not yet taken a[1] (its image
	// is behind): before, its answer counted, and a[1]'s open transaction went unseen.
	errs := discoverCover(img, covered, map[int32]txnDiscoverResp{
		1: {Led: []txnLed{{Topic: "a", Partition: 0, Epoch: 4}}},
		2: {Led: []txnLed{}},
	}, nil)
	if !covered[txncoord.TP{Topic: "a", Partition: 0}] || covered[txncoord.TP{Topic: "a", Partition: 1}] {
		t.Errorf("covered %v; want a[0] only", covered)
	}
	if err := errors.Join(errs...); err == nil || !strings.Contains(err.Error(), "node 2 does not lead a[1] in epoch 7") {
		t.Errorf("errors %v; want node 2 not leading a[1]", err)
	}

	// A deposed leader's answer (an older epoch) does not cover; the new leader's (a later
	// epoch than the coordinator's image knows) does.
	errs = discoverCover(img, covered, map[int32]txnDiscoverResp{2: {Led: []txnLed{{Topic: "a", Partition: 1, Epoch: 6}}}}, nil)
	if covered[txncoord.TP{Topic: "a", Partition: 1}] || len(errs) != 1 {
		t.Errorf("an answer in epoch 6 for a[1] (epoch 7): covered %v, errors %v", covered, errs)
	}
	errs = discoverCover(img, covered, map[int32]txnDiscoverResp{2: {Led: []txnLed{{Topic: "a", Partition: 1, Epoch: 8}}}}, nil)
	if !covered[txncoord.TP{Topic: "a", Partition: 1}] || len(errs) != 0 {
		t.Errorf("an answer in epoch 8 for a[1] (epoch 7): covered %v, errors %v", covered, errs)
	}

	// The next attempt asks only for what is still missing: b[0], once it has a leader.
	img.Topics["b"].Partitions[0] = &controller.Partition{Leader: 3, LeaderEpoch: 3}
	ask, missing = discoverAsk(img, covered)
	if !slices.Equal(ask, []int32{3}) || len(missing) != 0 {
		t.Errorf("second attempt asks %v (missing %v); want [3]", ask, missing)
	}
	errs = discoverCover(img, covered, map[int32]txnDiscoverResp{3: {Led: []txnLed{{Topic: "b", Partition: 0, Epoch: 3}, {Topic: "gone", Partition: 0, Epoch: 1}}}}, nil)
	if len(errs) != 0 {
		t.Errorf("errors %v", errs)
	}
	if ask, missing = discoverAsk(img, covered); len(ask) != 0 || len(missing) != 0 {
		t.Errorf("after every partition was answered for: asks %v, missing %v", ask, missing)
	}

	// A node of an older version lists no leaderships (no "led" in its answer): it answers for
	// what the image says it leads, as before.
	var legacy txnDiscoverResp
	if err := json.Unmarshal([]byte(`{"partitions":[]}`), &legacy); err != nil {
		t.Fatal(err)
	}
	fresh := map[txncoord.TP]bool{}
	if errs := discoverCover(img, fresh, map[int32]txnDiscoverResp{1: legacy}, nil); len(errs) != 0 || !fresh[txncoord.TP{Topic: "a", Partition: 0}] || len(fresh) != 1 {
		t.Errorf("a legacy answer from node 1: covered %v, errors %v; want a[0]", fresh, errs)
	}
	if b, _ := json.Marshal(txnDiscoverResp{Led: []txnLed{}}); !strings.Contains(string(b), `"led":[]`) {
		t.Errorf("an answer leading nothing encodes as %s; want an empty led list (not absent)", b)
	}
}
