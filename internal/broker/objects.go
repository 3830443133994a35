package broker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/objects"
	"github.com/runnel-dev/runnel/internal/objtopic"
	total "github.com/runnel-dev/runnel/internal/speclog/shard"
	"github.com/runnel-dev/runnel/internal/topics"
)

// Object-storage topics (docs/object-topics.md): any node serves any partition. Produce goes
// through the node's object writer (one file per flush, offsets from the controller's commit);
// fetch reads the extents the image lists through the read cache; offsets and the log start
// come from the image.

// isObjectTopic reports whether a registry topic keeps its records in object storage (its
// storage is set explicitly at creation).
func isObjectTopic(t *topics.Topic) bool {
	return t.Configs[controller.StorageConfig] == controller.StorageObject
}

// resolveStorage fixes a new topic's storage: the effective runnel.storage (its config, else
// the cluster default) is written into its configs, so a later change of the default does not
// move it. Internal topics are always local. An object topic's assignments only count its
// partitions; what object topics do not support yet is refused.
// storedInObjects reports whether a topic created with configs is an object-storage topic (its
// runnel.storage, else runnel.default.storage; never the coordinators' topics nor a total-order
// topic): it has no replicas to place.
func (b *Broker) storedInObjects(name string, configs map[string]string) bool {
	if name == OffsetsTopic || name == TxnStateTopic || total.Total(configs) {
		return false
	}
	return b.storageOf(configs) == controller.StorageObject
}

// storageOf is the storage a topic created with configs asks for: its runnel.storage, else the
// cluster's runnel.default.storage.
func (b *Broker) storageOf(configs map[string]string) string {
	if storage, ok := configs[controller.StorageConfig]; ok {
		return storage
	}
	storage, _, _ := b.topics.BrokerConfig("runnel.default.storage")
	return storage
}

func (b *Broker) resolveStorage(name string, configs map[string]string, assignments [][]int32) (map[string]string, [][]int32, *adminError) {
	if name == OffsetsTopic || name == TxnStateTopic {
		return configs, assignments, nil
	}
	storage := b.storageOf(configs)
	if total.Total(configs) {
		if _, err := total.TopicConfig(configs); err != nil {
			return nil, nil, adminErr(kerr.InvalidConfig, "%v", err)
		}
		if storage == controller.StorageObject {
			return nil, nil, adminErr(kerr.InvalidConfig, "runnel.ordering=total needs runnel.storage=local")
		}
		if policy := configs["cleanup.policy"]; strings.Contains(policy, "compact") {
			return nil, nil, adminErr(kerr.InvalidConfig, "cleanup.policy=%s: a total-order topic cannot be compacted", policy)
		}
		if configs[controller.UncleanConfig] == "true" {
			return nil, nil, adminErr(kerr.InvalidConfig, "%s", errUncleanTotal)
		}
		out := make(map[string]string, len(configs)+1)
		for k, v := range configs {
			out[k] = v
		}
		out[controller.StorageConfig] = "local" // fixed, whatever the default becomes
		return out, assignments, nil
	}
	if storage != controller.StorageObject {
		if configs[controller.SequencingConfig] == controller.SequencingLazy {
			return nil, nil, adminErr(kerr.InvalidConfig, "runnel.sequencing=lazy needs runnel.storage=object")
		}
		return configs, assignments, nil
	}
	if b.cfg.ObjectWriter == nil {
		return nil, nil, adminErr(kerr.InvalidConfig, "runnel.storage=object: this node has no object store")
	}
	out := make(map[string]string, len(configs)+1)
	for k, v := range configs {
		out[k] = v
	}
	out[controller.StorageConfig] = controller.StorageObject
	return out, make([][]int32, len(assignments)), nil
}

// errUncleanTotal refuses automatic unclean elections on a total-order topic: a shard leader
// elected without the records a majority held could change confirmed positions; a shard that
// lost its majority is failed by a view change instead (docs/speclog.md).
const errUncleanTotal = "unclean.leader.election.enable=true is refused on a total-order topic: a shard elected uncleanly could change confirmed positions; a shard that loses a majority of its replicas is failed by a view change"

// checkObjectConfigs refuses a config change of a topic that its storage does not allow:
// runnel.storage is fixed at creation, only object topics can be sequenced lazily, and
// total-order topics are never compacted nor elected uncleanly.
func checkObjectConfigs(t *topics.Topic, set map[string]string) *adminError {
	storage := t.Configs[controller.StorageConfig]
	for name, v := range set {
		if total.FixedConfig(name) && v != t.Configs[name] && !(t.Configs[name] == "" && name == total.OrderingConfig && v == "partition") {
			return adminErr(kerr.InvalidConfig, "%s is fixed when a topic is created (topic %s)", name, t.Name)
		}
	}
	if total.Total(t.Configs) && strings.Contains(set["cleanup.policy"], "compact") {
		return adminErr(kerr.InvalidConfig, "cleanup.policy=compact: a total-order topic cannot be compacted")
	}
	if total.Total(t.Configs) && set[controller.UncleanConfig] == "true" {
		return adminErr(kerr.InvalidConfig, "%s", errUncleanTotal)
	}
	if set[controller.SequencingConfig] == controller.SequencingLazy && storage != controller.StorageObject {
		return adminErr(kerr.InvalidConfig, "runnel.sequencing=lazy needs runnel.storage=object (topic %s is local)", t.Name)
	}
	if v, ok := set[controller.StorageConfig]; ok && v != storage && !(storage == "" && v == "local") {
		return adminErr(kerr.InvalidConfig, "runnel.storage is fixed when a topic is created (topic %s: %q)", t.Name, storage)
	}
	return nil
}

// objectPartition returns the image's state of an object topic's partition.
func (b *Broker) objectPartition(id [16]byte, index int32) (*objtopic.Partition, error) {
	it, ok := b.cl.Image().TopicByID(id)
	if !ok {
		return nil, kerr.UnknownTopicOrPartition
	}
	p := it.Object(index)
	if p == nil {
		return nil, kerr.UnknownTopicOrPartition
	}
	return p, nil
}

// ripcording reports whether this process is in Ripcord mode now (Config.Ripcording).
func (b *Broker) ripcording() bool {
	return b.cfg.Ripcording != nil && b.cfg.Ripcording()
}

// clientZone is the zone (rack) a client names in its client.id, as WarpStream's clients do
// ("app,warpstream_az=us-east-1a"; runnel_rack= works too): "" if none.
func clientZone(clientID string) string {
	for _, key := range []string{"warpstream_az=", "runnel_rack="} {
		if _, v, ok := strings.Cut(clientID, key); ok {
			v, _, _ = strings.Cut(v, ",")
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// zoneNodes narrows an object partition's leader candidates to the nodes of the client's zone
// (their --rack), so that it produces and fetches in its zone, whose nodes share one file cache
// (objects.Owner); all of them if the zone has none, or the client names no zone.
func zoneNodes(img *controller.Image, rv *ripcordView, candidates []int32, zone string) []int32 {
	if zone == "" {
		return candidates
	}
	rack := func(id int32) string {
		if n := img.Nodes[id]; n != nil {
			return n.Rack
		}
		if rv != nil {
			for _, m := range rv.brokers {
				if m.Node == id {
					return m.Rack
				}
			}
		}
		return ""
	}
	var in []int32
	for _, id := range candidates {
		if rack(id) == zone {
			in = append(in, id)
		}
	}
	if len(in) == 0 {
		return candidates
	}
	return in
}

// objectLeader is the node Metadata names as an object partition's leader: of the candidates
// (the live nodes), the one the partition hashes highest with, so a node joining or leaving
// moves only its share of partitions. Any node accepts any partition; this only spreads
// clients' load.
func objectLeader(candidates []int32, id [16]byte, index int32) int32 {
	var key [32]byte
	return objects.Rendezvous(strconv.AppendInt(append(append(key[:0], id[:]...), '/'), int64(index), 10), candidates)
}

// brokerList is the brokers Metadata and DescribeCluster name: the image's live nodes, or in
// Ripcord mode (rv not nil) the processes the object store's announcements show.
// Each node is named by its endpoint on the client's listener; nodes without it are left out.
func (b *Broker) brokerList(img *controller.Image, rv *ripcordView, listener string) []objects.Member {
	if rv != nil {
		out := make([]objects.Member, 0, len(rv.brokers))
		for _, m := range rv.brokers {
			if host, port, ok := m.Endpoint(listener); ok {
				m.Host, m.Port = host, port
				out = append(out, m)
			}
		}
		return out
	}
	live := img.LiveNodes()
	out := make([]objects.Member, 0, len(live))
	for _, id := range live {
		n := img.Nodes[id]
		if host, port, ok := n.Endpoint(listener); ok {
			out = append(out, objects.Member{Node: n.ID, Host: host, Port: port, Rack: n.Rack})
		}
	}
	return out
}

// ripcordView is what Metadata says while this process is in Ripcord mode: the processes in
// Ripcord mode that announced themselves in the object store moments ago are the brokers and
// share the object partitions (the image's live nodes may be the very ones that are down).
type ripcordView struct {
	brokers []objects.Member
	live    map[int32]bool
	nodes   []int32
}

func (b *Broker) ripcordView() *ripcordView {
	self := objects.Member{Node: b.cfg.NodeID, Host: b.cfg.AdvertisedHost, Port: b.cfg.AdvertisedPort}
	v := &ripcordView{brokers: []objects.Member{self}}
	if b.cfg.Members != nil {
		v.brokers = b.cfg.Members()
	}
	v.live = make(map[int32]bool, len(v.brokers))
	for _, m := range v.brokers { // Members always holds this process, whatever the listing says
		v.live[m.Node] = true
		v.nodes = append(v.nodes, m.Node)
	}
	return v
}

// produceObject checks one partition's batch and hands it to the object writer. It returns the
// answer to wait for (nil if the batch was refused: sp has the error) and the batch's records.
// A transactional batch joins its producer's transaction first (ensureInTransaction), as on a
// local partition; a lazily sequenced one is refused (acknowledged before its commit could
// check it against the transaction).
func (b *Broker) produceObject(ctx context.Context, t *topics.Topic, index int32, records []byte, txnID *string, version int16,
	sp *kmsg.ProduceResponseTopicPartition) (*objects.Pending, int) {
	fail := func(err error) (*objects.Pending, int) {
		b.setObjectProduceError(t, index, sp, err)
		return nil, 0
	}
	n, err := produceRecordSet(records)
	if err != nil {
		return fail(err)
	}
	records = records[:n]
	maxBytes, _ := t.Effective("max.message.bytes")
	if limit, _ := strconv.Atoi(maxBytes); len(records) > limit {
		return fail(fmt.Errorf("%w: batch of %d bytes exceeds max.message.bytes %d", kerr.MessageTooLarge, len(records), limit))
	}
	h, err := batch.Validate(records)
	if err != nil {
		return fail(err)
	}
	if err := checkClientHeader(&h, version); err != nil { // as on a local partition (produceOne)
		return fail(err)
	}
	seq, _ := t.Effective(controller.SequencingConfig)
	lazy := seq == controller.SequencingLazy || b.ripcording()
	switch {
	case h.IsTransactional() && seq == controller.SequencingLazy:
		return fail(objtopic.ErrTransactional)
	case h.IsTransactional() && lazy:
		// Ripcord: the controller, which sequences transactional batches, is away; the
		// producer retries until it is back (or its delivery timeout).
		return fail(fmt.Errorf("%w: in Ripcord mode, transactional batches wait for the controller", kerr.NotEnoughReplicas))
	}
	if h.IsTransactional() { // into the transaction before the records are checked, as produceOne
		var id string
		if txnID != nil {
			id = *txnID
		}
		if err := b.txns.ensureInTransaction(ctx, id, objectTxnPartition{b.txns, t, index}, h.ProducerID, h.ProducerEpoch, version); err != nil {
			return fail(err)
		}
	}
	if err := checkTimestamps(t, &h, records, time.Now()); err != nil {
		return fail(err)
	}
	if policy, _ := t.Effective("cleanup.policy"); strings.Contains(policy, "compact") {
		if err := requireKeys(&h, records, t.Name, index); err != nil {
			return fail(err)
		}
	}
	own := records
	if comp, _ := t.Effective("compression.type"); comp != "producer" {
		if own, err = recompress(records, comp, t.CompressionLevel(comp)); err != nil {
			return fail(err)
		}
		if limit, _ := strconv.Atoi(maxBytes); len(own) > limit { // as stored, as Kafka checks (and produceOne)
			return fail(fmt.Errorf("%w: batch of %d bytes after compression.type %s exceeds max.message.bytes %d", kerr.MessageTooLarge, len(own), comp, limit))
		}
		if h, err = batch.ParseHeader(own); err != nil { // its length, codec and CRC are new
			return fail(err)
		}
	}
	if &own[0] == &records[0] {
		own = append([]byte(nil), records...) // the request's buffer is not ours once we answer
	}
	if tsType, _ := t.Effective("message.timestamp.type"); tsType == "LogAppendTime" {
		sp.LogAppendTime = time.Now().UnixMilli()
		batch.SetLogAppendTime(own, sp.LogAppendTime)
		h.MaxTimestamp = sp.LogAppendTime
	}
	return b.cfg.ObjectWriter.Append(controller.PartitionRef{Topic: t.ID, Partition: index}, own, h, lazy), int(h.RecordCount)
}

// noOffset is the base offset a lazy topic's produce answer carries (docs/object-topics.md
// §9.1): Kafka's "no offset", -1, which the Java client, franz-go and kafka-python report as no
// offset for every record; but librdkafka reports -1, 0, 1, ... for a batch with base -1 and
// "no offset" for every record only with its own RD_KAFKA_OFFSET_INVALID, -1001, which it gets.
func noOffset(software string) int64 {
	s := strings.ToLower(software)
	if strings.Contains(s, "librdkafka") || strings.Contains(s, "confluent-kafka") {
		return -1001
	}
	return -1
}

// setObjectProduceError sets an object partition's produce refusal, with the partition's log
// start where Kafka gives it (refusalKeepsLogStart: a refusal by its log or producer state), as
// a local partition's.
func (b *Broker) setObjectProduceError(t *topics.Topic, index int32, sp *kmsg.ProduceResponseTopicPartition, err error) {
	setProduceError(sp, err)
	if refusalKeepsLogStart(err) {
		if p, perr := b.objectPartition(t.ID, index); perr == nil {
			sp.LogStartOffset = p.Start
		}
	}
}

// waitObject waits for a buffered batch's commit (or, lazy, its write) and fills in its answer.
func (b *Broker) waitObject(ctx context.Context, t *topics.Topic, index int32, bytes, records int, w *objects.Pending,
	sp *kmsg.ProduceResponseTopicPartition, software string) {
	base, err := w.Wait(ctx)
	if err == nil && base < 0 { // lazy: acknowledged before sequencing
		base = noOffset(software)
	}
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			err = kerr.RequestTimedOut
		}
		b.setObjectProduceError(t, index, sp, err)
		return
	}
	sp.BaseOffset = base
	if p, err := b.objectPartition(t.ID, index); err == nil {
		sp.LogStartOffset = p.Start
	}
	b.cfg.Metrics.Produced(t.Name, bytes, records)
}

// fromSnapshot reports whether this process serves from the object store's metadata snapshot
// (a Ripcord process that started while the controller was away and has not joined yet): it
// knows object partitions' ends only as of the snapshot, older than what clients may have seen
// elsewhere, so it answers reads with OFFSET_NOT_AVAILABLE (retriable: KIP-207, KIP-392) rather
// than ends that go back.
func (b *Broker) fromSnapshot() bool {
	return b.ripcording() && !b.cl.Image().Live(b.cfg.NodeID)
}

// objectBarrierTimeout bounds how long a read waits for the controller to confirm this node's
// image is current (objectBarrier).
const objectBarrierTimeout = 2 * time.Second

// objectBarrier makes this node's image at least as new as every image any node answered from
// before (cluster.Node.Barrier: one quorum round of the controller, shared by the reads waiting
// with it). Any node serves any object partition, and a node that newly serves one (its owner
// died, a client's metadata moved) may have an image that trails the one the previous node
// answered from: without it, a partition's end offset could go back, and a consumer at the
// old node's end would be told its offset is out of range and reset. Kafka answers such a
// new leader's reads with OFFSET_NOT_AVAILABLE until it has caught up (KIP-207); so does this
// when the controller cannot confirm in time. In Ripcord mode no controller answers: the
// image is as new as it can get, and is used.
func (b *Broker) objectBarrier(ctx context.Context) error {
	if b.ripcording() {
		return nil
	}
	bctx, cancel := context.WithTimeout(ctx, objectBarrierTimeout)
	defer cancel()
	if err := b.cl.Barrier(bctx); err != nil {
		if b.ripcording() { // the controller went away meanwhile
			return nil
		}
		b.logger.Debug("broker: no controller confirmed the image for an object partition read", "err", err)
		return kerr.OffsetNotAvailable
	}
	return nil
}

// prefetchObjects starts reading the first sections of every object partition a fetch asks
// for, so that readObject, which reads the partitions one after another, finds their GETs
// under way rather than making one round trip after another.
func (b *Broker) prefetchObjects(parts []*sessionPartition, budget int, acc fetchAccess) {
	if b.cfg.ObjectCache == nil || len(parts) < 2 || b.fromSnapshot() {
		return
	}
	var reads []objects.PrefetchRead
	for _, sp := range parts {
		if acc.denied[sp] {
			continue
		}
		t, err := b.fetchTopic(sp)
		if err != nil || !isObjectTopic(t) {
			continue
		}
		if p, err := b.objectPartition(t.ID, sp.partition); err == nil && sp.offset >= p.Start && sp.offset < p.Next {
			reads = append(reads, objects.PrefetchRead{Partition: p, Offset: sp.offset, MaxBytes: min(int(sp.maxBytes), budget)})
		}
	}
	b.cfg.ObjectCache.Prefetch(reads)
}

// readObject reads an object partition for a fetch into fp.
func (b *Broker) readObject(ctx context.Context, t *topics.Topic, sp *sessionPartition, fp *kmsg.FetchResponseTopicPartition, maxBytes int, first, readCommitted bool) (int, error) {
	if b.fromSnapshot() {
		return 0, kerr.OffsetNotAvailable
	}
	p, err := b.objectPartition(t.ID, sp.partition)
	if err != nil {
		return 0, err
	}
	if sp.offset > p.Next && !b.ripcording() {
		// Past this node's end: the offset is bogus, or this image trails the one the consumer
		// read from before. Only a current image can tell it is out of range.
		if err := b.objectBarrier(ctx); err != nil {
			return 0, err
		}
		if p, err = b.objectPartition(t.ID, sp.partition); err != nil {
			return 0, err
		}
	}
	lso := p.ConsumerLastStable()
	fp.HighWatermark, fp.LastStableOffset, fp.LogStartOffset = p.Next, lso, p.Start
	upto := p.Next
	if readCommitted {
		upto = lso
		fp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
	}
	switch {
	case sp.offset == p.Next:
		return 0, nil
	case sp.offset > p.Next && b.ripcording():
		// Past the end this process knows, with no controller to tell whether the offset is
		// bogus or the image is behind: retriable, never a reset of the consumer's position.
		return 0, kerr.OffsetNotAvailable
	case sp.offset < p.Start || sp.offset > p.Next:
		return 0, kerr.OffsetOutOfRange
	case maxBytes <= 0 && !first, sp.offset >= upto:
		return 0, nil
	}
	data, err := b.cfg.ObjectCache.FetchBelow(ctx, p, sp.offset, upto, max(maxBytes, 0), first)
	if err != nil {
		if more, ok := b.objReadWarn.Allow(time.Now()); ok {
			b.logger.Warn("broker: reading an object partition", "topic", t.Name, "partition", sp.partition, "offset", sp.offset, "err", err,
				"more_failed_reads_not_logged", more)
		}
		return 0, fmt.Errorf("%w: reading from the object store: %v", kerr.KafkaStorageError, err)
	}
	fp.RecordBatches = data
	if readCommitted && len(data) > 0 {
		// The aborted transactions that begin below the returned batches' end (as the local
		// log's fetch, and Kafka's), not every one up to the last stable offset.
		for _, a := range p.AbortedIn(sp.offset, min(lso, batchesEnd(data, lso))) {
			fp.AbortedTransactions = append(fp.AbortedTransactions, kmsg.FetchResponseTopicPartitionAbortedTransaction{
				ProducerID: a.ProducerID, FirstOffset: a.First})
		}
	}
	return len(data), nil
}

// listObjectOffset answers one ListOffsets partition of an object topic. barrier is the
// request's objectBarrier (made once, for its first object partition).
func (b *Broker) listObjectOffset(ctx context.Context, t *topics.Topic, replicaID int32, readCommitted bool, rp *kmsg.ListOffsetsRequestTopicPartition, sp *kmsg.ListOffsetsResponseTopicPartition, barrier func() error) error {
	if b.fromSnapshot() {
		return kerr.OffsetNotAvailable
	}
	if err := barrier(); err != nil {
		return err
	}
	p, err := b.objectPartition(t.ID, rp.Partition)
	if err != nil {
		return err
	}
	sp.LeaderEpoch = 0
	end := p.Next
	if readCommitted { // nothing at or past the last stable offset
		end = p.ConsumerLastStable()
	}
	var off, ts int64 = -1, -1
	switch rp.Timestamp {
	case listLatest:
		off = end
	case listEarliest, listEarliestLocal:
		off = p.Start
	case listLatestTiered, listEarliestPendingUpload: // no tiered storage (the store is the log)
		return nil
	case listMaxTimestamp:
		off, ts, err = b.cfg.ObjectCache.MaxTimestamp(ctx, p)
	default:
		if rp.Timestamp < 0 {
			return kerr.InvalidRequest
		}
		off, ts, err = b.cfg.ObjectCache.OffsetForTime(ctx, p, rp.Timestamp)
	}
	if err != nil {
		return fmt.Errorf("%w: reading from the object store: %v", kerr.KafkaStorageError, err)
	}
	if off >= 0 && (rp.Timestamp == listLatest || rp.Timestamp == listEarliest || rp.Timestamp == listEarliestLocal || fetchable(replicaID, off, end)) {
		sp.Offset, sp.Timestamp = off, ts
	}
	return nil
}

// deleteObjectRecords moves an object partition's log start (DeleteRecords) and returns the new
// low watermark. barrier is the request's objectBarrier: the offset is checked against (and -1
// resolved to) an end no older than any node answered from before; without it a node whose
// image trailed the controller's refused a valid offset, or trimmed to an older end. A barrier
// the controller cannot confirm in time is REQUEST_TIMED_OUT (clients retry it).
func (b *Broker) deleteObjectRecords(ctx context.Context, t *topics.Topic, index int32, offset int64, barrier func() error) (int64, error) {
	if err := barrier(); err != nil {
		return -1, fmt.Errorf("%w: this node's view of the partition could not be confirmed current", kerr.RequestTimedOut)
	}
	p, err := b.objectPartition(t.ID, index)
	if err != nil {
		return -1, err
	}
	if offset == deleteToHighWatermark {
		offset = p.Next
	}
	if offset < 0 || offset > p.Next {
		return -1, kerr.OffsetOutOfRange
	}
	if offset > p.Start {
		cmd := &controller.Command{Op: controller.OpTrimObjects, TrimObjects: &controller.TrimObjects{Items: []controller.TrimItem{
			{PartitionRef: controller.PartitionRef{Topic: t.ID, Partition: index}, Start: offset}}}}
		if err := b.cl.ProposeApplied(ctx, cmd); err != nil {
			return -1, fmt.Errorf("%w: %v", kerr.RequestTimedOut, err)
		}
	}
	if p, err = b.objectPartition(t.ID, index); err != nil {
		return -1, err
	}
	return p.Start, nil
}

// batchesEnd is the offset after the last whole batch in data, or orElse if data holds none
// that parses.
func batchesEnd(data []byte, orElse int64) int64 {
	end := int64(-1)
	for len(data) > 0 {
		n, err := batch.Split(data) // the length checked: at least a header, not cut off
		if err != nil {
			break
		}
		h, _ := batch.ParseHeader(data)
		end, data = h.NextOffset(), data[n:]
	}
	if end < 0 {
		return orElse
	}
	return end
}
