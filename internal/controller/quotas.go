package controller

import (
	"slices"
	"strings"
)

// Client quotas (KIP-13, KIP-55, KIP-124, KIP-546): rates a broker holds a user, a client id or
// both to, set with AlterClientQuotas (kafka-configs --entity-type users/clients) and enforced by
// every broker on its own traffic (internal/broker/quotas.go).

// Quota keys Runnel enforces.
const (
	QuotaProducerByteRate  = "producer_byte_rate" // bytes/s of produce requests
	QuotaConsumerByteRate  = "consumer_byte_rate" // bytes/s of fetch responses
	QuotaRequestPercentage = "request_percentage" // % of one request-handling thread
	// QuotaControllerMutationRate: partitions created or deleted per second (KIP-599), by
	// CreateTopics, CreatePartitions and DeleteTopics.
	QuotaControllerMutationRate = "controller_mutation_rate"
	// QuotaConnectionCreationRate: connections a client IP may open per second (KIP-612); the
	// only key of ip entities.
	QuotaConnectionCreationRate = "connection_creation_rate"
)

// QuotaKeys are the keys a user or client id quota may set.
var QuotaKeys = []string{QuotaConsumerByteRate, QuotaControllerMutationRate, QuotaProducerByteRate, QuotaRequestPercentage}

// IPQuotaKeys are the keys an ip quota may set.
var IPQuotaKeys = []string{QuotaConnectionCreationRate}

// KeysFor returns the keys an entity's quota may set.
func (e QuotaEntity) KeysFor() []string {
	if e.HasIP() {
		return IPQuotaKeys
	}
	return QuotaKeys
}

// QuotaEntity names what a quota applies to: a user, a client id, or a user's client id; or,
// alone, a client IP. Each part is absent, the default (Default*: every user, client id or IP
// without a quota of its own), or a name (which may be empty: Kafka's empty client id).
type QuotaEntity struct {
	User          *string `json:"user,omitempty"`
	UserDefault   bool    `json:"user_default,omitempty"`
	Client        *string `json:"client,omitempty"`
	ClientDefault bool    `json:"client_default,omitempty"`
	IP            *string `json:"ip,omitempty"` // in netip's canonical form
	IPDefault     bool    `json:"ip_default,omitempty"`
}

// HasUser, HasClient and HasIP report whether the entity has that part (a name or the default).
func (e QuotaEntity) HasUser() bool   { return e.User != nil || e.UserDefault }
func (e QuotaEntity) HasClient() bool { return e.Client != nil || e.ClientDefault }
func (e QuotaEntity) HasIP() bool     { return e.IP != nil || e.IPDefault }

// valid reports whether the entity names something: a user and/or client id, or an IP alone.
func (e QuotaEntity) valid() bool {
	if e.HasIP() {
		return !e.HasUser() && !e.HasClient()
	}
	return e.HasUser() || e.HasClient()
}

// Key is the entity's canonical form, unique per entity.
func (e QuotaEntity) Key() string {
	part := func(name *string, def bool) string {
		switch {
		case def:
			return "*"
		case name != nil:
			return "=" + *name
		}
		return "-"
	}
	key := part(e.User, e.UserDefault) + "\x00" + part(e.Client, e.ClientDefault)
	if e.HasIP() {
		key += "\x00" + part(e.IP, e.IPDefault)
	}
	return key
}

// String is the entity as kafka-configs shows it.
func (e QuotaEntity) String() string {
	var parts []string
	if e.HasUser() {
		name := "<default>"
		if e.User != nil {
			name = *e.User
		}
		parts = append(parts, "user="+name)
	}
	if e.HasClient() {
		name := "<default>"
		if e.Client != nil {
			name = *e.Client
		}
		parts = append(parts, "client-id="+name)
	}
	if e.HasIP() {
		name := "<default>"
		if e.IP != nil {
			name = *e.IP
		}
		parts = append(parts, "ip="+name)
	}
	return strings.Join(parts, ", ")
}

// ClientQuota is one entity's quota values. A *ClientQuota is never modified once in an image.
type ClientQuota struct {
	Entity QuotaEntity        `json:"entity"`
	Values map[string]float64 `json:"values"`
}

// AlterClientQuotas sets and removes quota values (AlterClientQuotas). Proposers validate them;
// Apply skips what cannot apply.
type AlterClientQuotas struct {
	Entries []QuotaAlteration `json:"entries"`
}

// QuotaAlteration changes one entity's values: Remove first, then Set. An entity left without a
// value is gone.
type QuotaAlteration struct {
	Entity QuotaEntity        `json:"entity"`
	Set    map[string]float64 `json:"set,omitempty"`
	Remove []string           `json:"remove,omitempty"`
}

func applyAlterClientQuotas(im *Image, a *AlterClientQuotas) {
	for _, alt := range a.Entries {
		if !alt.Entity.valid() {
			continue
		}
		key := alt.Entity.Key()
		i := slices.IndexFunc(im.ClientQuotas, func(q *ClientQuota) bool { return q.Entity.Key() == key })
		values := map[string]float64{}
		if i >= 0 {
			for k, v := range im.ClientQuotas[i].Values {
				values[k] = v
			}
		}
		for _, k := range alt.Remove {
			delete(values, k)
		}
		for k, v := range alt.Set {
			if slices.Contains(alt.Entity.KeysFor(), k) && v > 0 {
				values[k] = v
			}
		}
		quotas := slices.Clone(im.ClientQuotas) // the image's slice is never modified
		switch {
		case len(values) == 0 && i >= 0:
			quotas = slices.Delete(quotas, i, i+1)
		case len(values) == 0:
		case i >= 0:
			quotas[i] = &ClientQuota{Entity: alt.Entity, Values: values}
		default:
			quotas = append(quotas, &ClientQuota{Entity: alt.Entity, Values: values})
			slices.SortFunc(quotas, func(a, b *ClientQuota) int { return strings.Compare(a.Entity.Key(), b.Entity.Key()) })
		}
		im.ClientQuotas = quotas
	}
}
