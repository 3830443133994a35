package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// reviewAlterQuota sends one AlterClientQuotas entry (entity parts as type, name pairs; a nil
// name is the default) with ops and returns the entry's error code and message.
func reviewAlterQuota(t *testing.T, addr string, entity [][2]*string, ops ...kmsg.AlterClientQuotasRequestEntryOp) (int16, string) {
	t.Helper()
	req := kmsg.NewPtrAlterClientQuotasRequest()
	req.Version = 1
	e := kmsg.NewAlterClientQuotasRequestEntry()
	for _, p := range entity {
		ent := kmsg.NewAlterClientQuotasRequestEntryEntity()
		ent.Type, ent.Name = *p[0], p[1]
		e.Entity = append(e.Entity, ent)
	}
	e.Ops = ops
	req.Entries = append(req.Entries, e)
	resp := ctRoundTrip(t, addr, req).(*kmsg.AlterClientQuotasResponse)
	if len(resp.Entries) != 1 {
		t.Fatalf("AlterClientQuotas answered %d entries; want 1", len(resp.Entries))
	}
	msg := ""
	if resp.Entries[0].ErrorMessage != nil {
		msg = *resp.Entries[0].ErrorMessage
	}
	return resp.Entries[0].ErrorCode, msg
}

func reviewOp(key string, v float64) kmsg.AlterClientQuotasRequestEntryOp {
	op := kmsg.NewAlterClientQuotasRequestEntryOp()
	op.Key, op.Value = key, v
	return op
}

// Kafka's ClientQuotaControlManager.validateQuotaKeyValue: producer_byte_rate and
// consumer_byte_rate are LONG configs (QuotaConfig.buildUserClientQuotaConfigDef), and a
// fractional value is INVALID_REQUEST ("producer_byte_rate cannot be a fractional value",
// getErrorForIntegralQuotaValue). Runnel checks integrality only for connection_creation_rate.
func TestQuotaFractionalByteRateRefused(t *testing.T) {
	_, addr, _ := ctBroker(t, nil)
	for _, key := range []string{"producer_byte_rate", "consumer_byte_rate"} {
		code, msg := reviewAlterQuota(t, addr, [][2]*string{{strp("user"), strp("alice")}}, reviewOp(key, 1024.5))
		if code != kerr.InvalidRequest.Code {
			t.Errorf("%s=1024.5 for user alice answered %v %q; Kafka answers INVALID_REQUEST (a LONG quota cannot be fractional)", key, kerr.ErrorForCode(code), msg)
		}
	}
}

// Kafka's ClientQuotaControlManager.validateEntity: an entity name that is the empty string
// (not null, the default) is INVALID_REQUEST "Empty client-id not supported", for every entity
// type. Runnel refuses an empty user name but stores a quota for client-id "".
func TestQuotaEmptyClientIDRefused(t *testing.T) {
	_, addr, _ := ctBroker(t, nil)
	code, msg := reviewAlterQuota(t, addr, [][2]*string{{strp("client-id"), strp("")}}, reviewOp("producer_byte_rate", 1024))
	if code != kerr.InvalidRequest.Code {
		t.Errorf("a quota for client-id \"\" answered %v %q; Kafka answers INVALID_REQUEST (Empty client-id not supported)", kerr.ErrorForCode(code), msg)
	}
}

// Kafka's ClientQuotaControlManager.alterClientQuotas: the same key twice in one entity's ops
// is INVALID_REQUEST ("Duplicate quota key ... not updating quota for this entity"), and the
// entity is left as it was. Runnel applies both (the last set wins, or a set and a remove of
// the same key both go to the controller).
func TestQuotaDuplicateKeyRefused(t *testing.T) {
	_, addr, _ := ctBroker(t, nil)
	code, msg := reviewAlterQuota(t, addr, [][2]*string{{strp("user"), strp("alice")}},
		reviewOp("producer_byte_rate", 1000), reviewOp("producer_byte_rate", 2000))
	if code != kerr.InvalidRequest.Code {
		t.Errorf("producer_byte_rate set twice for one entity answered %v %q; Kafka answers INVALID_REQUEST (Duplicate quota key)", kerr.ErrorForCode(code), msg)
	}
}

// Kafka's ClientQuotasImage.describe: a filter component with an empty entity type is
// INVALID_REQUEST ("Invalid empty entity type."), checked before the type is looked up;
// Runnel answers UNSUPPORTED_VERSION, Kafka's error for a type it does not know.
func TestDescribeQuotasEmptyEntityType(t *testing.T) {
	_, addr, _ := ctBroker(t, nil)
	req := kmsg.NewPtrDescribeClientQuotasRequest()
	req.Version = 1
	c := kmsg.NewDescribeClientQuotasRequestComponent()
	c.EntityType, c.MatchType = "", kmsg.QuotasMatchTypeAny
	req.Components = append(req.Components, c)
	resp := ctRoundTrip(t, addr, req).(*kmsg.DescribeClientQuotasResponse)
	if resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("a filter with an empty entity type answered %v; Kafka answers INVALID_REQUEST", kerr.ErrorForCode(resp.ErrorCode))
	}
}

// Kafka's ClientQuotaControlManager validates the keys of the values an entry sets only:
// removing an unknown key, or one the entity type cannot have (connection_creation_rate of a
// user), is no error and removes nothing. Runnel refused the entry INVALID_REQUEST.
func TestQuotaRemoveOfAKeyTheEntityCannotHave(t *testing.T) {
	_, addr, _ := ctBroker(t, nil)
	for _, key := range []string{"foo_rate", "connection_creation_rate"} {
		op := reviewOp(key, 0)
		op.Remove = true
		if code, msg := reviewAlterQuota(t, addr, [][2]*string{{strp("user"), strp("u1")}}, op); code != 0 {
			t.Errorf("removing %s of user u1 answered %v %q; Kafka answers NONE", key, kerr.ErrorForCode(code), msg)
		}
	}
}
