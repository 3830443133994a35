package server

// The admin HTTP server: health, readiness, metrics and status.
//
//	GET /healthz    200 while the process is alive (also during recovery)
//	GET /readyz     200 while the node serves Kafka with its logs recovered; 503 otherwise
//	GET /metrics    Prometheus text format (docs/metrics.md)
//	GET /v1/status  JSON: Status
//
// Open binds it right after locking the data directory, before recovering the logs, so a
// liveness probe is answered during a long recovery; /readyz says 503 until Serve accepts Kafka
// connections and again from the moment shutdown begins. Close stops it.

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/runnel-dev/runnel/internal/console"
	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/metrics"
	"github.com/runnel-dev/runnel/internal/objstore"
	"github.com/runnel-dev/runnel/internal/replica"
	"github.com/runnel-dev/runnel/internal/speclog/sequencer"
	"github.com/runnel-dev/runnel/internal/speclog/shard"
	"github.com/runnel-dev/runnel/internal/topics"
	"github.com/runnel-dev/runnel/internal/vfs"
)

// A server's states, as /readyz and /v1/status report them. Only stateServing is ready.
const (
	stateRecovering = iota // Open is recovering the logs
	stateNotServing        // recovered, Serve not running
	stateServing           // Serve accepts Kafka connections
	stateStopping          // Serve is shutting down
	stateClosed
)

var stateNames = [...]string{"recovering", "not_serving", "serving", "stopping", "closed"}

// admin is the admin HTTP server and the metrics registry it serves, which the server owns (not
// Prometheus's global one, so one process can run several servers).
type admin struct {
	registry  *prometheus.Registry
	charts    *prometheus.Registry // what the console samples: a few of registry's, and the topics' produce stages
	kafka     *metrics.Kafka       // counted by the broker
	raft      *metrics.Raft        // the Raft groups' log fsyncs
	speclog   *metrics.SpecLog     // the SpecLog appends' stages
	ln        net.Listener
	srv       *http.Server
	done      chan struct{} // closed when srv.Serve returned
	started   time.Time
	state     atomic.Int32
	kafkaAddr atomic.Pointer[string] // the Kafka listener's address, once Serve has it
	console   *console.Console
}

// startAdmin makes the metrics registry and serves the admin endpoints on cfg.AdminAddr.
func (s *Server) startAdmin() error {
	a := &s.admin
	a.started = time.Now()
	a.kafka = metrics.NewKafka(s.topicExists)
	a.raft = metrics.NewRaft()
	a.speclog = metrics.NewSpecLog()
	a.registry = metrics.NewRegistry()
	a.registry.MustRegister(a.kafka, a.raft, a.speclog,
		metrics.NewStorage(metrics.StorageSource{Partitions: s.partitionStats, Flusher: s.flusher.Stats}),
		metrics.NewGroupLag(s.groupOffsets),
		metrics.NewShares(s.shareStats),
		metrics.NewCluster(s.clusterState),
		metrics.NewTotalOrder(s.totalOrderState),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "runnel_ready", Help: "1 while the node serves Kafka with its logs recovered (as /readyz), else 0.",
		}, func() float64 { return boolFloat(a.state.Load() == stateServing) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "runnel_offline_replicas", Help: "Partitions this node should host whose log failed to open (offline here, tried again with a backoff; Kafka's OfflineReplicaCount).",
		}, func() float64 { return float64(s.topics.Offline()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "runnel_ripcord_active", Help: "1 while this --ripcord process is in Ripcord mode (the active controller has not answered for 1 s: object-topic writes are acknowledged lazily), as last seen by a produce or the membership loop; else 0.",
		}, func() float64 { return boolFloat(s.ripcordActive.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "runnel_node_info", Help: "Always 1; the node id as a label.", ConstLabels: prometheus.Labels{"node_id": strconv.Itoa(int(s.cfg.NodeID))},
		}, func() float64 { return 1 }))
	ln, err := net.Listen("tcp", s.cfg.AdminAddr)
	if err != nil {
		return fmt.Errorf("server: admin listener: %w", err)
	}
	if s.cfg.AdminTLS {
		ln = tls.NewListener(ln, s.tls.ServerConfig())
	}
	a.ln = ln
	a.srv = &http.Server{
		Handler:           s.adminHandler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.logger.Handler(), slog.LevelDebug),
	}
	a.done = make(chan struct{})
	go func() {
		defer close(a.done)
		if err := a.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			s.logger.Error("admin server stopped", "admin_addr", ln.Addr().String(), "err", err)
		}
	}()
	s.logger.Info("admin server listening", "admin_addr", ln.Addr().String())
	return nil
}

// stopAdmin stops the admin server, letting requests in progress finish for a few seconds.
func (s *Server) stopAdmin() {
	a := &s.admin
	a.state.Store(stateClosed)
	if a.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.srv.Shutdown(ctx); err != nil {
		a.srv.Close()
	}
	<-a.done
	if a.console != nil {
		a.console.Close()
	}
}

// AdminAddr is the address the admin server listens on (with the real port if the configured
// one was 0).
func (s *Server) AdminAddr() string {
	if s.admin.ln != nil {
		return s.admin.ln.Addr().String()
	}
	return s.cfg.AdminAddr
}

// setState records the server's state for /readyz and /v1/status.
func (s *Server) setState(state int32) { s.admin.state.Store(state) }

// recovered tells whether Open has recovered the logs (and the server is not closed): only then
// may the admin endpoints look at the topics and the cluster id.
func (s *Server) recovered() bool {
	st := s.admin.state.Load()
	return st != stateRecovering && st != stateClosed
}

func (s *Server) topicExists(name string) bool {
	if !s.recovered() {
		return true // keep counters until the registry can answer
	}
	_, ok := s.topics.Get(name)
	return ok
}

// partitionStats appends the state of every partition log to dst, sorted by topic and partition.
// groupOffsets is every consumer group's committed offsets with the partitions' high watermarks,
// for the lag metrics (none before the broker exists).
func (s *Server) groupOffsets() []metrics.GroupOffset {
	if !s.recovered() || s.broker == nil { // the state first: Open writes s.broker before it moves
		return nil
	}
	var out []metrics.GroupOffset
	for _, o := range s.broker.GroupOffsets() {
		t, ok := s.topics.Get(o.Topic)
		if !ok || int(o.Partition) >= len(t.Partitions) {
			continue
		}
		p := t.Partitions[o.Partition]
		if p.Replica == nil {
			continue // led elsewhere: that node reports the lag
		}
		out = append(out, metrics.GroupOffset{Group: o.Group, Topic: o.Topic, Partition: o.Partition,
			Committed: o.Offset, HighWatermark: p.Replica.HighWatermark()})
	}
	return out
}

func (s *Server) shareStats() ([]metrics.SharePartition, []metrics.ShareGroup) {
	if !s.recovered() || s.broker == nil {
		return nil, nil
	}
	parts, groups := s.broker.ShareStats()
	mp := make([]metrics.SharePartition, len(parts))
	for i, p := range parts {
		mp[i] = metrics.SharePartition{Group: p.Group, Topic: p.Topic, Partition: p.Partition, Start: p.Start, Lag: p.Lag, Acquired: p.AcquiredNow}
	}
	mg := make([]metrics.ShareGroup, len(groups))
	for i, g := range groups {
		mg[i] = metrics.ShareGroup{Group: g.Group, Delivered: g.Delivered, Acked: g.Acked}
	}
	return mp, mg
}

func (s *Server) partitionStats(dst []metrics.Partition) []metrics.Partition {
	if !s.recovered() {
		return dst
	}
	s.eachPartition(func(topic string, p *topics.Partition) {
		if !p.Hosted() {
			return
		}
		dst = append(dst, metrics.Partition{Topic: topic, Partition: p.Index,
			StartOffset: p.Log.StartOffset(), EndOffset: p.Log.EndOffset(), HighWatermark: p.Replica.HighWatermark(),
			SizeBytes: p.Log.Size(), FlushLag: p.Log.FlushLag()})
	})
	return dst
}

func (s *Server) adminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.admin.registry, promhttp.HandlerOpts{
		ErrorLog:            slog.NewLogLogger(s.logger.Handler(), slog.LevelWarn),
		MaxRequestsInFlight: 4,
		Timeout:             30 * time.Second,
	}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if st := s.admin.state.Load(); st != stateServing {
			http.Error(w, "not ready: "+stateNames[st], http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		st := s.Status()
		if topic := r.URL.Query().Get("topic"); topic != "" { // one topic's partitions
			st.Topics = slices.DeleteFunc(st.Topics, func(t TopicStatus) bool { return t.Name != topic })
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(st)
	})
	if s.cfg.FaultInjection {
		mux.HandleFunc("POST /v1/debug/faults", s.handleFaults)
	}
	// Go's profiler, for "where does the CPU go" under load (go tool pprof
	// http://ADMIN/debug/pprof/profile?seconds=20). The admin listener is loopback by default.
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	// The web console (docs/console.md) at /. Its charts sample the Kafka listener's and the
	// object topics' metrics only: gathering the whole registry every 2 s would also walk every
	// partition and every group's lag, for nobody, most of the time.
	s.admin.charts = prometheus.NewRegistry()
	s.admin.charts.MustRegister(s.admin.kafka, s.admin.kafka.TopicStages())
	if con, err := console.New(console.Config{Bootstrap: s.consoleBootstrap, Overview: s.consoleOverview, Gatherer: s.admin.charts, Logger: s.logger,
		Login: s.consoleLogin(), FlushLag: s.consoleFlushLag, TotalOrder: s.consoleTotalOrder, Journal: s.consoleJournal, Hosts: s.consoleHosts()}); err != nil {
		s.logger.Error("console: not served", "err", err)
	} else {
		s.admin.console = con
		for _, p := range console.Paths {
			mux.Handle(p, con.Handler())
		}
	}
	return mux
}

// totalOrderState is what the total-order metrics read: every total-order topic this node's
// sequencer replica has applied, with the counts of the shards it runs.
func (s *Server) totalOrderState() []metrics.TotalOrderTopic {
	if !s.recovered() || s.node == nil {
		return nil
	}
	g := s.node.Sequencer()
	if g == nil { // an agent
		return nil
	}
	var out []metrics.TotalOrderTopic
	for _, t := range s.topics.List() {
		if !shard.Total(t.Configs) {
			continue
		}
		tp := metrics.TotalOrderTopic{Topic: t.Name}
		if !g.Read(shard.TopicKey(t.ID), func(sq *sequencer.Topic) {
			st := sq.State
			cur := st.Current()
			tp.View, tp.Window, tp.Confirmed = st.View, cur.Window, st.Committed()
			for i := range int32(len(t.Partitions)) {
				sh := metrics.TotalOrderShard{Shard: i, Failed: st.Out[i]}
				_, sh.Benched = st.Benched[i]
				if j := cur.Index(i); j >= 0 {
					sh.Quota = cur.Quotas[j]
				}
				tp.Shards = append(tp.Shards, sh)
			}
		}) {
			continue // not sequenced yet
		}
		for i := range tp.Shards {
			if r := s.node.Shards().Runner(t.ID, tp.Shards[i].Shard); r != nil {
				c, sh := r.Counts(), &tp.Shards[i]
				sh.Local = true
				sh.Reports, sh.LagFixReports, sh.Drains = c.Reports.Load(), c.LagFixReports.Load(), c.Drains.Load()
				sh.NoOpEntries, sh.NoOpSlots, sh.Rebases = c.NoOpEntries.Load(), c.NoOpSlots.Load(), c.Rebases.Load()
			}
		}
		out = append(out, tp)
	}
	return out
}

// clusterState is what the cluster metrics read (nothing before the node exists).
func (s *Server) clusterState() metrics.ClusterState {
	var st metrics.ClusterState
	if !s.recovered() || s.node == nil { // the state first: Open writes s.node before it moves
		return st
	}
	img := s.node.Image()
	for _, n := range img.Nodes {
		if n.Fenced {
			st.FencedNodes++
		} else {
			st.LiveNodes++
		}
	}
	st.ActiveController = s.node.ControllerID() == s.cfg.NodeID
	img.EachPartition(func(_ *controller.Topic, _ int32, p *controller.Partition) {
		st.Partitions++
		if p.Leader < 0 {
			st.Offline++
		}
		if len(p.ISR) < len(p.Hosts()) {
			st.UnderReplicated++
		}
	})
	for _, r := range s.node.Replicas().Replicas() {
		rs := r.State()
		if rs.Role != replica.RoleLeader {
			continue
		}
		st.Leaders++
		var lag int64
		for _, l := range rs.FollowerLags {
			lag = max(lag, l)
		}
		st.Lags = append(st.Lags, metrics.ReplicaLag{Topic: r.Topic, Partition: r.Ref.Partition, Records: lag})
	}
	st.LeadershipsTaken = s.node.Replicas().LeadershipsTaken.Load()
	st.ThrottledBytes = s.node.Replicas().ThrottledBytes.Load()
	st.TransportSentBytes = s.node.Transport().SentBytes.Load()
	st.TransportDropped = s.node.Transport().Dropped.Load()
	return st
}

// Status is what GET /v1/status answers, as JSON.
type Status struct {
	NodeID              int32          `json:"node_id"`
	ClusterID           string         `json:"cluster_id,omitempty"` // known once recovered
	State               string         `json:"state"`                // recovering, not_serving, serving, stopping
	Ready               bool           `json:"ready"`                // as /readyz
	KafkaAddr           string         `json:"kafka_addr"`           // the address the Kafka listener is bound to
	AdvertisedKafkaAddr string         `json:"advertised_kafka_addr"`
	AdminAddr           string         `json:"admin_addr"`
	DataDir             string         `json:"data_dir"`
	StartedAt           time.Time      `json:"started_at"`
	UptimeSeconds       float64        `json:"uptime_seconds"`
	Topics              []TopicStatus  `json:"topics"` // sorted by name
	Cluster             *ClusterStatus `json:"cluster,omitempty"`
}

// ClusterStatus is the cluster as this node's metadata has it.
type ClusterStatus struct {
	ControllerID    int32        `json:"controller_id"` // the active controller, -1 if none is known
	Voters          []int32      `json:"voters"`
	Nodes           []NodeStatus `json:"nodes"`
	Partitions      int          `json:"partitions"`
	Offline         int          `json:"offline_partitions"`
	UnderReplicated int          `json:"under_replicated_partitions"`
	// CommandLevel is the cluster's command level (the controller's metadata version: a
	// command of a higher level is not proposed while a node of an older version is registered).
	CommandLevel int `json:"command_level"`
	// CommandLevelHeld: runnel.command.level.auto=false, the level waits for an operator.
	CommandLevelHeld bool `json:"command_level_held,omitempty"`
}

// NodeStatus is one node in a ClusterStatus.
type NodeStatus struct {
	ID          int32  `json:"id"`
	KafkaAddr   string `json:"kafka_addr"`
	ClusterAddr string `json:"cluster_addr"`
	Rack        string `json:"rack,omitempty"`
	State       string `json:"state"` // live or fenced
	Leaders     int    `json:"leaders"`
	Replicas    int    `json:"replicas"`
	Level       int    `json:"level"` // the command level its version applies
}

// TopicStatus is one topic in a Status.
type TopicStatus struct {
	Name       string            `json:"name"`
	Partitions []PartitionStatus `json:"partitions"`
}

// PartitionStatus is one partition log in a Status.
type PartitionStatus struct {
	Partition       int32   `json:"partition"`
	Role            string  `json:"role"` // leader, follower, none
	LeaderEpoch     int32   `json:"leader_epoch"`
	Replicas        []int32 `json:"replicas"`
	ISR             []int32 `json:"isr"`
	StartOffset     int64   `json:"start_offset"`
	EndOffset       int64   `json:"end_offset"`
	HighWatermark   int64   `json:"high_watermark"`
	SizeBytes       int64   `json:"size_bytes"`
	FlushLagBytes   int64   `json:"flush_lag_bytes"`   // appended, not yet durable
	FlushLagRecords int64   `json:"flush_lag_records"` // appended, not yet durable
	FlushLagMillis  int64   `json:"flush_lag_ms"`      // how long the oldest of them has waited
}

// Status describes the node and its partition logs now. The caller owns the result.
func (s *Server) Status() Status {
	a := &s.admin
	st := a.state.Load()
	out := Status{NodeID: s.cfg.NodeID, State: stateNames[st], Ready: st == stateServing,
		KafkaAddr: s.cfg.KafkaAddr, AdvertisedKafkaAddr: s.cfg.AdvertisedKafkaAddr, AdminAddr: s.AdminAddr(),
		DataDir: s.cfg.DataDir, StartedAt: a.started, UptimeSeconds: time.Since(a.started).Seconds(), Topics: []TopicStatus{}}
	if addr := a.kafkaAddr.Load(); addr != nil {
		out.KafkaAddr = *addr
	}
	if s.recovered() {
		out.ClusterID = s.ClusterID()
	}
	if s.recovered() && s.node != nil {
		out.Cluster = s.clusterStatus()
	}
	for _, p := range s.partitionStats(nil) {
		if n := len(out.Topics); n == 0 || out.Topics[n-1].Name != p.Topic {
			out.Topics = append(out.Topics, TopicStatus{Name: p.Topic})
		}
		t := &out.Topics[len(out.Topics)-1]
		role, epoch, replicas, isr := s.replicaStatus(p.Topic, p.Partition)
		t.Partitions = append(t.Partitions, PartitionStatus{Partition: p.Partition, Role: role, LeaderEpoch: epoch,
			Replicas: replicas, ISR: isr, StartOffset: p.StartOffset,
			EndOffset: p.EndOffset, HighWatermark: p.HighWatermark, SizeBytes: p.SizeBytes,
			FlushLagBytes: p.FlushLag.Bytes, FlushLagRecords: p.FlushLag.Records, FlushLagMillis: p.FlushLag.Age.Milliseconds()})
	}
	return out
}

// faultRequest is the body of POST /v1/debug/faults (fault injection, for tests): isolate the
// node from peers (their cluster traffic is dropped both ways, connections stay up), heal every
// isolation, cut the connections to peers, or drop a share of Kafka responses (the request is
// carried out, the connection is closed instead of answered).
type faultRequest struct {
	Isolate          []int32 `json:"isolate,omitempty"`
	Heal             bool    `json:"heal,omitempty"`
	Cut              []int32 `json:"cut,omitempty"`
	DropResponsesPer *uint64 `json:"drop_responses_per_mille,omitempty"`
	// CrashBeforeMarkers makes the process kill itself (SIGKILL) at the next transaction whose
	// decision is durable, before any of its markers is written.
	CrashBeforeMarkers bool `json:"crash_before_markers,omitempty"`
	// ObjectCrash makes the process kill itself at the next object file it writes: "after_put"
	// (written, not committed) or "after_commit" (committed, its producers not answered).
	ObjectCrash string `json:"object_crash,omitempty"`
	// ObjectStoreFaults replaces the faults injected into the object store's calls.
	ObjectStoreFaults *objectStoreFaults `json:"object_store_faults,omitempty"`
	// SlowDisk replaces the slowness of the data dir's file system (a grey disk failure); all
	// zero: none.
	SlowDisk *slowDisk `json:"slow_disk,omitempty"`
	// StallShard freezes the runner of a total-order topic's shard led here for a while (the
	// sequencer fails the shard; it joins again once it runs).
	StallShard *stallShard `json:"stall_shard,omitempty"`
}

// slowDisk is vfs.Slowness in JSON.
type slowDisk struct {
	PathContains      string `json:"path_contains,omitempty"`
	WriteMs           int    `json:"write_ms,omitempty"`
	SyncMs            int    `json:"sync_ms,omitempty"`
	WritesWaitForSync bool   `json:"writes_wait_for_sync,omitempty"`
}

type stallShard struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Ms        int    `json:"ms"`
}

// objectStoreFaults are objstore.Faults in JSON.
type objectStoreFaults struct {
	LatencyMs     int     `json:"latency_ms,omitempty"`
	JitterMs      int     `json:"jitter_ms,omitempty"`
	ErrorRate     float64 `json:"error_rate,omitempty"`
	SlowDownRate  float64 `json:"slowdown_rate,omitempty"`
	TimeoutRate   float64 `json:"timeout_rate,omitempty"`
	LostReplyRate float64 `json:"lost_reply_rate,omitempty"`
}

func (s *Server) handleFaults(w http.ResponseWriter, r *http.Request) {
	var req faultRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	tr := s.node.Transport()
	if req.Heal {
		tr.Heal()
	}
	if len(req.Isolate) > 0 {
		tr.Isolate(req.Isolate...)
	}
	for _, p := range req.Cut {
		tr.CutConnections(p)
	}
	if req.DropResponsesPer != nil {
		s.dropRate.Store(min(*req.DropResponsesPer, 1000))
	}
	if req.CrashBeforeMarkers {
		s.crashBeforeMarkers.Store(true)
	}
	switch req.ObjectCrash {
	case "":
	case "after_put", "after_commit":
		s.objectCrash.Store(&req.ObjectCrash)
	default:
		http.Error(w, "object_crash: want after_put or after_commit", http.StatusBadRequest)
		return
	}
	if f := req.ObjectStoreFaults; f != nil {
		if s.faultyStore == nil {
			http.Error(w, "this node has no object store", http.StatusBadRequest)
			return
		}
		s.faultyStore.Set(objstore.Faults{Latency: time.Duration(f.LatencyMs) * time.Millisecond,
			Jitter: time.Duration(f.JitterMs) * time.Millisecond, ErrorRate: f.ErrorRate,
			SlowDownRate: f.SlowDownRate, TimeoutRate: f.TimeoutRate, LostReplyRate: f.LostReplyRate})
	}
	if d := req.SlowDisk; d != nil {
		s.slowDisk.Set(vfs.Slowness{PathContains: d.PathContains, Write: time.Duration(d.WriteMs) * time.Millisecond,
			Sync: time.Duration(d.SyncMs) * time.Millisecond, WritesWaitForSync: d.WritesWaitForSync})
	}
	if st := req.StallShard; st != nil {
		t, ok := s.topics.Get(st.Topic)
		var r *shard.Runner
		if ok && s.node.Shards() != nil {
			r = s.node.Shards().Runner(t.ID, st.Partition)
		}
		if r == nil {
			http.Error(w, "stall_shard: this node does not lead that shard", http.StatusBadRequest)
			return
		}
		r.Stall(time.Duration(st.Ms) * time.Millisecond)
	}
	s.logger.Warn("fault injection", "isolate", req.Isolate, "heal", req.Heal, "cut", req.Cut, "isolated_now", tr.Isolated(),
		"drop_responses_per_mille", s.dropRate.Load(), "slow_disk", req.SlowDisk)
	fmt.Fprintln(w, "ok")
}

// beforeMarkers is the broker hook of the crash_before_markers fault: the process dies as kill -9
// would kill it, with the transaction's Prepare* record durable and no marker written.
func (s *Server) beforeMarkers(txnID string, commit bool) {
	if s.crashBeforeMarkers.Load() {
		s.logger.Warn("fault injection: crashing between a transaction's prepare and its markers", "transactional_id", txnID, "commit", commit)
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way: nothing more may happen here
	}
}

// objectCrashAt is the object writer's hook of the object_crash fault: the process dies as
// kill -9 would kill it at the armed point of the next file.
func (s *Server) objectCrashAt(point string) func(key string) {
	return func(key string) {
		if armed := s.objectCrash.Load(); armed != nil && *armed == point {
			s.logger.Warn("fault injection: crashing at an object file", "point", point, "key", key)
			if point == "after_put" {
				time.Sleep(100 * time.Millisecond) // lazy answers, given at the write, go out first
			}
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	}
}

// dropResponse is the broker hook of fault injection: it drops the configured share of
// responses to produce requests (the request was carried out; the client never hears).
func (s *Server) dropResponse(key int16, _ kmsg.Response) bool {
	rate := s.dropRate.Load()
	return rate > 0 && key == 0 && mrand.Uint64N(1000) < rate
}

// replicaStatus is a hosted partition's role here and its replicas, from the metadata.
func (s *Server) replicaStatus(topic string, index int32) (role string, epoch int32, replicas, isr []int32) {
	t, ok := s.topics.Get(topic)
	if !ok || int(index) >= len(t.Partitions) || t.Partitions[index].Replica == nil {
		return "none", -1, nil, nil
	}
	a := t.Partitions[index].Replica.Assignment()
	if _, p, ok := s.node.Image().Partition(t.ID, index); ok {
		replicas, isr = p.Hosts(), p.ISR
	}
	return a.Role.String(), a.Epoch, replicas, isr
}

func (s *Server) clusterStatus() *ClusterStatus {
	img := s.node.Image()
	cs := &ClusterStatus{ControllerID: s.node.ControllerID(), Voters: s.node.Voters(), CommandLevel: img.Level,
		CommandLevelHeld: img.ClusterConfigs[controller.AutoLevelConfig] == "false"}
	leaders, replicas := map[int32]int{}, map[int32]int{}
	img.EachPartition(func(_ *controller.Topic, _ int32, p *controller.Partition) {
		cs.Partitions++
		if p.Leader < 0 {
			cs.Offline++
		} else {
			leaders[p.Leader]++
		}
		if len(p.ISR) < len(p.Hosts()) {
			cs.UnderReplicated++
		}
		for _, n := range p.Hosts() {
			replicas[n]++
		}
	})
	for _, id := range img.NodeIDs() {
		n := img.Nodes[id]
		state := "live"
		if n.Fenced {
			state = "fenced"
		}
		cs.Nodes = append(cs.Nodes, NodeStatus{ID: id, KafkaAddr: net.JoinHostPort(n.KafkaHost, strconv.Itoa(int(n.KafkaPort))),
			ClusterAddr: n.ClusterAddr, Rack: n.Rack, State: state, Leaders: leaders[id], Replicas: replicas[id], Level: n.Level})
	}
	return cs
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
