package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/batch"
)

// A topic with compression.type=zstd holds zstd batches (the broker recompresses what
// producers send). Fetch before v10 (KIP-110) predates zstd: Kafka answers such a partition
// UNSUPPORTED_COMPRESSION_TYPE rather than hand an old consumer batches it cannot decode
// (KafkaApis.handleFetchRequest, maybeConvertFetchedData: "Fetching messages is disabled for
// ZStandard compressed partition": logConfig.compressionType == ZSTD && versionId < 10).
func TestFetchBeforeV10ZstdTopicUnsupportedCompression(t *testing.T) {
	_, addr, reg := ctBroker(t, nil)
	ctCreate(t, reg, "z", 1, map[string]string{"compression.type": "zstd"})
	if resp := ctRoundTrip(t, addr, ctProduce(7, -1, ctPart{"z", 0, ctBatch(3, 100)})).(*kmsg.ProduceResponse); resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("produce: error %d", resp.Topics[0].Partitions[0].ErrorCode)
	}
	for _, v := range []int16{4, 9} {
		resp := ctRoundTrip(t, addr, ctFetch(v, 100, 1, "z", 0, 0)).(*kmsg.FetchResponse)
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != kerr.UnsupportedCompressionType.Code {
			t.Errorf("Fetch v%d of a compression.type=zstd topic: error %d with %d bytes of records; want UNSUPPORTED_COMPRESSION_TYPE (%d), as Kafka before Fetch v10",
				v, p.ErrorCode, len(p.RecordBatches), kerr.UnsupportedCompressionType.Code)
		}
	}
	// v10 knows zstd: records as usual.
	resp := ctRoundTrip(t, addr, ctFetch(10, 100, 1, "z", 0, 0)).(*kmsg.FetchResponse)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Fatalf("Fetch v10: error %d, %d bytes; want the records", p.ErrorCode, len(p.RecordBatches))
	}
}

// Metadata v10 and v11 carry a topic id field, but lookups by id begin at v12: Kafka refuses a
// v10/v11 request naming a topic by id, or with a null name (KafkaApis.handleTopicMetadataRequest:
// "Topic name can not be null for version", "Topic IDs are not supported in requests for
// version" → InvalidRequestException → MetadataRequest.getErrorResponse: every topic
// INVALID_REQUEST). Runnel answered the v10/v11 lookup by id as v12 does.
func TestMetadataV10V11TopicIDRefused(t *testing.T) {
	_, addr, reg := ctBroker(t, nil)
	tp := ctCreate(t, reg, "byid", 1, nil)
	for _, v := range []int16{10, 11} {
		for _, withName := range []bool{false, true} {
			req := kmsg.NewPtrMetadataRequest()
			req.Version = v
			rt := kmsg.NewMetadataRequestTopic()
			rt.TopicID = tp.ID
			if withName {
				rt.Topic = kmsg.StringPtr("byid")
			}
			req.Topics = append(req.Topics, rt)
			resp := ctRoundTrip(t, addr, req).(*kmsg.MetadataResponse)
			if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.InvalidRequest.Code {
				var got []int16
				for _, mt := range resp.Topics {
					got = append(got, mt.ErrorCode)
				}
				t.Errorf("Metadata v%d naming a topic by id (name given: %v): topic errors %v; want [%d] (INVALID_REQUEST: ids only from v12)", v, withName, got, kerr.InvalidRequest.Code)
			}
		}
	}
}

// A zstd batch in Produce before v7 is refused before the log, by KafkaApis'
// validateRecords (UNSUPPORTED_COMPRESSION_TYPE): Kafka's answer carries log start -1, as
// for every refusal that does not reach the log.
func TestProduceZstdBeforeV7LogStart(t *testing.T) {
	_, addr, reg := ctBroker(t, nil)
	ctCreate(t, reg, "z6", 1, nil)
	recs, err := batch.Compress(batch.CodecZstd, batch.AppendRecord(nil, 0, 0, nil, []byte("v"), 0, nil))
	if err != nil {
		t.Fatal(err)
	}
	b := batch.AppendBatch(nil, batch.Header{Attributes: int16(batch.CodecZstd), BaseTimestamp: 1, MaxTimestamp: 1,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, RecordCount: 1}, recs)
	p := ctRoundTrip(t, addr, ctProduce(6, -1, ctPart{"z6", 0, b})).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	if p.ErrorCode != kerr.UnsupportedCompressionType.Code || p.LogStartOffset != -1 {
		t.Errorf("Produce v6 of a zstd batch: %v, log start %d; want UNSUPPORTED_COMPRESSION_TYPE, -1", kerr.ErrorForCode(p.ErrorCode), p.LogStartOffset)
	}
}
