package cluster

import (
	"math"
	"strconv"
	"sync"

	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/replica"
	"github.com/runnel-dev/runnel/internal/topics"
)

// Replication quota configs (Kafka's names).
const (
	leaderThrottledReplicas   = "leader.replication.throttled.replicas"
	followerThrottledReplicas = "follower.replication.throttled.replicas"
	leaderThrottledRate       = "leader.replication.throttled.rate"
	followerThrottledRate     = "follower.replication.throttled.rate"
)

// replicationThrottle is the replica.Throttle of a node, read from the metadata image: a
// partition's replica of this node listed in the topic's leader.replication.throttled.replicas
// sends within this node's leader.replication.throttled.rate (one bucket for all of them), and a
// follower listed in follower.replication.throttled.replicas is sent at most its node's
// follower.replication.throttled.rate (one bucket per follower node here; a follower fed by
// several leaders may get that rate from each). A rate comes from the node's dynamic broker
// configs, else the cluster-wide ones, else it is unlimited.
type replicationThrottle struct {
	self  int32
	image func() *controller.Image

	mu        sync.Mutex
	leader    *replica.Bucket
	followers map[int32]*replica.Bucket
	parsed    map[string]topics.ThrottledReplicas // by config value
}

func newReplicationThrottle(self int32, image func() *controller.Image) *replicationThrottle {
	return &replicationThrottle{self: self, image: image, followers: map[int32]*replica.Bucket{}, parsed: map[string]topics.ThrottledReplicas{}}
}

func (t *replicationThrottle) Buckets(topic string, partition, follower int32) []*replica.Bucket {
	img := t.image()
	tp := img.Topics[topic]
	if tp == nil {
		return nil
	}
	lv, fv := tp.Configs[leaderThrottledReplicas], tp.Configs[followerThrottledReplicas]
	if lv == "" && fv == "" {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*replica.Bucket
	if lv != "" && t.list(lv).Has(partition, t.self) {
		if rate, ok := nodeRate(img, t.self, leaderThrottledRate); ok {
			if t.leader == nil {
				t.leader = replica.NewBucket(rate)
			}
			t.leader.SetRate(rate)
			out = append(out, t.leader)
		}
	}
	if fv != "" && t.list(fv).Has(partition, follower) {
		if rate, ok := nodeRate(img, follower, followerThrottledRate); ok {
			b := t.followers[follower]
			if b == nil {
				b = replica.NewBucket(rate)
				t.followers[follower] = b
			}
			b.SetRate(rate)
			out = append(out, b)
		}
	}
	return out
}

// list parses a throttled replica list once per distinct value (an invalid one, which the
// config checks refuse, throttles nothing).
func (t *replicationThrottle) list(value string) topics.ThrottledReplicas {
	if l, ok := t.parsed[value]; ok {
		return l
	}
	l, _ := topics.ParseThrottledReplicas(value)
	if len(t.parsed) > 1000 {
		clear(t.parsed)
	}
	t.parsed[value] = l
	return l
}

// nodeRate is a node's replication rate config in bytes/s, and whether one is set below the
// unlimited default.
func nodeRate(img *controller.Image, node int32, key string) (float64, bool) {
	v, ok := "", false
	if n := img.Nodes[node]; n != nil {
		v, ok = n.Configs[key]
	}
	if !ok {
		v, ok = img.ClusterConfigs[key]
	}
	if !ok {
		return 0, false
	}
	rate, err := strconv.ParseInt(v, 10, 64)
	if err != nil || rate == math.MaxInt64 || rate < 0 {
		return 0, false
	}
	return float64(rate), true
}
