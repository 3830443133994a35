package objects

import (
	"slices"

	"github.com/runnel-dev/runnel/internal/controller"
)

// Route is how a node reads an object file it misses in its cache.
type Route int

const (
	// ReadStore: GET the sections needed (the node is alone in its zone, or not in the image).
	ReadStore Route = iota
	// ReadChunks: the node owns the file for its zone, and reads and keeps it in chunks that
	// serve its own reads and its peers' (Cache.Serve).
	ReadChunks
	// ReadPeer: ask the owner.
	ReadPeer
)

// Owner is the node that serves object file key to node self's zone (its rack; nodes without a
// rack form one zone), as img has the nodes: the file's writer if it is live and in the zone
// (it has the sections it wrote in its cache, so a consumer reading the tail elsewhere costs
// no GET), else the live node of the zone that key hashes to (Rendezvous: every node picks
// the same one, and a node leaving moves only its own files). The route says how self reads
// the file.
func Owner(img *controller.Image, self int32, key string) (node int32, route Route) {
	me := img.Nodes[self]
	if me == nil {
		return self, ReadStore
	}
	candidates := []int32{self}
	run, _, journal := ParseJournalKey(key)
	for id, n := range img.Nodes {
		if id == self || n.Fenced || n.Rack != me.Rack {
			continue
		}
		if journal && n.Run == run {
			return id, ReadPeer
		}
		candidates = append(candidates, id)
	}
	switch {
	case len(candidates) == 1:
		return self, ReadStore
	case journal && me.Run == run:
		return self, ReadChunks
	}
	slices.Sort(candidates)
	if node = Rendezvous([]byte(key), candidates); node != self {
		return node, ReadPeer
	}
	return self, ReadChunks
}
