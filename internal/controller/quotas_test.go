package controller

import (
	"testing"
)

func TestAlterClientQuotas(t *testing.T) {
	im := NewImage()
	alice, c1 := "alice", "c1"
	userClient := QuotaEntity{User: &alice, Client: &c1}
	defClient := QuotaEntity{ClientDefault: true}
	applyAlterClientQuotas(im, &AlterClientQuotas{Entries: []QuotaAlteration{
		{Entity: userClient, Set: map[string]float64{QuotaProducerByteRate: 1024, "unknown_key": 5}},
		{Entity: defClient, Set: map[string]float64{QuotaConsumerByteRate: 2048, QuotaRequestPercentage: -1}},
		{Entity: QuotaEntity{}, Set: map[string]float64{QuotaProducerByteRate: 1}}, // no entity: skipped
	}})
	if n := len(im.ClientQuotas); n != 2 {
		t.Fatalf("%d quota entities; want 2", n)
	}
	before := im.ClientQuotas
	for _, q := range im.ClientQuotas {
		switch q.Entity.Key() {
		case userClient.Key():
			if len(q.Values) != 1 || q.Values[QuotaProducerByteRate] != 1024 {
				t.Errorf("user+client values %v; want only producer_byte_rate 1024", q.Values)
			}
		case defClient.Key():
			if len(q.Values) != 1 || q.Values[QuotaConsumerByteRate] != 2048 {
				t.Errorf("default client values %v; want only consumer_byte_rate 2048", q.Values)
			}
		default:
			t.Errorf("unexpected entity %s", q.Entity)
		}
	}
	// Removing the last value drops the entity; the previous image's slice is untouched.
	applyAlterClientQuotas(im, &AlterClientQuotas{Entries: []QuotaAlteration{
		{Entity: userClient, Remove: []string{QuotaProducerByteRate}},
		{Entity: defClient, Set: map[string]float64{QuotaConsumerByteRate: 4096}},
	}})
	if n := len(im.ClientQuotas); n != 1 || im.ClientQuotas[0].Values[QuotaConsumerByteRate] != 4096 {
		t.Fatalf("after the change: %d entities, %v; want the default client's at 4096", n, im.ClientQuotas[0].Values)
	}
	if len(before) != 2 || before[0].Values[QuotaConsumerByteRate] == 4096 && before[1].Values[QuotaConsumerByteRate] == 4096 {
		t.Fatal("the change modified the previous image's quotas")
	}
	// The quotas survive a snapshot.
	img, err := decodeImage(encodeImage(im))
	if err != nil || len(img.ClientQuotas) != 1 || !img.ClientQuotas[0].Entity.ClientDefault || img.ClientQuotas[0].Values[QuotaConsumerByteRate] != 4096 {
		t.Fatalf("decoded snapshot quotas %+v (%v)", img.ClientQuotas, err)
	}
	if userClient.Key() == (QuotaEntity{User: &alice}).Key() || (QuotaEntity{Client: new(string)}).Key() == defClient.Key() {
		t.Fatal("entity keys collide: a user's and a user+client's, or the empty client id and the default")
	}
}

// TestIPQuotas: an ip entity (a name or the default) takes connection_creation_rate only, and
// cannot be combined with a user or client id; its key differs from every other entity's.
func TestIPQuotas(t *testing.T) {
	im := NewImage()
	ip, client := "127.0.0.1", "c1"
	applyAlterClientQuotas(im, &AlterClientQuotas{Entries: []QuotaAlteration{
		{Entity: QuotaEntity{IP: &ip}, Set: map[string]float64{QuotaConnectionCreationRate: 5, QuotaProducerByteRate: 1}},
		{Entity: QuotaEntity{IPDefault: true}, Set: map[string]float64{QuotaConnectionCreationRate: 50}},
		{Entity: QuotaEntity{IP: &ip, Client: &client}, Set: map[string]float64{QuotaConnectionCreationRate: 1}}, // mixed: skipped
		{Entity: QuotaEntity{Client: &client}, Set: map[string]float64{QuotaConnectionCreationRate: 1}},          // not an ip key for a client
	}})
	if n := len(im.ClientQuotas); n != 2 {
		t.Fatalf("%d quota entities: %v; want the ip's and the default ip's", n, im.ClientQuotas)
	}
	for _, q := range im.ClientQuotas {
		if !q.Entity.HasIP() || len(q.Values) != 1 || q.Values[QuotaConnectionCreationRate] == 0 {
			t.Errorf("%s: %v; want an ip entity with connection_creation_rate only", q.Entity, q.Values)
		}
	}
	if (QuotaEntity{IPDefault: true}).Key() == (QuotaEntity{}).Key() || (QuotaEntity{IP: &ip}).Key() == (QuotaEntity{Client: &ip}).Key() {
		t.Fatal("an ip entity's key collides with another entity's")
	}
	img, err := decodeImage(encodeImage(im))
	if err != nil || len(img.ClientQuotas) != 2 || img.ClientQuotas[0].Entity.String() != im.ClientQuotas[0].Entity.String() {
		t.Fatalf("decoded snapshot quotas %+v (%v)", img.ClientQuotas, err)
	}
}
