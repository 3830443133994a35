package broker

import "testing"

// TestCheckVerdict: a partition may abort a transaction whose transactional id it does not know
// only when every coordinator partition was loaded on some node and none knows the producer; a
// coordinator failing over (its partition loaded nowhere) means wait.
func TestCheckVerdict(t *testing.T) {
	all := func(from, to int32) []int32 {
		var out []int32
		for i := from; i < to; i++ {
			out = append(out, i)
		}
		return out
	}
	cases := []struct {
		name  string
		resps []txnCheckResp
		parts int
		wait  bool
	}{
		{"every coordinator loaded, none knows it", []txnCheckResp{{Loaded: all(0, 25)}, {Loaded: all(25, 50)}}, 50, false},
		{"one coordinator loaded nowhere (failing over)", []txnCheckResp{{Loaded: all(0, 25)}, {Loaded: all(26, 50)}}, 50, true},
		{"a coordinator knows it and says wait", []txnCheckResp{{Loaded: all(0, 25)}, {Known: true, Wait: true}}, 50, true},
		{"a coordinator knows it and says abort", []txnCheckResp{{Known: true}, {}}, 50, false},
		{"indexes out of range do not count", []txnCheckResp{{Loaded: append(all(0, 49), 50, -1)}}, 50, true},
		{"no transaction state topic: no coordinator at all", []txnCheckResp{{}}, 0, false},
	}
	for _, c := range cases {
		if got := checkVerdict(c.resps, c.parts); got != c.wait {
			t.Errorf("%s: wait = %v; want %v", c.name, got, c.wait)
		}
	}
}
