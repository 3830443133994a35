package broker

import (
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka 4.x serves Produce v3 and up, but its ApiVersions answer still says Produce from v0:
// ApiKeys.PRODUCE_API_VERSIONS_RESPONSE_MIN_VERSION = 0 (ApiKeys.java, KAFKA-18659). librdkafka
// derives its features from these ranges (MsgVer1 needs Produce v2 in the range), and with a
// minimum of 3 older librdkafka clients lose features and fail to produce compressed batches.
// Kafka 4.1.1 advertises Produce 0-13. Runnel advertised 3-12.
func TestApiVersionsProduceMinVersionZero(t *testing.T) {
	_, addr, _ := ctBroker(t, nil)
	for _, v := range []int16{0, 1, 2, 3} {
		req := kmsg.NewPtrApiVersionsRequest()
		req.ClientSoftwareName, req.ClientSoftwareVersion = "runnel-test", "1" // KIP-511: a v3+ request names its client
		req.Version = v
		resp := ctRoundTrip(t, addr, req).(*kmsg.ApiVersionsResponse)
		found := false
		for _, k := range resp.ApiKeys {
			if k.ApiKey != kmsg.Produce.Int16() {
				continue
			}
			found = true
			if k.MinVersion != 0 {
				t.Errorf("ApiVersions v%d: Produce advertised from v%d; want v0, as Kafka 4.x advertises (PRODUCE_API_VERSIONS_RESPONSE_MIN_VERSION, KAFKA-18659)", v, k.MinVersion)
			}
		}
		if !found {
			t.Fatalf("ApiVersions v%d: no Produce entry", v)
		}
	}
}

// An InitProducerId naming the empty transactional id is INVALID_REQUEST in Kafka, at every
// version (TransactionCoordinator.handleInitProducerId: "if transactional id is empty then return
// error as invalid request. This is to make TransactionCoordinator's behavior consistent with
// producer client"). Only a null id means idempotent-only. Runnel made "" a transactional id
// and handed it a producer id (and bumped its epoch on each call).
func TestInitProducerIDEmptyTransactionalIDInvalid(t *testing.T) {
	addr, _ := coordinatedBroker(t)
	for _, v := range []int16{0, 1, 2, 3, 4, 5} {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.Version = v
		req.TransactionalID = kmsg.StringPtr("")
		req.TransactionTimeoutMillis = 60000
		req.ProducerID, req.ProducerEpoch = -1, -1
		resp := rawRequest(t, addr, req).(*kmsg.InitProducerIDResponse)
		if resp.ErrorCode != kerr.InvalidRequest.Code || resp.ProducerID != -1 {
			t.Errorf("InitProducerId v%d with transactional id \"\": error %d, producer id %d epoch %d; want INVALID_REQUEST (%d) and producer id -1, as Kafka",
				v, resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch, kerr.InvalidRequest.Code)
		}
	}
}

// topicPartitionCount is the partition count Metadata reports for topic, or -1 when it is unknown.
func topicPartitionCount(t *testing.T, addr, topic string) int {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 9
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp := rawRequest(t, addr, req).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		return -1
	}
	return len(resp.Topics[0].Partitions)
}

// CreateTopics, CreatePartitions and DeleteTopics with a timeout of 0 (or less) are
// REQUEST_TIMED_OUT in Kafka (KRaft), at every version, and change nothing: ControllerApis turns
// the request's timeoutMs into the controller event's deadline
// (ControllerRequestContext.requestTimeoutMsToDeadlineNs(time, timeoutMs)), and QuorumController
// expires an event whose deadline has passed before it writes any record. Kafka 4.1.1 answers
// CreateTopics v2-v7, CreatePartitions v0-v3 and DeleteTopics v1-v6 so (the topic is not created,
// no partition added, the topic not deleted). Runnel carried them out and answered NONE.
func TestZeroTimeoutAdminRequestsTimedOut(t *testing.T) {
	addr, _ := testBroker(t)
	// CreateTopics
	for _, v := range []int16{2, 4, 7} {
		for _, timeout := range []int32{0, -1} {
			name := "ct0-" + string(rune('a'+v)) + map[int32]string{0: "z", -1: "n"}[timeout]
			req := kmsg.NewPtrCreateTopicsRequest()
			req.Version, req.TimeoutMillis = v, timeout
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, 1
			req.Topics = append(req.Topics, rt)
			resp := rawRequest(t, addr, req).(*kmsg.CreateTopicsResponse)
			if got := resp.Topics[0].ErrorCode; got != kerr.RequestTimedOut.Code {
				t.Errorf("CreateTopics v%d timeout %d: error %d; want REQUEST_TIMED_OUT (%d), as Kafka", v, timeout, got, kerr.RequestTimedOut.Code)
			}
			if n := topicPartitionCount(t, addr, name); n != -1 {
				t.Errorf("CreateTopics v%d timeout %d: topic created (%d partitions); Kafka creates nothing", v, timeout, n)
			}
		}
	}
	// A topic made the normal way, for CreatePartitions and DeleteTopics.
	create := kmsg.NewPtrCreateTopicsRequest()
	create.Version, create.TimeoutMillis = 4, 10000
	for _, name := range []string{"cp0", "dt0"} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, 1
		create.Topics = append(create.Topics, rt)
	}
	for _, rt := range rawRequest(t, addr, create).(*kmsg.CreateTopicsResponse).Topics {
		if rt.ErrorCode != 0 {
			t.Fatalf("creating %s: error %d", rt.Topic, rt.ErrorCode)
		}
	}
	for _, v := range []int16{0, 1, 3} {
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.Version, req.TimeoutMillis = v, 0
		req.Topics = append(req.Topics, kmsg.CreatePartitionsRequestTopic{Topic: "cp0", Count: int32(2 + v)})
		resp := rawRequest(t, addr, req).(*kmsg.CreatePartitionsResponse)
		if got := resp.Topics[0].ErrorCode; got != kerr.RequestTimedOut.Code {
			t.Errorf("CreatePartitions v%d timeout 0: error %d; want REQUEST_TIMED_OUT (%d), as Kafka", v, got, kerr.RequestTimedOut.Code)
		}
	}
	if n := topicPartitionCount(t, addr, "cp0"); n != 1 {
		t.Errorf("CreatePartitions with timeout 0: topic has %d partitions; Kafka adds none (1)", n)
	}
	for _, v := range []int16{1, 3, 6} {
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.Version, req.TimeoutMillis = v, 0
		req.TopicNames = []string{"dt0"}
		req.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: kmsg.StringPtr("dt0")}}
		resp := rawRequest(t, addr, req).(*kmsg.DeleteTopicsResponse)
		if got := resp.Topics[0].ErrorCode; got != kerr.RequestTimedOut.Code {
			t.Errorf("DeleteTopics v%d timeout 0: error %d; want REQUEST_TIMED_OUT (%d), as Kafka", v, got, kerr.RequestTimedOut.Code)
		}
	}
	if n := topicPartitionCount(t, addr, "dt0"); n != 1 {
		t.Errorf("DeleteTopics with timeout 0: topic gone (%d); Kafka deletes nothing", n)
	}
}

// DescribeConfigs with synonyms (v1+) lists, for a topic config the topic does not set, only the
// broker synonyms from the broker config of the same name on: ConfigHelper.configSynonyms keeps
// allSynonyms.dropWhile(s => s.name != name). retention.ms maps to log.retention.ms, which has no
// default (only log.retention.hours has), so Kafka lists no synonym at all for retention.ms;
// likewise segment.ms (log.roll.ms), segment.jitter.ms (log.roll.jitter.ms) and flush.ms
// (log.flush.interval.ms). Kafka 4.1.1 answers synonyms [] for these four at v1-v4; Runnel
// listed a DEFAULT_CONFIG synonym under the unset broker name (log.retention.ms=604800000, ...),
// which kafka-configs --describe --all and AdminClient ConfigEntry.synonyms() show.
func TestDescribeConfigsNoSynonymForUnsetBrokerName(t *testing.T) {
	_, addr, reg := ctBroker(t, nil)
	ctCreate(t, reg, "syn", 1, nil)
	for _, v := range []int16{1, 4} {
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.Version = v
		req.IncludeSynonyms = true
		res := kmsg.NewDescribeConfigsRequestResource()
		res.ResourceType = kmsg.ConfigResourceTypeTopic
		res.ResourceName = "syn"
		res.ConfigNames = []string{"retention.ms", "segment.ms", "segment.jitter.ms", "flush.ms"}
		req.Resources = append(req.Resources, res)
		resp := ctRoundTrip(t, addr, req).(*kmsg.DescribeConfigsResponse)
		for _, c := range resp.Resources[0].Configs {
			if len(c.ConfigSynonyms) != 0 {
				var names []string
				for _, s := range c.ConfigSynonyms {
					names = append(names, s.Name)
				}
				t.Errorf("DescribeConfigs v%d %s: synonyms %v; want none, as Kafka (its broker synonym %q is unset)", v, c.Name, names, map[string]string{
					"retention.ms": "log.retention.ms", "segment.ms": "log.roll.ms", "segment.jitter.ms": "log.roll.jitter.ms", "flush.ms": "log.flush.interval.ms"}[c.Name])
			}
		}
	}

	// Once the broker config is set (here a cluster-wide dynamic default), the list starts at it
	// and goes on to the default of the synonym that gives its default: Kafka 4.1.1 describes
	// retention.ms with [DYNAMIC_DEFAULT_BROKER_CONFIG log.retention.ms=1000000,
	// DEFAULT_CONFIG log.retention.hours=168].
	alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
	ar := kmsg.NewIncrementalAlterConfigsRequestResource()
	ar.ResourceType = kmsg.ConfigResourceTypeBroker
	for _, kv := range [][2]string{{"log.retention.ms", "1000000"}, {"log.roll.ms", "2000000"}, {"log.roll.jitter.ms", "5"}, {"log.flush.interval.ms", "100000"}} {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = kv[0], kmsg.StringPtr(kv[1])
		ar.Configs = append(ar.Configs, c)
	}
	alter.Resources = append(alter.Resources, ar)
	if r := ctRoundTrip(t, addr, alter).(*kmsg.IncrementalAlterConfigsResponse); r.Resources[0].ErrorCode != 0 {
		t.Fatalf("setting the broker defaults: %+v", r.Resources[0])
	}
	want := map[string]string{
		"retention.ms":      "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=1000000 DEFAULT_CONFIG:log.retention.hours=168",
		"segment.ms":        "DYNAMIC_DEFAULT_BROKER_CONFIG:log.roll.ms=2000000 DEFAULT_CONFIG:log.roll.hours=168",
		"segment.jitter.ms": "DYNAMIC_DEFAULT_BROKER_CONFIG:log.roll.jitter.ms=5 DEFAULT_CONFIG:log.roll.jitter.hours=0",
		"flush.ms":          "DYNAMIC_DEFAULT_BROKER_CONFIG:log.flush.interval.ms=100000 DEFAULT_CONFIG:log.flush.scheduler.interval.ms=9223372036854775807",
	}
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.Version, req.IncludeSynonyms = 4, true
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "syn"
	res.ConfigNames = []string{"retention.ms", "segment.ms", "segment.jitter.ms", "flush.ms"}
	req.Resources = append(req.Resources, res)
	resp := ctRoundTrip(t, addr, req).(*kmsg.DescribeConfigsResponse)
	for _, c := range resp.Resources[0].Configs {
		var got []string
		for _, s := range c.ConfigSynonyms {
			got = append(got, fmt.Sprintf("%v:%s=%s", s.Source, s.Name, *s.Value))
		}
		if g := strings.Join(got, " "); g != want[c.Name] {
			t.Errorf("%s with its broker config set: synonyms %q; want %q, as Kafka", c.Name, g, want[c.Name])
		}
	}
}

// TestZeroTimeoutDeleteTopicsByID: Kafka answers a DeleteTopics whose timeout has passed from
// DeleteTopicsRequest.getErrorResponse (ControllerApis: controller.findTopicNames with the
// expired deadline fails the whole request): every entry as the request named it (a by-id entry
// has a null name) with REQUEST_TIMED_OUT, an unknown id included. Runnel resolved the id first,
// answered an unknown id UNKNOWN_TOPIC_ID, and a known one with its name filled in.
func TestZeroTimeoutDeleteTopicsByID(t *testing.T) {
	addr, _ := testBroker(t)
	create := kmsg.NewPtrCreateTopicsRequest()
	create.Version, create.TimeoutMillis = 7, 10000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "dtid0", 1, 1
	create.Topics = append(create.Topics, rt)
	cresp := rawRequest(t, addr, create).(*kmsg.CreateTopicsResponse)
	if cresp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create: error %d", cresp.Topics[0].ErrorCode)
	}
	id := cresp.Topics[0].TopicID
	unknown := [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}

	req := kmsg.NewPtrDeleteTopicsRequest()
	req.Version, req.TimeoutMillis = 6, 0
	req.Topics = []kmsg.DeleteTopicsRequestTopic{{TopicID: id}, {TopicID: unknown}}
	resp := rawRequest(t, addr, req).(*kmsg.DeleteTopicsResponse)
	for _, r := range resp.Topics {
		name := "<null>"
		if r.Topic != nil {
			name = *r.Topic
		}
		if r.ErrorCode != kerr.RequestTimedOut.Code || r.Topic != nil {
			t.Errorf("DeleteTopics v6 timeout 0 by id %x: name %s, error %d; want name null and REQUEST_TIMED_OUT (%d), as Kafka's getErrorResponse",
				r.TopicID[:4], name, r.ErrorCode, kerr.RequestTimedOut.Code)
		}
	}
}
