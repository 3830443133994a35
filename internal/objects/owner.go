package objects

import (
	"slices"

	"github.com/runnel-dev/runnel/internal/controller"
)

// Owner is the node that serves object file key to node self's zone (its rack; nodes without a
// rack form one zone), as img has the nodes: the file's writer if it is live and in the zone
// (it has the sections it wrote in its cache, so a consumer reading the tail elsewhere costs
// no GET), else the live node of the zone that key hashes to (Rendezvous: every node picks
// the same one, and a node leaving moves only its own files). remote is false when the owner
// is self, or when self is not in img (an agent serving from a snapshot): self then reads the
// store.
func Owner(img *controller.Image, self int32, key string) (node int32, remote bool) {
	me := img.Nodes[self]
	if me == nil {
		return self, false
	}
	candidates := []int32{self}
	run, _, journal := ParseJournalKey(key)
	for id, n := range img.Nodes {
		if id == self || n.Fenced || n.Rack != me.Rack {
			continue
		}
		if journal && n.Run == run {
			return id, true
		}
		candidates = append(candidates, id)
	}
	if journal && me.Run == run {
		return self, false
	}
	slices.Sort(candidates)
	node = Rendezvous([]byte(key), candidates)
	return node, node != self
}
