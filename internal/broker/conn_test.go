package broker

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/cluster"
	"github.com/runnel-dev/runnel/internal/logstore"
	"github.com/runnel-dev/runnel/internal/topics"
)

// Tests of the connection layer: Kafka's answers to bad input, pipelining, long polls, shutdown
// and backpressure, over raw connections with hand-framed requests. Helpers are prefixed "ct".

const ctClientID = "conn-test"

// ctBroker serves a fresh registry on a loopback port, as node 1 of a one-node cluster, like
// testBroker, with mod applied to the config, and returns the broker too.
func ctBroker(tb testing.TB, mod func(*Config)) (*Broker, string, *topics.Registry) {
	tb.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	flusher := logstore.NewFlusher(0)
	dir := tb.TempDir()
	reg, err := topics.Open(topics.Options{DataDir: dir, Flusher: flusher, Logger: quiet})
	if err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	cln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := ln.Addr().(*net.TCPAddr)
	node, err := cluster.Start(cluster.Config{NodeID: 1, Listener: cln, KafkaHost: "127.0.0.1", KafkaPort: int32(addr.Port),
		DataDir: dir, Registry: reg, Logger: quiet})
	if err != nil {
		tb.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer wcancel()
	if err := node.WaitReady(wctx); err != nil {
		tb.Fatal(err)
	}
	cfg := Config{NodeID: 1, AdvertisedHost: "127.0.0.1", AdvertisedPort: int32(addr.Port), Cluster: node,
		AutoCreateTopics: true, Logger: quiet}
	if mod != nil {
		mod(&cfg)
	}
	b, err := New(cfg, reg)
	if err != nil {
		tb.Fatal(err)
	}
	testBrokers.Store(reg, b)
	go b.Serve(ln)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		b.Shutdown(ctx)
		node.Close()
		reg.Close()
		flusher.Close()
		testBrokers.Delete(reg)
	})
	return b, addr.String(), reg
}

// testBrokers maps a test's registry to its broker, for helpers that create topics.
var testBrokers sync.Map

// ctFrame frames a request by hand: size, key, version, correlation id, client id, the empty
// header tags of flexible versions, body.
func ctFrame(key, version int16, corr int32, flexible bool, body []byte) []byte {
	b := make([]byte, 4, 4+10+len(ctClientID)+1+len(body))
	b = binary.BigEndian.AppendUint16(b, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, uint16(len(ctClientID)))
	b = append(b, ctClientID...)
	if flexible {
		b = append(b, 0)
	}
	b = append(b, body...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// ctEncode frames req at its version.
func ctEncode(req kmsg.Request, corr int32) []byte {
	return ctFrame(req.Key(), req.GetVersion(), corr, req.IsFlexible(), req.AppendTo(nil))
}

// ctReadFrame reads one response frame and returns its correlation id and the rest.
func ctReadFrame(r io.Reader) (int32, []byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > 256<<20 {
		return 0, nil, fmt.Errorf("response frame of %d bytes", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, nil, err
	}
	return int32(binary.BigEndian.Uint32(body)), body[4:], nil
}

// ctDecode decodes the body of the response to req.
func ctDecode(req kmsg.Request, body []byte) (kmsg.Response, error) {
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() && req.Key() != kmsg.ApiVersions.Int16() {
		if len(body) == 0 || body[0] != 0 {
			return nil, fmt.Errorf("response header tags missing or not empty")
		}
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, err
	}
	return resp, nil
}

func ctDial(tb testing.TB, addr string) net.Conn {
	tb.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { nc.Close() })
	return nc
}

// ctRoundTrip sends req on a fresh connection and decodes the answer.
func ctRoundTrip(tb testing.TB, addr string, req kmsg.Request) kmsg.Response {
	tb.Helper()
	nc := ctDial(tb, addr)
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	return ctExchange(tb, nc, req, 77)
}

// ctExchange sends req on nc and decodes the answer.
func ctExchange(tb testing.TB, nc net.Conn, req kmsg.Request, corr int32) kmsg.Response {
	tb.Helper()
	if _, err := nc.Write(ctEncode(req, corr)); err != nil {
		tb.Fatalf("%s v%d: write: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	got, body, err := ctReadFrame(nc)
	if err != nil {
		tb.Fatalf("%s v%d: reading the response: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	if got != corr {
		tb.Fatalf("%s v%d: correlation id = %d; want %d", kmsg.NameForKey(req.Key()), req.GetVersion(), got, corr)
	}
	resp, err := ctDecode(req, body)
	if err != nil {
		tb.Fatalf("%s v%d: decoding the response: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return resp
}

// ctExpectClosed checks that the broker closes nc without answering.
func ctExpectClosed(t *testing.T, nc net.Conn, what string) {
	t.Helper()
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	var buf [512]byte
	n, err := nc.Read(buf[:])
	switch {
	case n > 0:
		t.Errorf("%s: answered with %d bytes; want the connection closed", what, n)
	case err == nil:
		t.Errorf("%s: read returned nothing and no error; want the connection closed", what)
	default:
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Errorf("%s: connection still open after 5s; want it closed", what)
		}
	}
}

// ctHealthy checks that a new connection is served: a Metadata request is answered.
func ctHealthy(t *testing.T, addr string) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("second connection: %v", err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	if _, err := nc.Write(ctEncode(req, 5)); err != nil {
		t.Fatalf("second connection: write: %v", err)
	}
	corr, body, err := ctReadFrame(nc)
	if err != nil {
		t.Fatalf("second connection: Metadata not answered: %v", err)
	}
	if corr != 5 {
		t.Fatalf("second connection: correlation id = %d; want 5", corr)
	}
	if _, err := ctDecode(req, body); err != nil {
		t.Fatalf("second connection: decoding Metadata: %v", err)
	}
}

// ctPing checks that a new connection answers ApiVersions.
func ctPing(t *testing.T, addr string) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatalf("ping: %v", err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "runnel-test", "1" // KIP-511: a v3+ request names its client
	req.Version = 3
	if _, err := nc.Write(ctEncode(req, 9)); err != nil {
		t.Fatalf("ping: write: %v", err)
	}
	corr, body, err := ctReadFrame(nc)
	if err != nil {
		t.Fatalf("ping: ApiVersions not answered: %v", err)
	}
	resp, err := ctDecode(req, body)
	if err != nil || corr != 9 || resp.(*kmsg.ApiVersionsResponse).ErrorCode != 0 {
		t.Fatalf("ping: ApiVersions = corr %d, %v, %+v", corr, err, resp)
	}
}

// ctBatch is a producer batch of n records with values of size bytes.
func ctBatch(n, size int) []byte {
	var body []byte
	ts := time.Now().UnixMilli()
	for i := 0; i < n; i++ {
		body = batch.AppendRecord(body, 0, int32(i), []byte(fmt.Sprintf("k%d", i)), bytes.Repeat([]byte{'v'}, size), 0, nil)
	}
	return batch.AppendBatch(nil, batch.Header{LastOffsetDelta: int32(n - 1), BaseTimestamp: ts, MaxTimestamp: ts,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, RecordCount: int32(n)}, body)
}

type ctPart struct {
	topic string
	p     int32
	recs  []byte
}

func ctProduce(version, acks int16, parts ...ctPart) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = version, acks, 10000
	for _, p := range parts {
		if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != p.topic {
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = p.topic
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = p.p, p.recs
		rt := &req.Topics[len(req.Topics)-1]
		rt.Partitions = append(rt.Partitions, rp)
	}
	return req
}

func ctFetch(version int16, maxWait, minBytes int32, topic string, part int32, offset int64) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = version, maxWait, minBytes, 50<<20
	req.SessionID, req.SessionEpoch = 0, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = part, offset, 10<<20, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// ctEnds is the end offset of every partition of every topic.
func ctEnds(reg *topics.Registry) map[string]int64 {
	ends := map[string]int64{}
	for _, t := range reg.List() {
		for _, p := range t.Partitions {
			ends[fmt.Sprintf("%s/%d", t.Name, p.Index)] = p.Log.EndOffset()
		}
	}
	return ends
}

// ctCreate creates a topic through the controller of the test broker serving reg, and returns
// it as the registry has it.
func ctCreate(t testing.TB, reg *topics.Registry, name string, parts int32, configs map[string]string) *topics.Topic {
	t.Helper()
	v, ok := testBrokers.Load(reg)
	if !ok {
		t.Fatal("ctCreate: no test broker serves this registry")
	}
	b := v.(*Broker)
	assignments, aerr := b.assignReplicas(0, parts, 1)
	if aerr != nil {
		t.Fatal(aerr.msg)
	}
	tp, aerr := b.createTopicNow(context.Background(), name, configs, assignments)
	if aerr != nil {
		t.Fatalf("creating %s: %s", name, aerr.msg)
	}
	return tp
}

func ctSameEnds(t *testing.T, what string, before, after map[string]int64) {
	t.Helper()
	for k, v := range after {
		if before[k] != v {
			t.Errorf("%s: end offset of %s = %d; want %d (nothing appended)", what, k, v, before[k])
		}
	}
	if len(before) != len(after) {
		t.Errorf("%s: %d partitions before, %d after", what, len(before), len(after))
	}
}

// TestConnClosesOnBadInput: input Kafka cannot parse or does not support closes the connection
// without an answer; nothing is appended and other connections are unaffected.
func TestConnClosesOnBadInput(t *testing.T) {
	_, addr, reg := ctBroker(t, func(c *Config) { c.MaxRequestBytes = 64 << 10 })
	ctCreate(t, reg, "cc", 1, nil)
	valid := ctEncode(ctProduce(9, 1, ctPart{"cc", 0, ctBatch(1, 10)}), 1)
	resize := func(b []byte) []byte {
		binary.BigEndian.PutUint32(b, uint32(len(b)-4))
		return b
	}
	header := func(key, version int16) []byte { return ctFrame(key, version, 1, false, nil) }
	metadata := kmsg.NewPtrMetadataRequest()
	metadata.Version = 12
	metadata.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("cc")}, {Topic: kmsg.StringPtr("other")}}
	validMeta := ctEncode(metadata, 1)
	cases := []struct {
		name      string
		input     []byte
		halfClose bool // close our write side after the input
	}{
		{"frame above socket.request.max.bytes", ctEncode(ctProduce(9, 1, ctPart{"cc", 0, ctBatch(1, 100<<10)}), 1), false},
		{"200 MiB size header without body", binary.BigEndian.AppendUint32(nil, 200<<20), false},
		{"negative size", []byte{0xff, 0xff, 0xff, 0xff}, false},
		{"size 0", []byte{0, 0, 0, 0}, false},
		{"size 7", append(binary.BigEndian.AppendUint32(nil, 7), 0, 0, 0, 0, 0, 0, 0), false},
		{"header cut short", append(binary.BigEndian.AppendUint32(nil, 9), 0, 3, 0, 1, 0, 0, 0, 1, 0), false},
		{"client id beyond the frame", append(binary.BigEndian.AppendUint32(nil, 12), 0, 3, 0, 1, 0, 0, 0, 1, 0, 100, 'a', 'b'), false},
		{"unknown API key 999", header(999, 0), false},
		{"negative API key", header(-1, 0), false},
		{"Produce v99", ctFrame(0, 99, 1, true, valid[4+10+len(ctClientID)+1:]), false},
		{"Produce v2 (below the minimum)", header(0, 2), false},
		{"Metadata v99", header(3, 99), false},
		{"Metadata v-1", header(3, -1), false},
		{"Fetch v99", header(1, 99), false},
		{"truncated Produce body", resize(bytes.Clone(valid[:len(valid)-10])), false},
		{"Produce header only", header(0, 9), false},
		{"garbage Produce body", ctFrame(0, 7, 1, false, bytes.Repeat([]byte{0x7f}, 64)), false},
		{"truncated Metadata body", resize(bytes.Clone(validMeta[:len(validMeta)-5])), false},
		{"flexible header tags cut off", ctFrame(3, 12, 1, false, []byte{5}), false},
		{"frame cut off, then EOF", valid[:20], true},
		{"valid frame, then a partial one", append(bytes.Clone(validMeta), valid[:30]...), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := ctEnds(reg)
			nc := ctDial(t, addr)
			nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
			nc.Write(tc.input) // the broker may close before it has read all; a write error is fine
			if tc.halfClose {
				nc.(*net.TCPConn).CloseWrite()
			}
			if strings.HasPrefix(tc.name, "valid frame") { // the valid request is answered first
				nc.SetReadDeadline(time.Now().Add(5 * time.Second))
				if corr, body, err := ctReadFrame(nc); err != nil || corr != 1 {
					t.Fatalf("valid request before the partial one: corr %d, %v", corr, err)
				} else if _, err := ctDecode(metadata, body); err != nil {
					t.Fatalf("valid request before the partial one: %v", err)
				}
			}
			ctExpectClosed(t, nc, tc.name)
			ctHealthy(t, addr)
			ctSameEnds(t, tc.name, before, ctEnds(reg))
		})
	}
}

// TestConnHeaderTagCountDoS: a flexible request whose tagged-field count is 2^32-1 with no tags
// following must be rejected at once, not spin the read loop billions of times.
//
// Upstream kmsg.SkipTags and internalReadTags (every flexible request body, in req.ReadFrom) loop
// count times even after the reader ran out of bytes: one ~25-byte request pinned a read loop for
// about 60 s (header) or 100 s (body) of CPU. The header uses conn.go's bounded skipTags; bodies
// are decoded by the patched kmsg in third_party/kmsg.
func TestConnHeaderTagCountDoS(t *testing.T) {
	_, addr, _ := ctBroker(t, nil)
	for _, tc := range []struct {
		name  string
		input []byte
	}{
		// Metadata v12: header tags = uvarint 0xffffffff, nothing after.
		{"header", ctFrame(3, 12, 1, false, []byte{0xff, 0xff, 0xff, 0xff, 0x0f})},
		// Metadata v12: empty header tags; body: null topics, two false bools, body tags = 2^32-1.
		{"body", ctFrame(3, 12, 1, true, []byte{0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := ctDial(t, addr)
			start := time.Now()
			nc.Write(tc.input)
			ctExpectClosed(t, nc, tc.name+" tag count 2^32-1")
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("malformed tags rejected after %v; want at once", d)
			}
			ctHealthy(t, addr)
		})
	}
}

// TestConnApiVersionsUnsupported: an ApiVersions request of a version the broker does not know
// gets a v0 response with UNSUPPORTED_VERSION listing ApiVersions' versions alone (KIP-511, as
// Kafka), and the connection stays open. The whole table was listed: franz-go took it as the
// answer and went without the features (its first transactions at version 1).
func TestConnApiVersionsUnsupported(t *testing.T) {
	_, addr, _ := ctBroker(t, nil)
	for _, v := range []int16{5, 99, 32767, -1} { // 5: the first version past what is served (0-4)
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			nc := ctDial(t, addr)
			nc.SetDeadline(time.Now().Add(5 * time.Second))
			// A newer client sends a flexible header and a body we cannot know.
			if _, err := nc.Write(ctFrame(18, v, 42, true, []byte{3, 'c', 'l', 3, '9', '.', '9', 0})); err != nil {
				t.Fatal(err)
			}
			corr, body, err := ctReadFrame(nc)
			if err != nil {
				t.Fatalf("ApiVersions v%d: %v; want a v0 response", v, err)
			}
			if corr != 42 {
				t.Errorf("ApiVersions v%d: correlation id = %d; want 42", v, corr)
			}
			resp := kmsg.NewPtrApiVersionsResponse()
			resp.Version = 0
			if err := resp.ReadFrom(body); err != nil {
				t.Fatalf("ApiVersions v%d: decoding as v0: %v", v, err)
			}
			if resp.ErrorCode != kerr.UnsupportedVersion.Code {
				t.Errorf("ApiVersions v%d: error = %s; want UNSUPPORTED_VERSION", v, errName(resp.ErrorCode))
			}
			av := apis[kmsg.ApiVersions.Int16()]
			if len(resp.ApiKeys) != 1 || resp.ApiKeys[0].ApiKey != kmsg.ApiVersions.Int16() ||
				resp.ApiKeys[0].MinVersion != av.min || resp.ApiKeys[0].MaxVersion != av.max {
				t.Errorf("ApiVersions v%d: keys %+v; want ApiVersions %d-%d alone", v, resp.ApiKeys, av.min, av.max)
			}
			// The client retries on the same connection with a version we support.
			req := kmsg.NewPtrApiVersionsRequest()
			req.ClientSoftwareName, req.ClientSoftwareVersion = "runnel-test", "1" // KIP-511: a v3+ request names its client
			req.Version = 3
			r := ctExchange(t, nc, req, 43).(*kmsg.ApiVersionsResponse)
			if r.ErrorCode != 0 || len(r.ApiKeys) != len(apis) {
				t.Errorf("ApiVersions v3 after v%d = %s, %d keys; want NONE, %d", v, errName(r.ErrorCode), len(r.ApiKeys), len(apis))
			}
		})
	}
}

// TestConnProduceErrors: per-partition produce failures are answered with Kafka's error codes,
// append nothing for the failed partitions and do not disturb the others.
func TestConnProduceErrors(t *testing.T) {
	_, addr, reg := ctBroker(t, nil)
	ctCreate(t, reg, "two", 2, nil)
	ctCreate(t, reg, "small", 1, map[string]string{"max.message.bytes": "1000"})
	corrupt := func() []byte {
		b := ctBatch(2, 20)
		b[len(b)-3] ^= 0xff // in the last record's value: only the CRC can tell
		return b
	}
	type want struct {
		tp   string // topic/partition
		code int16
	}
	cases := []struct {
		name     string
		acks     int16
		parts    []ctPart
		want     []want
		appended map[string]int64 // records appended per topic/partition
	}{
		{"CRC mismatch in one of two partitions", 1,
			[]ctPart{{"two", 0, ctBatch(1, 10)}, {"two", 1, corrupt()}},
			[]want{{"two/0", 0}, {"two/1", kerr.CorruptMessage.Code}}, map[string]int64{"two/0": 1}},
		{"batch above max.message.bytes", 1,
			[]ctPart{{"small", 0, ctBatch(1, 2000)}},
			[]want{{"small/0", kerr.MessageTooLarge.Code}}, nil},
		{"batch within max.message.bytes", 1,
			[]ctPart{{"small", 0, ctBatch(1, 500)}},
			[]want{{"small/0", 0}}, map[string]int64{"small/0": 1}},
		{"unknown topic", 1,
			[]ctPart{{"nope", 0, ctBatch(1, 10)}},
			[]want{{"nope/0", kerr.UnknownTopicOrPartition.Code}}, nil},
		{"unknown partitions next to a known one", -1,
			[]ctPart{{"two", 2, ctBatch(1, 10)}, {"two", -1, ctBatch(1, 10)}, {"two", 1, ctBatch(3, 10)}},
			[]want{{"two/2", kerr.UnknownTopicOrPartition.Code}, {"two/-1", kerr.UnknownTopicOrPartition.Code}, {"two/1", 0}},
			map[string]int64{"two/1": 3}},
		{"two batches in one partition", 1,
			[]ctPart{{"two", 0, append(ctBatch(1, 10), ctBatch(1, 10)...)}},
			[]want{{"two/0", kerr.InvalidRecord.Code}}, nil},
		{"acks=5", 5,
			[]ctPart{{"two", 0, ctBatch(1, 10)}, {"two", 1, ctBatch(1, 10)}},
			[]want{{"two/0", kerr.InvalidRequiredAcks.Code}, {"two/1", kerr.InvalidRequiredAcks.Code}}, nil},
		{"acks=-2", -2,
			[]ctPart{{"two", 0, ctBatch(1, 10)}},
			[]want{{"two/0", kerr.InvalidRequiredAcks.Code}}, nil},
	}
	for _, version := range []int16{3, 7, 9, 11} {
		for _, tc := range cases {
			t.Run(fmt.Sprintf("v%d/%s", version, tc.name), func(t *testing.T) {
				before := ctEnds(reg)
				parts := make([]ctPart, len(tc.parts))
				for i, p := range tc.parts {
					parts[i] = ctPart{p.topic, p.p, bytes.Clone(p.recs)}
				}
				resp := ctRoundTrip(t, addr, ctProduce(version, tc.acks, parts...)).(*kmsg.ProduceResponse)
				got := map[string]kmsg.ProduceResponseTopicPartition{}
				n := 0
				for _, rt := range resp.Topics {
					for _, rp := range rt.Partitions {
						got[fmt.Sprintf("%s/%d", rt.Topic, rp.Partition)] = rp
						n++
					}
				}
				if n != len(tc.want) {
					t.Errorf("Produce v%d answered %d partitions; want %d", version, n, len(tc.want))
				}
				for _, w := range tc.want {
					rp, ok := got[w.tp]
					switch {
					case !ok:
						t.Errorf("Produce v%d: no answer for %s", version, w.tp)
					case rp.ErrorCode != w.code:
						t.Errorf("Produce v%d: error(%s) = %s; want %s", version, w.tp, errName(rp.ErrorCode), errName(w.code))
					case w.code != 0 && rp.BaseOffset != -1:
						t.Errorf("Produce v%d: baseOffset(%s) = %d; want -1", version, w.tp, rp.BaseOffset)
					case w.code == 0 && rp.BaseOffset != before[w.tp]:
						t.Errorf("Produce v%d: baseOffset(%s) = %d; want %d", version, w.tp, rp.BaseOffset, before[w.tp])
					}
				}
				after := ctEnds(reg)
				for tp, end := range after {
					if want := before[tp] + tc.appended[tp]; end != want {
						t.Errorf("end offset of %s = %d; want %d", tp, end, want)
					}
				}
				if _, ok := reg.Get("nope"); ok {
					t.Errorf("produce to an unknown topic created it")
				}
				ctHealthy(t, addr)
			})
		}
	}
}

// TestConnInvalidTopicNames: Metadata and CreateTopics answer INVALID_TOPIC_EXCEPTION for names
// Kafka rejects, and create nothing.
func TestConnInvalidTopicNames(t *testing.T) {
	_, addr, reg := ctBroker(t, nil)
	names := []string{"bad/name", "", ".", "..", "a b", "ü", strings.Repeat("a", 250)}
	for _, name := range names {
		for _, v := range []int16{1, 4, 12} {
			t.Run(fmt.Sprintf("Metadata v%d %q", v, name), func(t *testing.T) {
				req := kmsg.NewPtrMetadataRequest()
				req.Version, req.AllowAutoTopicCreation = v, true
				req.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr(name)}}
				resp := ctRoundTrip(t, addr, req).(*kmsg.MetadataResponse)
				if len(resp.Topics) != 1 {
					t.Fatalf("Metadata v%d(%q) = %d topics; want 1", v, name, len(resp.Topics))
				}
				if c := resp.Topics[0].ErrorCode; c != kerr.InvalidTopicException.Code {
					t.Errorf("Metadata v%d(%q) error = %s; want INVALID_TOPIC_EXCEPTION", v, name, errName(c))
				}
			})
		}
		for _, v := range []int16{0, 4, 5, 7} {
			t.Run(fmt.Sprintf("CreateTopics v%d %q", v, name), func(t *testing.T) {
				req := kmsg.NewPtrCreateTopicsRequest()
				req.Version, req.TimeoutMillis = v, 5000
				rt := kmsg.NewCreateTopicsRequestTopic()
				rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, 1
				req.Topics = append(req.Topics, rt)
				resp := ctRoundTrip(t, addr, req).(*kmsg.CreateTopicsResponse)
				if len(resp.Topics) != 1 {
					t.Fatalf("CreateTopics v%d(%q) = %d topics; want 1", v, name, len(resp.Topics))
				}
				if c := resp.Topics[0].ErrorCode; c != kerr.InvalidTopicException.Code {
					t.Errorf("CreateTopics v%d(%q) error = %s; want INVALID_TOPIC_EXCEPTION", v, name, errName(c))
				}
			})
		}
	}
	if n := len(reg.List()); n != 0 {
		t.Errorf("%d topics exist after invalid names; want 0", n)
	}
	ctHealthy(t, addr)
}

// TestConnPipelining: 50 mixed requests written at once are answered in request order, and
// produces are applied in request order.
func TestConnPipelining(t *testing.T) {
	_, addr, reg := ctBroker(t, nil)
	ctCreate(t, reg, "pipe", 1, nil)
	const n = 50
	var reqs []kmsg.Request
	var corrs []int32
	var wire []byte
	for i := 0; i < n; i++ {
		var req kmsg.Request
		switch i % 5 {
		case 0:
			r := kmsg.NewPtrApiVersionsRequest()
			r.ClientSoftwareName, r.ClientSoftwareVersion = "runnel-test", "1" // KIP-511: a v3+ request names its client
			r.Version = int16(i / 5 % 4)
			req = r
		case 1:
			r := kmsg.NewPtrMetadataRequest()
			r.Version = 12
			r.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("pipe")}}
			req = r
		case 2:
			req = ctProduce(9, 1, ctPart{"pipe", 0, ctBatch(1, 10)})
		case 3:
			req = ctProduce(7, -1, ctPart{"pipe", 0, ctBatch(2, 10)})
		case 4:
			req = ctFetch(11, 100, 1<<30, "pipe", 0, 0)
		}
		corr := int32((i*37 + 11) % 1000) // distinct, not monotonic
		reqs, corrs = append(reqs, req), append(corrs, corr)
		wire = append(wire, ctEncode(req, corr)...)
	}
	nc := ctDial(t, addr)
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := nc.Write(wire); err != nil {
		t.Fatal(err)
	}
	next := int64(0)
	for i := 0; i < n; i++ {
		corr, body, err := ctReadFrame(nc)
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		if corr != corrs[i] {
			t.Fatalf("response %d: correlation id = %d; want %d (%s)", i, corr, corrs[i], kmsg.NameForKey(reqs[i].Key()))
		}
		resp, err := ctDecode(reqs[i], body)
		if err != nil {
			t.Fatalf("response %d (%s): %v", i, kmsg.NameForKey(reqs[i].Key()), err)
		}
		switch r := resp.(type) {
		case *kmsg.ProduceResponse:
			p := r.Topics[0].Partitions[0]
			if p.ErrorCode != 0 || p.BaseOffset != next {
				t.Errorf("response %d: produce = %s at %d; want NONE at %d", i, errName(p.ErrorCode), p.BaseOffset, next)
			}
			next = p.BaseOffset + 1
			if reqs[i].(*kmsg.ProduceRequest).Acks == -1 {
				next++ // two records
			}
		case *kmsg.FetchResponse:
			if r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 {
				t.Errorf("response %d: fetch error %s/%s", i, errName(r.ErrorCode), errName(r.Topics[0].Partitions[0].ErrorCode))
			}
		case *kmsg.ApiVersionsResponse:
			if r.ErrorCode != 0 {
				t.Errorf("response %d: ApiVersions error %s", i, errName(r.ErrorCode))
			}
		case *kmsg.MetadataResponse:
			if len(r.Topics) != 1 || r.Topics[0].ErrorCode != 0 {
				t.Errorf("response %d: Metadata = %+v", i, r.Topics)
			}
		}
	}
	if end := ctEnds(reg)["pipe/0"]; end != next || end != 30 {
		t.Errorf("end offset = %d; want %d = 30", end, next)
	}
}

// TestConnFetchLongPoll: a fetch at the log end is woken by an append on another connection,
// and without one returns after MaxWaitMillis.
func TestConnFetchLongPoll(t *testing.T) {
	_, addr, reg := ctBroker(t, nil)
	ctCreate(t, reg, "lp", 1, nil)
	t.Run("woken by append", func(t *testing.T) {
		end := ctEnds(reg)["lp/0"]
		nc := ctDial(t, addr)
		nc.SetDeadline(time.Now().Add(10 * time.Second))
		req := ctFetch(11, 5000, 1, "lp", 0, end)
		start := time.Now()
		if _, err := nc.Write(ctEncode(req, 3)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		pr := ctRoundTrip(t, addr, ctProduce(9, 1, ctPart{"lp", 0, ctBatch(1, 10)})).(*kmsg.ProduceResponse)
		if c := pr.Topics[0].Partitions[0].ErrorCode; c != 0 {
			t.Fatalf("produce: %s", errName(c))
		}
		corr, body, err := ctReadFrame(nc)
		elapsed := time.Since(start)
		if err != nil || corr != 3 {
			t.Fatalf("fetch: corr %d, %v", corr, err)
		}
		if elapsed >= 3*time.Second {
			t.Errorf("fetch(MaxWait 5s) answered %v after start; want soon after the append at 300ms", elapsed)
		}
		if elapsed < 300*time.Millisecond {
			t.Errorf("fetch answered after %v, before the append", elapsed)
		}
		resp, err := ctDecode(req, body)
		if err != nil {
			t.Fatal(err)
		}
		p := resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
		if p.ErrorCode != 0 || len(p.RecordBatches) == 0 || p.HighWatermark != end+1 {
			t.Errorf("fetch = %s, %d bytes, HW %d; want NONE, the batch, HW %d", errName(p.ErrorCode), len(p.RecordBatches), p.HighWatermark, end+1)
		}
	})
	t.Run("times out", func(t *testing.T) {
		end := ctEnds(reg)["lp/0"]
		const wait = 500 * time.Millisecond
		req := ctFetch(11, int32(wait/time.Millisecond), 1, "lp", 0, end)
		start := time.Now()
		resp := ctRoundTrip(t, addr, req).(*kmsg.FetchResponse)
		elapsed := time.Since(start)
		if elapsed < wait-50*time.Millisecond || elapsed > 3*time.Second {
			t.Errorf("fetch(MaxWait %v) answered after %v; want about MaxWait", wait, elapsed)
		}
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 || len(p.RecordBatches) != 0 || p.HighWatermark != end {
			t.Errorf("fetch = %s, %d bytes, HW %d; want NONE, none, HW %d", errName(p.ErrorCode), len(p.RecordBatches), p.HighWatermark, end)
		}
	})
}

// ctLongPollThenShutdown starts a long-poll fetch, shuts the broker down with shutdownTimeout
// and returns how long Shutdown took and whether the fetch was answered or the connection closed
// (within 5s of Shutdown's return).
func ctLongPollThenShutdown(t *testing.T, maxWait int32, shutdownTimeout time.Duration) (took time.Duration) {
	b, addr, reg := ctBroker(t, nil)
	ctCreate(t, reg, "sd", 1, nil)
	nc := ctDial(t, addr)
	req := ctFetch(11, maxWait, 1, "sd", 0, 0)
	if _, err := nc.Write(ctEncode(req, 8)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	start := time.Now()
	done := make(chan struct{})
	go func() { b.Shutdown(ctx); close(done) }()
	select {
	case <-done:
	case <-time.After(shutdownTimeout + 5*time.Second):
		t.Fatalf("Shutdown(%v) still running after %v", shutdownTimeout, time.Since(start))
	}
	took = time.Since(start)
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	corr, body, err := ctReadFrame(nc)
	switch {
	case err == nil:
		if corr != 8 {
			t.Errorf("fetch answered with correlation id %d; want 8", corr)
		} else if _, err := ctDecode(req, body); err != nil {
			t.Errorf("fetch response: %v", err)
		}
	default:
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Errorf("after Shutdown: the long-poll fetch is neither answered nor its connection closed")
		}
	}
	if nc, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		nc.Close()
		t.Errorf("new connection accepted after Shutdown")
	}
	return took
}

// TestConnShutdownWithLongPoll: Shutdown returns within its deadline with a long poll in flight,
// and the fetch is answered or its connection closed.
func TestConnShutdownWithLongPoll(t *testing.T) {
	if took := ctLongPollThenShutdown(t, 30000, 2*time.Second); took > 4*time.Second {
		t.Errorf("Shutdown(2s) with a 30s long poll in flight took %v", took)
	}
}

// TestConnShutdownDoesNotWaitOutLongPolls: a long poll is an idle wait, not work in flight:
// Shutdown should answer it at once rather than wait for its MaxWaitMillis (or the deadline).
func TestConnShutdownDoesNotWaitOutLongPolls(t *testing.T) {
	if took := ctLongPollThenShutdown(t, 20000, 15*time.Second); took > 3*time.Second {
		t.Errorf("Shutdown(15s) with a 20s long-poll fetch in flight took %v; want it answered at once", took)
	}
}

// TestConnBackpressure: with tiny in-flight budgets, large pipelined bursts on several
// connections are fully answered, in order, including requests larger than a whole budget.
func TestConnBackpressure(t *testing.T) {
	_, addr, reg := ctBroker(t, func(c *Config) {
		c.MaxInflightRequests = 4
		c.MaxConnInflightBytes = 4 << 10
		c.MaxInflightBytes = 16 << 10
	})
	const conns, n = 3, 300
	for c := 0; c < conns; c++ {
		ctCreate(t, reg, fmt.Sprintf("bp%d", c), 1, nil)
	}
	var wg sync.WaitGroup
	for c := 0; c < conns; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			topic := fmt.Sprintf("bp%d", c)
			nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				t.Error(err)
				return
			}
			defer nc.Close()
			nc.SetDeadline(time.Now().Add(60 * time.Second))
			var reqs []kmsg.Request
			var wire []byte
			for i := 0; i < n; i++ {
				var req kmsg.Request
				switch {
				case i%50 == 49:
					req = ctProduce(9, 1, ctPart{topic, 0, ctBatch(1, 20<<10)}) // above every budget
				case i%10 == 9:
					req = ctFetch(11, 20, 1<<30, topic, 0, 0)
				case i%3 == 0:
					req = ctProduce(9, -1, ctPart{topic, 0, ctBatch(1, 1500)})
				default:
					req = ctProduce(9, 1, ctPart{topic, 0, ctBatch(1, 1500)})
				}
				reqs = append(reqs, req)
				wire = append(wire, ctEncode(req, int32(i))...)
			}
			werr := make(chan error, 1)
			go func() { _, err := nc.Write(wire); werr <- err }() // all of it before reading anything
			time.Sleep(100 * time.Millisecond)
			next := int64(0)
			for i := 0; i < n; i++ {
				corr, body, err := ctReadFrame(nc)
				if err != nil {
					t.Errorf("%s: response %d: %v", topic, i, err)
					return
				}
				if corr != int32(i) {
					t.Errorf("%s: response %d has correlation id %d", topic, i, corr)
					return
				}
				resp, err := ctDecode(reqs[i], body)
				if err != nil {
					t.Errorf("%s: response %d: %v", topic, i, err)
					return
				}
				if pr, ok := resp.(*kmsg.ProduceResponse); ok {
					p := pr.Topics[0].Partitions[0]
					if p.ErrorCode != 0 || p.BaseOffset != next {
						t.Errorf("%s: response %d: produce %s at %d; want NONE at %d", topic, i, errName(p.ErrorCode), p.BaseOffset, next)
					}
					next++
				}
			}
			if err := <-werr; err != nil {
				t.Errorf("%s: write: %v", topic, err)
			}
		}()
	}
	wg.Wait()
	ctHealthy(t, addr)
}

// TestConnBudgetReleasedOnReset: when a client resets its connection while the broker's write
// loop is blocked and its read loop is waiting to queue a request, the request's bytes must go
// back to the broker-wide in-flight budget; a leak would, over time, stall every connection.
func TestConnBudgetReleasedOnReset(t *testing.T) {
	b, addr, reg := ctBroker(t, func(c *Config) {
		c.MaxInflightRequests = 2
		c.MaxConnInflightBytes = 1 << 10
		c.MaxInflightBytes = 1 << 10
	})
	ctCreate(t, reg, "big", 1, map[string]string{"max.message.bytes": "4000000"})
	pr := ctRoundTrip(t, addr, ctProduce(9, 1, ctPart{"big", 0, ctBatch(1, 1<<20)})).(*kmsg.ProduceResponse)
	if c := pr.Topics[0].Partitions[0].ErrorCode; c != 0 {
		t.Fatalf("produce: %s", errName(c))
	}
	var wire []byte
	for i := 0; i < 64; i++ {
		wire = append(wire, ctEncode(ctFetch(11, 0, 1, "big", 0, 0), int32(i))...) // 1 MiB answers
	}
	for i := 0; i < 20; i++ {
		nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		nc.SetDeadline(time.Now().Add(5 * time.Second))
		nc.Write(wire)
		time.Sleep(150 * time.Millisecond) // the write loop blocks on a full socket, the queue fills
		nc.(*net.TCPConn).SetLinger(0)
		nc.Close() // RST
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		b.mu.Lock()
		open := len(b.conns)
		b.mu.Unlock()
		if open == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still open 10s after their clients reset them", open)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !b.mem.TryAcquire(b.cfg.MaxInflightBytes) {
		t.Fatal("broker-wide in-flight budget leaked after client resets")
	}
	b.mem.Release(b.cfg.MaxInflightBytes)
	ctHealthy(t, addr)
}

// FuzzConnection writes arbitrary bytes to a fresh connection to one broker shared by every
// input of the process, and checks that the broker survives and still answers ApiVersions.
// A panic in any handler would crash the test binary.
func FuzzConnection(f *testing.F) {
	// One broker per fuzz process: this body runs once per process, before f.Fuzz runs the
	// inputs; Cleanup shuts it down after the last.
	_, addr, reg := ctBroker(f, func(c *Config) {
		c.MaxRequestBytes = 1 << 20
		c.AutoCreateTopics = false // keep the fuzzer from filling the disk with topics
		c.MaxConnInflightBytes = 4 << 20
		c.MaxInflightBytes = 64 << 20
	})
	ctCreate(f, reg, "fz", 2, nil)
	seeds := [][]byte{}
	add := func(b []byte) { seeds = append(seeds, b) }
	for v := int16(0); v <= 3; v++ {
		r := kmsg.NewPtrApiVersionsRequest()
		r.ClientSoftwareName, r.ClientSoftwareVersion = "runnel-test", "1" // KIP-511: a v3+ request names its client
		r.Version = v
		add(ctEncode(r, 1))
	}
	for _, v := range []int16{0, 1, 4, 9, 12} {
		r := kmsg.NewPtrMetadataRequest()
		r.Version = v
		r.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("fz")}}
		add(ctEncode(r, 2))
	}
	for _, v := range []int16{3, 7, 9, 11} {
		add(ctEncode(ctProduce(v, 1, ctPart{"fz", 0, ctBatch(2, 10)}, ctPart{"fz", 1, ctBatch(1, 5)}), 3))
	}
	add(ctEncode(ctProduce(9, -1, ctPart{"fz", 0, ctBatch(1, 10)}), 3))
	add(ctEncode(ctProduce(9, 0, ctPart{"fz", 1, ctBatch(1, 10)}), 3))
	for _, v := range []int16{4, 7, 11, 12} {
		add(ctEncode(ctFetch(v, 10, 1, "fz", 0, 0), 4))
	}
	lo := kmsg.NewPtrListOffsetsRequest()
	lo.Version = 7
	lot := kmsg.NewListOffsetsRequestTopic()
	lot.Topic = "fz"
	lot.Partitions = []kmsg.ListOffsetsRequestTopicPartition{{Partition: 0, Timestamp: -1, CurrentLeaderEpoch: -1}}
	lo.Topics = append(lo.Topics, lot)
	add(ctEncode(lo, 5))
	dc := kmsg.NewPtrDescribeConfigsRequest()
	dc.Version = 4
	dc.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "fz"}}
	add(ctEncode(dc, 6))
	dtp := kmsg.NewPtrDescribeTopicPartitionsRequest()
	dtp.ResponsePartitionLimit = 1
	dtp.Topics = []kmsg.DescribeTopicPartitionsRequestTopic{{Topic: "fz"}, {Topic: "nope"}}
	dtp.Cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: "fz", Partition: 1}
	add(ctEncode(dtp, 7))
	// Pipelined, and mutations of the valid frames.
	add(bytes.Join(seeds[:6], nil))
	valid := len(seeds)
	for i := 0; i < valid; i++ {
		s := seeds[i]
		add(s[:len(s)/2])                                 // cut off
		add(s[:len(s)-1])                                 // one byte short
		add(append(bytes.Clone(s), 0, 0, 0, 1))           // a trailing partial frame
		m := bytes.Clone(s)                               // size says more
		binary.BigEndian.PutUint32(m, uint32(len(m)+100)) //
		add(m)
		m = bytes.Clone(s) // size says less
		binary.BigEndian.PutUint32(m, uint32(len(m)-8))
		add(m)
		m = bytes.Clone(s) // body truncated, size consistent
		m = m[:len(m)-len(m)/4]
		binary.BigEndian.PutUint32(m, uint32(len(m)-4))
		add(m)
		m = bytes.Clone(s) // a byte flipped in the body
		m[len(m)-len(m)/3] ^= 0x80
		add(m)
	}
	add(ctFrame(18, 99, 1, false, nil))
	add(ctFrame(3, 12, 1, false, []byte{0xff, 0xff, 0x03})) // a large header tag count
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		nc, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		nc.SetDeadline(time.Now().Add(200 * time.Millisecond))
		nc.Write(data)
		nc.(*net.TCPConn).CloseWrite() // the broker answers what it read, then closes
		io.Copy(io.Discard, nc)        // until it closes, or the deadline
		nc.Close()
		ctPing(t, addr)
	})
}
