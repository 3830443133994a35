package txncoord

import (
	"math"
	"testing"
)

// TestKIP360UnknownID: a producer whose transactional id the coordinator no longer knows
// (expired after transactional.id.expiration.ms, or its tombstone compacted) recovers from
// INVALID_PRODUCER_ID_MAPPING with InitProducerId carrying its old producer id and epoch
// (KIP-360). Kafka creates fresh metadata (epoch -1) and accepts the request
// (isValidProducerId: txnMetadata.producerEpoch == NO_PRODUCER_EPOCH), handing out the new
// producer id at epoch 0; it was refused PRODUCER_FENCED, fatal to the client.
func TestKIP360UnknownID(t *testing.T) {
	h := newHarness(t)
	r := h.init("gone", 555, 7) // the coordinator has never heard of "gone"
	if r.Err != nil {
		t.Fatalf("InitProducerId(pid 555, epoch 7) for an unknown transactional id = %v; Kafka answers a new producer id at epoch 0", r.Err)
	}
}

// TestRotatedZombieIsFenced: after the producer id rotates (epoch exhausted at an
// InitProducerId), a zombie still holding the old producer id with an old, non-exhausted epoch
// recovers from INVALID_PRODUCER_ID_MAPPING with a KIP-360 InitProducerId(old id, old epoch).
// Kafka accepts the previous producer id only with an exhausted epoch (a retry of the
// rotating request) and fences anything else; the zombie was handed the live producer's id and
// epoch, unfenced.
func TestRotatedZombieIsFenced(t *testing.T) {
	h := newHarness(t)
	old := h.init("z", -1, -1).ProducerID
	h.c.txns["z"].Epoch = math.MaxInt16 - 1 // exhausted
	live := h.init("z", -1, -1)             // a new instance: the id rotates
	if live.Err != nil || live.ProducerID == old || live.Epoch != 0 {
		t.Fatalf("rotation = %+v", live)
	}
	zombie := h.init("z", old, 100) // an instance fenced long ago, epoch 100 of the old id
	if zombie.Err == nil {
		t.Errorf("zombie InitProducerId(old id %d, epoch 100) = id %d epoch %d, the live producer's own (%d, %d); want PRODUCER_FENCED",
			old, zombie.ProducerID, zombie.Epoch, live.ProducerID, live.Epoch)
	}
}
