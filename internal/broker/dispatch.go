package broker

import (
	"context"
	"regexp"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// api is one Kafka API the broker serves: the versions that work, and its handler.
type api struct {
	min, max int16
	handle   func(ctx context.Context, r *request) reply
}

// apis is every API served. ApiVersions advertises exactly these ranges.
var apis map[int16]api

func init() { register(kmsg.ApiVersions, 0, 4, handleApiVersions) }

// register adds an API; each handler file calls it from init.
func register(key kmsg.Key, min, max int16, handle func(ctx context.Context, r *request) reply) {
	if apis == nil {
		apis = map[int16]api{}
	}
	apis[key.Int16()] = api{min, max, handle}
}

func handleApiVersions(_ context.Context, r *request) reply {
	resp := r.req.ResponseKind().(*kmsg.ApiVersionsResponse)
	if req, ok := r.req.(*kmsg.ApiVersionsRequest); ok && req.Version >= 3 {
		if !softwareNamePattern.MatchString(req.ClientSoftwareName) || !softwareNamePattern.MatchString(req.ClientSoftwareVersion) {
			// As Kafka's ApiVersionsRequest.isValid (KIP-511): INVALID_REQUEST and no APIs.
			resp.ErrorCode = kerr.InvalidRequest.Code
			return reply{resp: resp}
		}
		r.conn.software = req.ClientSoftwareName
	}
	resp.ApiKeys = apiVersionKeys()
	if resp.Version >= 3 {
		// transaction.version 2 (KIP-890): Kafka 4.x clients then bump the epoch at every
		// EndTxn and let Produce v12 and TxnOffsetCommit v5 add partitions to the transaction.
		// share.version 1 (KIP-932) and streams.version 1 (KIP-1071): share and streams groups
		// are on, as in a Kafka 4.2 cluster. And the command level (features.go).
		r.conn.b.features(resp)
	}
	return reply{resp: resp}
}

// softwareNamePattern is what a client's software name and version must be from ApiVersions v3
// (KIP-511; Kafka's ApiVersionsRequest.SOFTWARE_NAME_VERSION_PATTERN).
var softwareNamePattern = regexp.MustCompile(`^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$`)

// unsupportedApiVersions is Kafka's answer to an ApiVersions request of a version it does not
// know (KIP-511, ApiVersionsRequest.getErrorResponse): UNSUPPORTED_VERSION in a v0 response
// listing only ApiVersions' own versions, so the client retries at the highest of them. A
// client that gets the whole table instead may take it as the answer (franz-go does) and go
// without the features, which only v3+ carries.
func unsupportedApiVersions(r *request) kmsg.Response {
	r.version = 0
	a := apis[kmsg.ApiVersions.Int16()]
	return &kmsg.ApiVersionsResponse{Version: 0, ErrorCode: kerr.UnsupportedVersion.Code,
		ApiKeys: []kmsg.ApiVersionsResponseApiKey{{ApiKey: kmsg.ApiVersions.Int16(), MinVersion: a.min, MaxVersion: a.max}}}
}

func apiVersionKeys() []kmsg.ApiVersionsResponseApiKey {
	keys := make([]kmsg.ApiVersionsResponseApiKey, 0, len(apis))
	for k := int16(0); k < 100; k++ {
		if a, ok := apis[k]; ok {
			lowest := a.min
			if k == kmsg.Produce.Int16() {
				// As Kafka 4.x (ApiKeys.PRODUCE_API_VERSIONS_RESPONSE_MIN_VERSION, KAFKA-18659):
				// Produce is advertised from v0, though v0-v2 requests are refused, because
				// librdkafka produces compressed batches only to a broker that lists v0.
				lowest = 0
			}
			keys = append(keys, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: lowest, MaxVersion: a.max})
		}
	}
	return keys
}
