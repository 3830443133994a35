// Package server is one Runnel node: it owns the data directory and everything opened from it.
//
// Data directory layout:
//
//	<data-dir>/
//	  LOCK                          flock'ed by the running server; holds its process id
//	  cluster.id                    the cluster id (a mirror of the controller's)
//	  controller/                   the controller quorum's Raft log (package controller)
//	  topics/                       topic metadata and partition logs (package topics)
//
// A Server locks the data directory, starts its cluster node (transport, controller member,
// replicas: package cluster), and once the node has joined the cluster serves Kafka. Its admin
// HTTP server (admin.go: health, readiness, metrics, status) runs from Open to Close. An older
// one-node data dir (topics/*/topic.json, producer-ids, broker-configs.json, cluster.id) is
// imported by the first start of its new controller.
package server

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/runnel-dev/runnel/internal/broker"
	"github.com/runnel-dev/runnel/internal/cluster"
	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/group"
	"github.com/runnel-dev/runnel/internal/logstore"
	"github.com/runnel-dev/runnel/internal/metrics"
	"github.com/runnel-dev/runnel/internal/objects"
	"github.com/runnel-dev/runnel/internal/objstore"
	"github.com/runnel-dev/runnel/internal/objtopic"
	"github.com/runnel-dev/runnel/internal/replica"
	"github.com/runnel-dev/runnel/internal/security"
	"github.com/runnel-dev/runnel/internal/share"
	"github.com/runnel-dev/runnel/internal/speclog/service"
	"github.com/runnel-dev/runnel/internal/topics"
	"github.com/runnel-dev/runnel/internal/vfs"
	pb "github.com/runnel-dev/runnel/speclog/speclogpb"
)

// Config is what a Server needs to start. The zero value is not valid; see Validate.
type Config struct {
	DataDir             string // created if missing
	KafkaAddr           string // host:port the Kafka listener binds
	AdvertisedKafkaAddr string // host:port clients are told to connect to; "" means KafkaAddr
	NodeID              int32  // this node's broker id, >= 0
	AdminAddr           string // host:port of the admin HTTP server (metrics, health); port 0 picks one
	// ClusterAddr is the node's internal listener (Raft, replication); port 0 picks one.
	ClusterAddr string
	// ControllerVoters maps the controller quorum's node ids to their cluster addresses; empty
	// means this node alone (a one-node cluster).
	ControllerVoters map[int32]string
	Rack             string
	// RackAwareReads: a consumer naming its rack reads from an in-sync replica in that rack
	// (KIP-392; --replica-selector).
	RackAwareReads bool
	// GroupMigrationPolicy is Kafka's group.consumer.migration.policy ("": bidirectional):
	// which way a live group may switch between the classic and the consumer protocol.
	GroupMigrationPolicy string
	// ShareGroups holds Kafka's group.share.record.lock.duration.ms,
	// group.share.delivery.count.limit and group.share.partition.max.record.locks (zero: their
	// defaults, 30 s, 5 and 2000).
	ShareGroups share.Config
	// StreamsSessionTimeout, StreamsHeartbeatInterval and StreamsStandbyReplicas are Kafka's
	// group.streams.session.timeout.ms, group.streams.heartbeat.interval.ms and
	// group.streams.num.standby.replicas (zero durations: 45 s and 5 s).
	StreamsSessionTimeout    time.Duration
	StreamsHeartbeatInterval time.Duration
	StreamsStandbyReplicas   int
	// LogRetentionCheckInterval and LogCleanerBackoff are Kafka's log.retention.check.interval.ms
	// and log.cleaner.backoff.ms: how often the node applies the retention of its replicated
	// topics' logs and looks for a log to compact (zero: 5 min and 15 s).
	LogRetentionCheckInterval time.Duration
	LogCleanerBackoff         time.Duration
	// GroupInitialRebalanceDelay is group.initial.rebalance.delay.ms: how long a classic group
	// that a member joins empty waits for more before its first rebalance (zero: 3 s; negative:
	// none).
	GroupInitialRebalanceDelay time.Duration
	// StreamsInitialRebalanceDelay is group.streams.initial.rebalance.delay.ms (zero: 3 s;
	// negative: none).
	StreamsInitialRebalanceDelay time.Duration
	// StreamsAssignmentInterval is group.streams.assignment.interval.ms (zero: 1 s; negative:
	// none).
	StreamsAssignmentInterval time.Duration
	// NumPartitions is Kafka's num.partitions: partitions of a topic created without a count
	// (auto-created, or CreateTopics with -1); 0: 1.
	NumPartitions int32
	// DefaultReplicationFactor is Kafka's default.replication.factor: the replication factor of
	// a topic created without one; 0: 3 once three storage nodes are registered, else 1.
	DefaultReplicationFactor int16
	// OffsetsReplicationFactor and TxnStateReplicationFactor are Kafka's
	// offsets.topic.replication.factor and transaction.state.log.replication.factor (0: 3 once
	// three storage nodes are registered, else 1).
	OffsetsReplicationFactor, TxnStateReplicationFactor int16
	// OffsetsPartitions and TxnStatePartitions are Kafka's offsets.topic.num.partitions and
	// transaction.state.log.num.partitions (0: 50): the internal topics' partition counts at
	// creation.
	OffsetsPartitions, TxnStatePartitions int32
	// NoAutoCreateTopics turns off Kafka's auto.create.topics.enable (on by default, as Kafka's).
	NoAutoCreateTopics bool
	// FetchMaxBytes is Kafka's fetch.max.bytes: the most record bytes a fetch response
	// carries beyond its first batch (0: 55 MiB, Kafka's default).
	FetchMaxBytes int32
	// NoTopicDeletion turns off Kafka's delete.topic.enable (on by default, as Kafka's).
	NoTopicDeletion bool
	// ReplicaLagTimeMax is Kafka's replica.lag.time.max.ms: a follower not caught up with its
	// leader's log for this long leaves the ISR (0: 30 s, Kafka's default).
	ReplicaLagTimeMax time.Duration
	// GivenConfigs names the static broker configs given explicitly, by Kafka's names
	// (broker.Config.GivenConfigs).
	GivenConfigs map[string]bool
	// LeaderBalanceInterval is how often this node, while it runs the active controller, moves
	// leaderships back to preferred replicas (Kafka's leader.imbalance.check.interval.seconds);
	// 0: 5 s; negative: never (auto.leader.rebalance.enable=false).
	LeaderBalanceInterval time.Duration
	// LeaderImbalancePercent is Kafka's leader.imbalance.per.broker.percentage (0: 10; negative:
	// 0, any imbalance).
	LeaderImbalancePercent int
	// SessionTimeout: a node not heard from this long is fenced and its partitions get new
	// leaders (0: 1.5 s).
	SessionTimeout time.Duration
	// NoControlledShutdown: at shutdown the node stops without first moving its leaderships
	// to other replicas (Kafka's controlled.shutdown.enable=false; tests that simulate a
	// crash by stopping a node).
	NoControlledShutdown bool
	// FaultInjection serves POST /v1/debug/faults on the admin listener (tests only: it can
	// isolate the node from its peers and drop Kafka responses).
	FaultInjection bool
	// SpecLogAddr is the host:port of the SpecLog gRPC service of total-order topics
	// (docs/speclog.md §6); "" serves none. Port 0 picks one.
	SpecLogAddr string
	// Listeners are the Kafka listeners (docs/security.md §1); nil means one PLAINTEXT
	// listener at KafkaAddr advertised as AdvertisedKafkaAddr. When set, KafkaAddr and
	// AdvertisedKafkaAddr are taken from the first.
	Listeners []security.Listener
	// TLS material for TLS listeners, --cluster-tls and --admin-tls: PEM files, reloaded when
	// they change. TLSClientAuth is none, requested or required ("": required with a CA).
	TLSCertFile, TLSKeyFile, TLSClientCAFile string
	TLSClientAuth                            string
	// SSLPrincipalMappingRules is Kafka's ssl.principal.mapping.rules: how a client
	// certificate's subject becomes its principal's name ("" or DEFAULT: the whole subject).
	SSLPrincipalMappingRules string
	// ClusterTLS makes the node-to-node transport TLS (peers need certificates signed by the
	// client CA); AdminTLS serves the admin endpoint over HTTPS; SpecLogTLS serves the SpecLog
	// API over TLS (and its node-to-node streams).
	ClusterTLS, AdminTLS, SpecLogTLS bool
	// ConsoleHosts are host names (or host:port) the web console is also served under, besides
	// the admin listener's, the listeners' and advertised ones and the machine's host name (a
	// reverse proxy's name, a DNS alias); "*" serves any. Other names are refused (DNS
	// rebinding; docs/console.md, Security).
	ConsoleHosts []string
	// SASLMechanisms enabled on SASL listeners (nil: SCRAM-SHA-256, SCRAM-SHA-512); MaxReauth is
	// connections.max.reauth.ms (0: sessions do not expire).
	SASLMechanisms []string
	MaxReauth      time.Duration
	// ConnectionsMaxIdle is connections.max.idle.ms: a Kafka connection that sends nothing for
	// this long is closed (0: 10 minutes; negative: never).
	ConnectionsMaxIdle time.Duration
	// DelegationTokenSecret is delegation.token.secret.key, the same on every node ("": no
	// delegation tokens); DelegationTokenMaxLifetime and DelegationTokenExpiry are
	// delegation.token.max.lifetime.ms and delegation.token.expiry.time.ms (defaults 7 days,
	// 1 day).
	DelegationTokenSecret                             string
	DelegationTokenMaxLifetime, DelegationTokenExpiry time.Duration
	// OAuth configures OAUTHBEARER (needed when SASLMechanisms has it): Kafka's
	// sasl.oauthbearer.* broker configs (docs/security.md §3).
	OAuth security.OAuthConfig
	// Kerberos configures GSSAPI (needed when SASLMechanisms has it): the broker's keytab and
	// principal (Kafka's JAAS KafkaServer section), sasl.kerberos.service.name and
	// sasl.kerberos.principal.to.local.rules (docs/security.md §3).
	Kerberos security.KerberosConfig
	// BootstrapUser "name:password" is added as a SCRAM user (both mechanisms) if the cluster
	// has no user of that name: the first way in to a cluster with SASL listeners only.
	BootstrapUser string
	// Authorizer is "none" (or "": every request allowed) or "acl" (Kafka's ACLs, kept in the
	// metadata); SuperUsers is Kafka's super.users ("User:a;User:b"); AllowEveryoneIfNoACL is
	// allow.everyone.if.no.acl.found.
	Authorizer           string
	SuperUsers           string
	AllowEveryoneIfNoACL bool

	// SlowRequestThreshold: Kafka requests taking longer are logged at Warn. 0 means 500 ms;
	// negative logs none.
	SlowRequestThreshold time.Duration

	Logger  *slog.Logger // defaults to slog.Default()
	Console io.Writer    // plain-text notices for the operator; defaults to os.Stderr
	// LogLevel is the level Logger's handler logs at, which BROKER_LOGGER configs change on
	// this node (the root logger); nil: they change only what the node's broker logs.
	LogLevel *slog.LevelVar

	// FS is the file system the data dir is on; nil means the operating system's. Tests put a
	// server on a crashable file system to cut its power. The data-dir lock (an OS file lock)
	// is taken only on the operating system's file system.
	FS vfs.FS

	// Hooks let tests intercept the broker's work (see broker.Hooks).
	Hooks broker.Hooks

	// ObjectStore is the URL of the object store (objstore.Open: file:///dir or
	// s3://bucket/prefix?endpoint=URL&region=R); "" means file://<data dir>/objects, or none on
	// a test file system.
	ObjectStore string
	// ObjectBatchTimeout and ObjectBatchBytes: the node's buffer of object topics' batches is
	// written as one file this long after its first batch or once it holds this many bytes
	// (defaults 250 ms, 4 MiB). ObjectCacheBytes bounds the read cache (default 256 MiB).
	ObjectBatchTimeout time.Duration
	ObjectBatchBytes   int
	ObjectCacheBytes   int64
	// NoObjectPeerReads: every read cache miss reads the object store, instead of the file's
	// owner node (docs/object-topics.md §3).
	NoObjectPeerReads bool
	// ObjectRetentionInterval: how often the active controller applies object topics'
	// retention (default 30 s).
	ObjectRetentionInterval time.Duration
	// ObjectCompactionInterval: how often the active controller looks for compacted object
	// topics' partitions due for compaction (default 15 s).
	ObjectCompactionInterval time.Duration
	// ObjectGCInterval and ObjectGCGrace: how often the active controller has the object store's
	// garbage collected (default 1 min), and how long an object stays unreferenced before it is
	// deleted (default 10 min: longer than any read).
	ObjectGCInterval, ObjectGCGrace time.Duration

	// Ripcord: while the controller is unreachable, object topics are sequenced lazily so
	// produce goes on (docs/object-topics.md §9.5).
	Ripcord bool

	// Agent runs a stateless `runnel agent`: it serves object topics only, holds no replica,
	// and needs the controller voters and a shared object store. Its data dir (a new temporary
	// directory if DataDir is "") holds only its copy of the metadata log and is removed at
	// Close.
	Agent bool
}

// dataDirEmpty reports whether dir holds nothing of a node's (it may not exist yet, or hold
// only the LOCK of a process that stopped before it wrote anything).
func dataDirEmpty(fsys vfs.FS, dir string) bool {
	names, err := fsys.List(dir)
	if err != nil {
		return errors.Is(err, vfs.ErrNotExist)
	}
	for _, name := range names {
		if name != lockFileName {
			return false
		}
	}
	return true
}

// probeObjectStore lists one object to find out early whether the object store answers; a store
// that does not is reported (the node serves local topics without it).
func (s *Server) probeObjectStore() {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if _, err := s.objects.List(ctx, "", "", 1); err != nil {
		s.logger.Warn("object store not reachable", "store", s.objects.String(), "err", err)
		return
	}
	s.logger.Info("object store", "store", s.objects.String())
}

// Validate reports the first setting that is missing or malformed.
func (c Config) Validate() error {
	if c.Agent {
		if len(c.ControllerVoters) == 0 {
			return errors.New("server: an agent needs --controller-voters")
		}
		if _, voter := c.ControllerVoters[c.NodeID]; voter {
			return fmt.Errorf("server: an agent cannot be a controller voter (node %d)", c.NodeID)
		}
		if c.ObjectStore == "" {
			return errors.New("server: an agent needs --object-store, the store the cluster's nodes share")
		}
	}
	if c.DataDir == "" && !c.Agent {
		return errors.New("server: data dir is empty")
	}
	if c.NodeID < 0 {
		return fmt.Errorf("server: node id %d is negative", c.NodeID)
	}
	if len(c.Listeners) > 0 {
		c.KafkaAddr = c.Listeners[0].Addr
	}
	if err := checkAddr("kafka addr", c.KafkaAddr); err != nil {
		return err
	}
	needTLS := c.ClusterTLS || c.AdminTLS || c.SpecLogTLS
	for _, l := range c.Listeners {
		needTLS = needTLS || l.Protocol.TLS()
	}
	if needTLS && (c.TLSCertFile == "" || c.TLSKeyFile == "") {
		return errors.New("server: a TLS listener, --cluster-tls, --admin-tls or --speclog-tls needs --tls-cert-file and --tls-key-file")
	}
	if c.ClusterTLS && c.TLSClientCAFile == "" {
		return errors.New("server: --cluster-tls needs --tls-client-ca-file, the CA that signs the nodes' certificates")
	}
	if _, err := security.ParseClientAuth(c.TLSClientAuth, c.TLSClientCAFile != ""); err != nil {
		return err
	}
	switch c.Authorizer {
	case "", "none", "acl":
	default:
		return fmt.Errorf("server: --authorizer %q is not none or acl", c.Authorizer)
	}
	if slices.Contains(c.SASLMechanisms, security.OAuthBearer) && c.OAuth.JWKSURL == "" && !c.OAuth.Unsecured {
		return errors.New("server: SASL mechanism OAUTHBEARER needs --sasl-oauthbearer-jwks-endpoint-url (or --sasl-oauthbearer-unsecured for unsigned development tokens)")
	}
	if slices.Contains(c.SASLMechanisms, security.GSSAPI) && c.Kerberos.Keytab == "" {
		return errors.New("server: SASL mechanism GSSAPI needs --sasl-kerberos-keytab")
	}
	if _, err := security.ParseKerberosRules(c.Kerberos.Rules); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	if _, err := security.ParsePrincipalMappingRules(c.SSLPrincipalMappingRules); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	if _, err := security.ParseSuperUsers(c.SuperUsers); err != nil {
		return err
	}
	if c.BootstrapUser != "" {
		if name, pass, ok := strings.Cut(c.BootstrapUser, ":"); !ok || name == "" || pass == "" {
			return errors.New("server: the bootstrap user is not name:password")
		}
	}
	if c.AdvertisedKafkaAddr != "" {
		if err := checkAddr("advertised kafka addr", c.AdvertisedKafkaAddr); err != nil {
			return err
		}
	}
	if c.ClusterAddr != "" {
		if err := checkAddr("cluster addr", c.ClusterAddr); err != nil {
			return err
		}
	}
	for id, addr := range c.ControllerVoters {
		if id < 0 {
			return fmt.Errorf("server: controller voter id %d is negative", id)
		}
		if err := checkAddr(fmt.Sprintf("controller voter %d", id), addr); err != nil {
			return err
		}
	}
	if c.SpecLogAddr != "" {
		if err := checkAddr("speclog addr", c.SpecLogAddr); err != nil {
			return err
		}
	}
	return checkAddr("admin addr", c.AdminAddr)
}

func checkAddr(what, addr string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("server: %s %q is not host:port: %w", what, addr, err)
	}
	return nil
}

// PartitionState describes one open partition log.
type PartitionState struct {
	Topic       string
	Partition   int32
	StartOffset int64 // log start offset
	EndOffset   int64 // log end offset: the offset the next record gets
	SizeBytes   int64
}

// Server is one node. Open it, Run it until its context ends, then Close it.
type Server struct {
	cfg    Config
	logger *slog.Logger
	// ripcordActive: in Ripcord mode when last asked (ripcordWatch; runnel_ripcord_active).
	ripcordActive atomic.Bool
	lock          *dirLock
	flusher       *logstore.Flusher
	maint         *logstore.Maintainer // retention and compaction, started by Run
	topics        *topics.Registry
	objects       objstore.Store // nil: none (a test file system without one)
	objw          *objects.Writer
	tempDir       string // an agent's own data dir, removed at Close
	// objmaint runs object topics' retention and garbage collection when this node is the
	// active controller.
	objmaint *objects.Maintainer
	dir      *objects.Directory // this process's announcement in the object store
	node     *cluster.Node
	broker   *broker.Broker
	closed   bool
	admin    admin // admin HTTP server, metrics registry, readiness (admin.go)
	// dropRate is fault injection: the per-mille of produce responses dropped.
	dropRate atomic.Uint64
	// crashBeforeMarkers is fault injection: die at the next transaction marker round.
	crashBeforeMarkers atomic.Bool
	// objectCrash is fault injection: die at this point of the next object file.
	objectCrash atomic.Pointer[string]
	// faultyStore wraps the object store, and slowDisk the data dir's file system, when fault
	// injection is on.
	faultyStore *objstore.Faulty
	slowDisk    *vfs.SlowFS
	// speclogLn is the SpecLog service's listener (nil: none); Run serves it.
	speclogLn   net.Listener
	speclogAddr string
	// consoleSpeclog is the SpecLog service the console describes total-order topics with.
	consoleSpeclog struct {
		once sync.Once
		svc  *service.Server
	}
	// consolePeers asks other nodes' admin endpoints over HTTPS (--admin-tls) for the console.
	consolePeers struct {
		once   sync.Once
		client *http.Client
	}
	// tls serves the TLS listeners' certificates (nil: no TLS configured).
	tls *security.TLSFiles
	// oauth validates OAUTHBEARER tokens (nil without the mechanism).
	oauth *security.OAuthValidator
	// kafkaLns are the Kafka listeners after the first, by index: those on port 0 bound at Open, the
	// others (nil until then) once an active controller answers, before the node registers
	// (bindListeners, bindOwned).
	kafkaLns []net.Listener
	// binds guards kafkaLns and the first listener Run binds, which the cluster node's join
	// (BeforeRegister) and Run may bind (bindOwned).
	binds struct {
		sync.Mutex
		run        bool         // Run binds the first listener; Serve's caller did
		controller bool         // the node found an active controller: bind what is ours
		served     bool         // serve took the listeners
		closed     bool         // Run or Serve gave up, or Close: bind nothing more
		first      net.Listener // Run's, once bound
	}
	listenerAddrs map[string]string
	speclogACLs   security.ACLCache
}

// Open validates cfg, creates and locks the data directory, and opens (recovering) every
// partition log in it. It fails with ErrDataDirLocked if another server holds the directory.
func Open(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(cfg.Listeners) > 0 {
		cfg.KafkaAddr, cfg.AdvertisedKafkaAddr = cfg.Listeners[0].Addr, cfg.Listeners[0].Advertised
	}
	if cfg.AdvertisedKafkaAddr == "" {
		cfg.AdvertisedKafkaAddr = cfg.KafkaAddr
	}
	if len(cfg.Listeners) == 0 {
		cfg.Listeners = []security.Listener{{Name: string(security.Plaintext), Protocol: security.Plaintext, Addr: cfg.KafkaAddr, Advertised: cfg.AdvertisedKafkaAddr}}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Console == nil {
		cfg.Console = os.Stderr
	}
	var tlsFiles *security.TLSFiles
	if cfg.TLSCertFile != "" {
		auth, _ := security.ParseClientAuth(cfg.TLSClientAuth, cfg.TLSClientCAFile != "")
		var err error
		if tlsFiles, err = security.LoadTLSFiles(cfg.TLSCertFile, cfg.TLSKeyFile, cfg.TLSClientCAFile, auth, cfg.Logger); err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
	}
	onOS := cfg.FS == nil
	if onOS {
		cfg.FS = vfs.Default
	}
	var slowDisk *vfs.SlowFS
	if cfg.FaultInjection {
		slowDisk = vfs.NewSlowFS(cfg.FS)
		cfg.FS = slowDisk
	}
	tempDir := ""
	if cfg.Agent && cfg.DataDir == "" {
		dir, err := os.MkdirTemp("", "runnel-agent-")
		if err != nil {
			return nil, fmt.Errorf("server: agent data dir: %w", err)
		}
		cfg.DataDir, tempDir = dir, dir
	}
	emptyDir := dataDirEmpty(cfg.FS, cfg.DataDir)
	if err := cfg.FS.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("server: creating data dir: %w", err)
	}
	var lock *dirLock
	if onOS {
		var err error
		if lock, err = lockDir(cfg.DataDir); err != nil {
			return nil, err
		}
	}
	if emptyDir && !cfg.Agent {
		// Before anything else is written there: a start that fails on the way (a port in use)
		// leaves a dir that still counts as empty (cluster.JoiningFile).
		if err := cluster.MarkJoining(cfg.FS, cfg.DataDir); err != nil {
			lock.release()
			return nil, fmt.Errorf("server: marking the data dir: %w", err)
		}
	}
	s := &Server{cfg: cfg, logger: cfg.Logger, lock: lock, flusher: logstore.NewFlusher(0), tempDir: tempDir, tls: tlsFiles, slowDisk: slowDisk,
		// Kafka's defaults: log.retention.check.interval.ms 5 min, log.cleaner.backoff.ms 15 s.
		maint: logstore.NewMaintainer(logstore.NewCompactor(0), cmp.Or(cfg.LogRetentionCheckInterval, 5*time.Minute),
			cmp.Or(cfg.LogCleanerBackoff, 15*time.Second), cfg.Logger)}
	if err := s.startAdmin(); err != nil { // before recovery: /healthz answers during it
		return nil, errors.Join(err, s.Close())
	}
	var err error
	storeURL := cfg.ObjectStore
	if storeURL == "" && onOS {
		abs, aerr := filepath.Abs(filepath.Join(cfg.DataDir, "objects"))
		if aerr != nil {
			return nil, errors.Join(aerr, s.Close())
		}
		storeURL = "file://" + abs
	}
	if storeURL != "" {
		if s.objects, err = objstore.Open(context.Background(), storeURL); err != nil {
			return nil, errors.Join(fmt.Errorf("server: --object-store: %w", err), s.Close())
		}
		if cfg.FaultInjection {
			s.faultyStore = objstore.NewFaulty(s.objects, uint64(time.Now().UnixNano()))
			s.objects = s.faultyStore
		}
		go s.probeObjectStore()
	}
	if s.topics, err = topics.Open(topics.Options{FS: cfg.FS, DataDir: cfg.DataDir, Flusher: s.flusher,
		Maintainer: s.maint, Logger: s.logger}); err != nil {
		return nil, errors.Join(err, s.Close())
	}
	clusterAddr := cfg.ClusterAddr
	if clusterAddr == "" {
		clusterAddr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", clusterAddr)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("server: cluster listener: %w", err), s.Close())
	}
	var clusterTLS func(string) *tls.Config
	if cfg.ClusterTLS {
		ln = tls.NewListener(ln, tlsFiles.ServerConfigForPeers(clusterPeerCheck(cfg, tlsFiles)))
		clusterTLS = tlsFiles.ClientConfigFor
	}
	host, portStr, _ := net.SplitHostPort(cfg.AdvertisedKafkaAddr)
	port, _ := strconv.Atoi(portStr)
	endpoints, err := s.bindListeners(host, int32(port))
	if err != nil {
		ln.Close()
		return nil, errors.Join(err, s.Close())
	}
	legacyID, _ := vfs.ReadFile(cfg.FS, filepath.Join(cfg.DataDir, "cluster.id"))
	active := controller.DefaultActiveConfig()
	if cfg.SessionTimeout > 0 {
		active.SessionTimeout = cfg.SessionTimeout
	}
	switch {
	case cfg.LeaderBalanceInterval > 0:
		active.BalanceInterval = cfg.LeaderBalanceInterval
	case cfg.LeaderBalanceInterval < 0:
		active.BalanceInterval = 0
	}
	switch {
	case cfg.LeaderImbalancePercent > 0:
		active.ImbalancePercent = cfg.LeaderImbalancePercent
	case cfg.LeaderImbalancePercent < 0:
		active.ImbalancePercent = 0
	}
	var speclogAddr string
	if cfg.SpecLogAddr != "" && !cfg.Agent {
		if s.speclogLn, err = net.Listen("tcp", cfg.SpecLogAddr); err != nil {
			ln.Close()
			return nil, errors.Join(fmt.Errorf("server: speclog listener: %w", err), s.Close())
		}
		speclogAddr = s.speclogLn.Addr().String()
		s.speclogAddr = speclogAddr
	}
	s.node, err = cluster.Start(cluster.Config{NodeID: cfg.NodeID, Listener: ln, Voters: cfg.ControllerVoters,
		KafkaHost: host, KafkaPort: int32(port), Rack: cfg.Rack, Agent: cfg.Agent, FS: cfg.FS, DataDir: cfg.DataDir, Registry: s.topics,
		Logger: s.logger, ClusterID: string(legacyID), Import: s.importLegacy, Active: active, SpecLogAddr: speclogAddr,
		AdminAddr: reachable(s.AdminAddr(), host), Listeners: endpoints, TLS: clusterTLS, OnWALSync: s.admin.raft.WALSync,
		BeforeRegister: s.bindOwned, EmptyDataDir: emptyDir, Replica: replica.Config{LagMax: cfg.ReplicaLagTimeMax}})
	if err != nil {
		ln.Close()
		return nil, errors.Join(err, s.Close())
	}
	hooks := cfg.Hooks
	if cfg.FaultInjection && hooks.DropResponse == nil {
		hooks.DropResponse = s.dropResponse
	}
	if cfg.FaultInjection && hooks.BeforeMarkers == nil {
		hooks.BeforeMarkers = s.beforeMarkers
	}
	var objCache *objects.Cache
	var ripcording func() bool // Ripcord mode now: nil unless --ripcord
	if cfg.Ripcord {
		ripcording = s.ripcordWatch(func() bool { return !s.node.ControllerReachable(ripcordAfter) })
	}
	var members func() []objects.Member
	if s.objects != nil {
		m := metrics.NewObjects()
		s.admin.registry.MustRegister(m)
		s.admin.charts.MustRegister(m)
		objCache = objects.NewCache(s.objects, cfg.ObjectCacheBytes, m)
		if !cfg.NoObjectPeerReads {
			objCache.SetPeers(objectPeers{s.node})
		}
		s.node.ServeObjectRanges(objCache.Serve)
		s.objw = objects.NewWriter(objects.WriterConfig{Store: s.objects, Commit: s.node.CommitFile, Node: cfg.NodeID, Run: s.node.Run(), Incarnation: s.node.Incarnation,
			BatchTimeout: cfg.ObjectBatchTimeout, BatchBytes: cfg.ObjectBatchBytes, Cache: objCache, Ripcording: ripcording, Metrics: m, Logger: s.logger})
		if cfg.FaultInjection {
			s.objw.SetHooks(s.objectCrashAt("after_put"), s.objectCrashAt("after_commit"))
		}
		s.objmaint = objects.NewMaintainer(objects.MaintainerConfig{Store: s.objects, Image: s.node.Image,
			Active:  func() bool { return s.node.ControllerID() == cfg.NodeID },
			Node:    cfg.NodeID,
			Propose: s.node.ProposeApplied,
			Config: func(topic, name string) string {
				t, ok := s.topics.Get(topic)
				if !ok {
					return "-1"
				}
				v, _ := t.Effective(name)
				return v
			},
			MergeWorker: func(ctx context.Context, ref controller.PartitionRef, run []objtopic.Extent) (*objtopic.Extent, error) {
				node, ok := s.node.MergeWorker(ref)
				if !ok {
					return nil, objects.ErrNoWorker
				}
				return s.node.MergeObjectsOn(ctx, node, ref, run)
			},
			CompactWorker: func(ctx context.Context, job objects.CompactJob) (objects.CompactStats, error) {
				node, ok := s.node.MergeWorker(job.Ref)
				if !ok {
					return objects.CompactStats{}, objects.ErrNoWorker
				}
				return s.node.CompactObjectsOn(ctx, node, job)
			},
			GCWorker: func(ctx context.Context, job objects.GCJob) (int, error) {
				node, ok := s.node.Worker("gc")
				if !ok {
					return 0, objects.ErrNoWorker
				}
				return s.node.CollectGarbageOn(ctx, node, job)
			},
			Barrier:           s.node.Barrier,
			RetentionInterval: cfg.ObjectRetentionInterval, CompactInterval: cfg.ObjectCompactionInterval,
			GCInterval: cfg.ObjectGCInterval, GCGrace: cfg.ObjectGCGrace, Metrics: m, Logger: s.logger})
		s.node.ServeObjectMerges(func(ctx context.Context, ref controller.PartitionRef, run []objtopic.Extent) (*objtopic.Extent, error) {
			merged, err := s.objmaint.MergeRun(ctx, ref, run)
			if err == nil {
				m.Merged("for_controller")
			}
			return merged, err
		})
		s.node.ServeObjectCompactions(func(ctx context.Context, job objects.CompactJob) (objects.CompactStats, error) {
			var st objects.CompactStats
			err := s.objmaint.CompactRun(ctx, job, &st)
			m.Compacted(st.Local())
			if err == nil {
				m.CompactedBy("for_controller")
			}
			return st, err
		})
		s.node.ServeObjectGC(func(ctx context.Context, job objects.GCJob) (int, error) {
			n, err := s.objmaint.GCRun(ctx, job, time.Now())
			if err == nil {
				m.CollectedBy("for_controller")
			}
			return n, err
		})
		self := objects.Member{Node: cfg.NodeID, Host: host, Port: int32(port), Rack: cfg.Rack, Agent: cfg.Agent}
		if len(endpoints) > 1 { // Metadata in Ripcord mode names each process on the client's listener
			self.Listeners = map[string]string{}
			for _, e := range endpoints {
				self.Listeners[e.Name] = net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port)))
			}
		}
		s.dir = objects.NewDirectory(s.objects, self, ripcording, s.logger)
		members = s.dir.Members
	}
	var oauth *security.OAuthValidator
	if slices.Contains(cfg.SASLMechanisms, security.OAuthBearer) {
		oc := cfg.OAuth
		oc.Logger = s.logger
		if oauth, err = security.NewOAuthValidator(oc); err != nil {
			return nil, errors.Join(err, s.Close())
		}
		s.oauth = oauth
	}
	var kerberos *security.Kerberos
	if slices.Contains(cfg.SASLMechanisms, security.GSSAPI) {
		if kerberos, err = security.NewKerberos(cfg.Kerberos); err != nil {
			return nil, errors.Join(err, s.Close())
		}
		s.logger.Info("GSSAPI: Kerberos keytab loaded", "principals", kerberos.Principals(), "default_realm", kerberos.Realm(),
			"principal_to_local_rules", cfg.Kerberos.Rules)
	}
	groups := groupConfig(cfg)
	s.broker, err = broker.New(broker.Config{NodeID: cfg.NodeID, RackAwareReads: cfg.RackAwareReads, AdvertisedHost: host, AdvertisedPort: int32(port), Groups: groups, ShareGroups: cfg.ShareGroups,
		Cluster: s.node, AutoCreateTopics: !cfg.NoAutoCreateTopics, DefaultPartitions: cfg.NumPartitions, FetchMaxBytes: cfg.FetchMaxBytes,
		ReplicaLagTimeMax:        cmp.Or(cfg.ReplicaLagTimeMax, replica.DefaultLagMax),
		DefaultReplicationFactor: cfg.DefaultReplicationFactor, OffsetsReplicationFactor: cfg.OffsetsReplicationFactor,
		TxnStateReplicationFactor: cfg.TxnStateReplicationFactor, OffsetsTopicPartitions: cfg.OffsetsPartitions, TxnStatePartitions: cfg.TxnStatePartitions,
		NoTopicDeletion: cfg.NoTopicDeletion, GivenConfigs: cfg.GivenConfigs, ConnectionsMaxIdle: cfg.ConnectionsMaxIdle, Hooks: hooks, Logger: s.logger, LogLevel: cfg.LogLevel,
		Metrics: s.admin.kafka, SlowRequestThreshold: cfg.SlowRequestThreshold,
		Security: broker.Security{SASLMechanisms: cfg.SASLMechanisms, MaxReauth: cfg.MaxReauth, Authorizer: authorizer(cfg),
			TokenSecret: cfg.DelegationTokenSecret, TokenMaxLifetime: cfg.DelegationTokenMaxLifetime, TokenExpiry: cfg.DelegationTokenExpiry,
			PrincipalMapper: principalMapper(cfg), OAuth: oauth, Kerberos: kerberos},
		ObjectWriter: s.objw, ObjectCache: objCache, Ripcording: ripcording, Members: members}, s.topics)
	if err != nil {
		return nil, errors.Join(err, s.Close())
	}
	s.logger.Info("data dir open", "data_dir", cfg.DataDir, "node_id", cfg.NodeID, "cluster_addr", ln.Addr().String())
	s.setState(stateNotServing)
	return s, nil
}

// groupConfig is the group coordinator's config: Kafka's defaults, with what cfg sets. A
// negative delay or interval in cfg is none, zero Kafka's default.
func groupConfig(cfg Config) group.Config {
	groups := group.DefaultConfig()
	if cfg.GroupMigrationPolicy != "" {
		groups.MigrationPolicy = cfg.GroupMigrationPolicy
	}
	if cfg.StreamsSessionTimeout > 0 {
		groups.StreamsSessionTimeout = cfg.StreamsSessionTimeout
	}
	if cfg.StreamsHeartbeatInterval > 0 {
		groups.StreamsHeartbeatInterval = cfg.StreamsHeartbeatInterval
	}
	groups.StreamsStandbyReplicas = cfg.StreamsStandbyReplicas
	set := func(dst *time.Duration, d time.Duration) {
		switch {
		case d < 0:
			*dst = 0
		case d > 0:
			*dst = d
		}
	}
	set(&groups.InitialRebalanceDelay, cfg.GroupInitialRebalanceDelay)
	set(&groups.StreamsInitialRebalanceDelay, cfg.StreamsInitialRebalanceDelay)
	set(&groups.StreamsAssignmentInterval, cfg.StreamsAssignmentInterval)
	return groups
}

// importLegacy is what the first start of a one-node cluster's controller imports from a data
// dir written before clusters existed: its topics, dynamic configs and producer-id mark.
func (s *Server) importLegacy() *controller.Bootstrap {
	b := &controller.Bootstrap{ImportNode: s.cfg.NodeID}
	local, err := s.topics.LocalTopics()
	if err != nil {
		s.logger.Error("server: reading the topics of the data dir to import", "err", err)
	}
	for _, t := range local {
		b.Topics = append(b.Topics, controller.ImportedTopic{Name: t.Name, ID: t.ID, Partitions: t.Partitions, Configs: t.Configs})
	}
	if b.ClusterConfigs, b.NodeConfigs, err = topics.LegacyBrokerConfigs(s.cfg.FS, s.cfg.DataDir); err != nil {
		s.logger.Error("server: reading broker-configs.json to import", "err", err)
	}
	if ids, err := readProducerIDMark(s.cfg.FS, s.cfg.DataDir); err != nil {
		s.logger.Error("server: reading producer-ids to import", "err", err)
	} else {
		b.NextProducerID = ids
	}
	if len(b.Topics) > 0 {
		s.logger.Info("server: importing the topics of a one-node data dir into the new controller", "topics", len(b.Topics))
	}
	return b
}

// ClusterID is the cluster's id ("" until the node has joined).
func (s *Server) ClusterID() string {
	if s.node == nil {
		return ""
	}
	return s.node.Image().ClusterID
}

// Node is the server's cluster node.
func (s *Server) Node() *cluster.Node { return s.node }

// SpecLogAddr is the SpecLog service's address ("" none).
func (s *Server) SpecLogAddr() string { return s.speclogAddr }

// readProducerIDMark reads <data-dir>/producer-ids, which a one-node data dir of an older
// version kept: every producer id below the number in it may have been handed out.
func readProducerIDMark(fsys vfs.FS, dataDir string) (int64, error) {
	b, err := vfs.ReadFile(fsys, filepath.Join(dataDir, "producer-ids"))
	if errors.Is(err, vfs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("server: producer-ids holds %q, not a producer id", b)
	}
	return n, nil
}

// Topics is the node's topic registry.
func (s *Server) Topics() *topics.Registry { return s.topics }

// Partitions describes the open partition logs, sorted by topic and partition. The caller owns
// the returned slice.
func (s *Server) Partitions() []PartitionState {
	var states []PartitionState
	s.eachPartition(func(topic string, p *topics.Partition) {
		if !p.Hosted() {
			return
		}
		states = append(states, PartitionState{Topic: topic, Partition: p.Index,
			StartOffset: p.Log.StartOffset(), EndOffset: p.Log.EndOffset(), SizeBytes: p.Log.Size()})
	})
	return states
}

// eachPartition calls fn with every open partition log and its topic's name, sorted by topic and
// partition.
func (s *Server) eachPartition(fn func(topic string, p *topics.Partition)) {
	for _, t := range s.topics.List() {
		for _, p := range t.Partitions {
			fn(t.Name, p)
		}
	}
}

// Run serves Kafka on the configured address until ctx ends, then shuts the listener down
// gracefully: it stops accepting, lets in-flight requests finish (up to ShutdownTimeout), and
// returns. It does not close the server. The Kafka listeners on fixed ports are bound once an
// active controller has answered, before the node registers (the metadata names it live from
// its registration on; connections wait in the listen queue until it serves): until then a
// client's connection is refused, as by a Kafka broker not yet unfenced, and the client tries
// its next bootstrap address at once instead of waiting out its request timeout on a node that
// cannot answer (a node restarted while the controller quorum is lost waits for it).
func (s *Server) Run(ctx context.Context) error {
	if !fixedPort(s.cfg.KafkaAddr) {
		// Port 0 (a test's): bound now, as a Kafka broker's; the port cannot be known otherwise.
		ln, err := net.Listen("tcp", s.cfg.KafkaAddr)
		if err != nil {
			s.closeKafkaListeners()
			return fmt.Errorf("server: kafka listener: %w", err)
		}
		return s.Serve(ctx, ln)
	}
	s.binds.Lock()
	s.binds.run = true
	var err error
	if s.binds.controller { // the node found the controller before Run was called
		err = s.bindOwnedLocked()
	} else if probe, perr := net.Listen("tcp", s.cfg.KafkaAddr); perr != nil { // taken: fail now, not after joining
		err = fmt.Errorf("server: kafka listener: %w", perr)
	} else {
		probe.Close()
	}
	s.binds.Unlock()
	if err != nil {
		s.closeKafkaListeners()
		return err
	}
	joined, err := s.join(ctx)
	if err != nil {
		return ignoreStopped(err)
	}
	return s.serve(ctx, nil, joined)
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// ripcordAfter: how long without an answer from the active controller puts a --ripcord process
// in Ripcord mode (five heartbeats).
const ripcordAfter = time.Second

// ripcordWatch returns ripcording (asked at every object-topic produce and file) logging each
// time the process enters and leaves Ripcord mode: its writes are then acknowledged lazily, in
// a different order than a controller would give them, and an operator must be able to see
// when (the fifteenth round found it switching on for a moment on a loaded host, with no
// trace). runnel_ripcord_active says whether it is on now.
func (s *Server) ripcordWatch(ripcording func() bool) func() bool {
	var mu sync.Mutex
	var since time.Time
	return func() bool {
		now := ripcording()
		if s.ripcordActive.Load() == now {
			return now
		}
		mu.Lock()
		defer mu.Unlock()
		if s.ripcordActive.Load() == now { // another caller logged it
			return now
		}
		s.ripcordActive.Store(now)
		if now {
			since = time.Now()
			s.logger.Warn("server: Ripcord mode: the active controller has not answered for a while; object-topic writes are acknowledged lazily until it does",
				"after", ripcordAfter)
		} else {
			s.logger.Info("server: Ripcord mode ended: the active controller answers again", "lasted", time.Since(since).Round(time.Millisecond))
		}
		return now
	}
}

// ripcordStartWait: how long a Ripcord agent waits to join before it starts from the metadata
// snapshot in the object store.
const ripcordStartWait = 5 * time.Second

// startFromSnapshot loads the metadata snapshot the active controller keeps in the object store
// and has the node serve from it until it joins.
func (s *Server) startFromSnapshot(ctx context.Context) error {
	gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	b, err := s.objects.Get(gctx, objects.MetadataSnapshotKey)
	if err != nil {
		return err
	}
	img, err := controller.DecodeImage(b)
	if err != nil {
		return fmt.Errorf("the metadata snapshot in the object store: %w", err)
	}
	if err := s.node.StartFromSnapshot(img); err != nil {
		return err
	}
	s.logger.Warn("server: Ripcord: the controller is unreachable; serving from the object store's metadata snapshot until it is back",
		"snapshot_index", img.Index, "cluster_id", img.ClusterID, "topics", len(img.Topics))
	return nil
}

// ShutdownTimeout bounds how long Run waits for in-flight requests at shutdown.
const ShutdownTimeout = 10 * time.Second

// ControlledShutdownTimeout bounds how long a stopping node waits for its leaderships to move
// to other replicas before it stops serving (cluster.Node.ControlledShutdown).
const ControlledShutdownTimeout = 15 * time.Second

// Serve is Run on a listener the caller made (tests listen on port 0): the listener is bound
// while the node joins, as a Kafka broker's on port 0 is.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	joined, err := s.join(ctx)
	if err != nil {
		ln.Close()
		return ignoreStopped(err)
	}
	return s.serve(ctx, ln, joined)
}

// join is awaitJoin, then bindOwned (a Ripcord agent started from the snapshot, or a node
// joined without asking first, has not bound them yet); on an error the listeners it owns are
// closed.
func (s *Server) join(ctx context.Context) (joined bool, err error) {
	joined, err = s.awaitJoin(ctx)
	if err == nil {
		err = s.bindOwned()
	}
	if err != nil {
		s.closeKafkaListeners()
	}
	return joined, err
}

// awaitJoin waits until the node may serve: it has joined the cluster (a Ripcord agent that
// cannot reach the controller starts from the metadata snapshot in the object store instead,
// joined then false), the bootstrap user is added, and its partitions have leaders (at most
// 10 s). When ctx ends before the node has joined it returns errStopped; after, it returns as
// if joined (the node then serves and stops at once).
func (s *Server) awaitJoin(ctx context.Context) (joined bool, err error) {
	// Join the cluster first: until then this node knows no topics it may serve. A Ripcord
	// agent that cannot reach the controller starts from the metadata snapshot in the object
	// store instead, and joins when the controller is back.
	var ripcordWait <-chan time.Time
	if s.cfg.Ripcord && s.cfg.Agent && s.objects != nil {
		ripcordWait = time.After(ripcordStartWait)
	}
	joined = true
	if !isClosed(s.node.Ready()) { // joined already: serve, whatever ctx says
	wait:
		for {
			select {
			case <-s.node.Ready():
				break wait
			case <-s.node.Failed():
				return false, s.node.Err()
			case <-ripcordWait: // nil (never) unless a Ripcord agent
				err := s.startFromSnapshot(ctx)
				if err == nil {
					joined = false
					break wait
				}
				s.logger.Warn("server: no controller, and no metadata snapshot to start from yet", "err", err)
				ripcordWait = time.After(2 * time.Second)
			case <-ctx.Done():
				return false, errStopped
			}
		}
	}
	if joined && s.cfg.BootstrapUser != "" {
		added := make(chan struct{})
		go func() { s.addBootstrapUser(ctx); close(added) }()
		select { // ready means the first user can log in, unless the controller is slow
		case <-added:
		case <-time.After(5 * time.Second):
		}
	}
	if joined {
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if err := s.node.WaitLeaders(lctx); err != nil && ctx.Err() == nil {
			s.logger.Warn("server: serving before every partition has a leader", "err", err)
		}
		cancel()
	}
	return joined, nil
}

// errStopped: the context ended before the node joined the cluster; Run and Serve return nil.
var errStopped = errors.New("server: stopped before joining the cluster")

func ignoreStopped(err error) error {
	if errors.Is(err, errStopped) {
		return nil
	}
	return err
}

// serve serves the Kafka listeners once the node may (awaitJoin), until ctx ends; ln nil: the
// first listener Run bound (binds.first).
func (s *Server) serve(ctx context.Context, ln net.Listener, joined bool) error {
	if id := s.ClusterID(); id != "" {
		if err := vfs.WriteFileAtomic(s.cfg.FS, s.cfg.DataDir, "cluster.id", []byte(id)); err != nil {
			s.logger.Warn("server: writing cluster.id", "err", err)
		}
	}
	for _, p := range s.Partitions() {
		s.logger.Info("recovered partition", "topic", p.Topic, "partition", p.Partition,
			"start_offset", p.StartOffset, "end_offset", p.EndOffset, "size_bytes", p.SizeBytes)
	}
	// The maintenance loops run until Serve returns, whatever ends it (ctx, a listener that
	// failed, the cluster refusing the node): stopRun, deferred after their waits, runs first.
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	maintDone := make(chan struct{})
	go func() { s.maint.Run(runCtx); close(maintDone) }()
	defer func() { <-maintDone }()
	if s.objmaint != nil {
		objDone := make(chan struct{})
		go func() { s.objmaint.Run(runCtx); close(objDone) }()
		defer func() { <-objDone }()
	}
	if s.dir != nil {
		dirDone := make(chan struct{})
		go func() { s.dir.Run(runCtx); close(dirDone) }()
		defer func() { <-dirDone }()
	}
	if s.speclogLn != nil {
		auth, gopts, peerDial := s.speclogSecurity()
		// Stream workers: appends are many small unary calls; a worker pool keeps grown goroutine
		// stacks instead of growing a new one per call (stack copies were 6% of the node's CPU
		// at 20,000 appends/s).
		gopts = append(gopts, grpc.NumStreamWorkers(uint32(max(4, runtime.GOMAXPROCS(0)*2))))
		gs := grpc.NewServer(gopts...)
		pb.RegisterSpecLogServer(gs, service.New(service.Config{Node: s.node, Registry: s.topics, Logger: s.logger, Addr: s.node.SpecLogAddr,
			Auth: auth, PeerDial: peerDial, ProducerIDs: s.broker.ProducerIDs(), OnAppend: s.admin.speclog.Append}))
		speclogDone := make(chan struct{})
		sln := s.speclogLn
		go func() {
			if err := gs.Serve(sln); err != nil {
				s.logger.Error("speclog: serving", "err", err)
			}
			close(speclogDone)
		}()
		s.logger.Info("serving the SpecLog API", "speclog_addr", sln.Addr().String())
		defer func() { gs.Stop(); <-speclogDone }() // streams are long-lived: no graceful wait
		s.speclogLn = nil                           // the gRPC server closes it
	}
	s.binds.Lock()
	if ln == nil { // Run's
		ln, s.binds.first = s.binds.first, nil
	}
	lns := s.kafkaLns
	s.kafkaLns, s.binds.served = nil, true // the broker closes them
	s.binds.Unlock()
	listeners := 1 + len(lns)
	served := make(chan error, listeners)
	go func() { served <- s.broker.ServeListener(ln, s.brokerListener(0)) }()
	bound := []string{ln.Addr().String()}
	for i, l := range lns {
		bound = append(bound, l.Addr().String())
		go func() { served <- s.broker.ServeListener(l, s.brokerListener(i+1)) }()
		s.logger.Info("serving Kafka listener", "listener", s.cfg.Listeners[i+1].Name, "protocol", s.cfg.Listeners[i+1].Protocol, "addr", l.Addr().String())
	}
	s.warnInsecure(bound)
	s.admin.kafkaAddr.Store(new(ln.Addr().String()))
	s.setState(stateServing) // the listener is bound and the logs are recovered: ready
	defer s.setState(stateNotServing)
	fmt.Fprintf(s.cfg.Console, "runnel: serving Kafka on %s (advertised %s), data in %s, admin on http://%s\n", ln.Addr(), s.cfg.AdvertisedKafkaAddr, s.cfg.DataDir, s.AdminAddr())
	s.logger.Info("serving", "kafka_addr", ln.Addr().String(), "advertised_kafka_addr", s.cfg.AdvertisedKafkaAddr, "admin_addr", s.AdminAddr())
	defer stopRun() // before the waits deferred above
	var failed error
	refused := false
	select {
	case err := <-served: // only a listener that cannot go on (ServeListener retries the rest)
		listeners--
		failed = fmt.Errorf("server: a Kafka listener stopped: %w", err)
		s.logger.Error("server: a Kafka listener stopped; stopping", "err", err)
	case <-ctx.Done():
	case <-s.node.Failed(): // refused at a registration after joining (its session is gone for good), or its Raft log cannot be written
		failed, refused = s.node.Err(), true
		s.logger.Error("server: this node cannot go on in the cluster; stopping", "err", failed)
	}
	s.setState(stateStopping) // not ready from now on
	if s.node != nil && !refused && !s.cfg.NoControlledShutdown {
		// Still serving: the partitions it leads move to other replicas first, and clients
		// follow them there (docs/operating.md "Shutdown").
		cctx, cancel := context.WithTimeout(context.Background(), ControlledShutdownTimeout)
		s.node.ControlledShutdown(cctx)
		cancel()
	}
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	if err := s.broker.Shutdown(sctx); err != nil {
		s.logger.Warn("shutdown: in-flight requests did not finish in time", "err", err)
	}
	for ; listeners > 0; listeners-- {
		if err := <-served; failed == nil {
			failed = err
		}
	}
	return failed
}

// Close syncs and closes every partition log, stops the flusher and releases the data
// directory lock. It returns every error met on the way; calling it again does nothing.
func (s *Server) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	s.stopAdmin()
	if c := s.consolePeers.client; c != nil {
		c.CloseIdleConnections()
	}
	s.closeKafkaListeners() // never served; and none is bound from now on
	var errs []error
	if s.broker != nil { // stops the group coordinator's timers if Serve never ran
		ctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
		s.broker.Shutdown(ctx)
		cancel()
	}
	if s.objw != nil { // commits what is written while the controller is still reachable
		ctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
		s.objw.Close(ctx)
		cancel()
	}
	if s.speclogLn != nil { // never served
		s.speclogLn.Close()
	}
	if s.node != nil {
		s.node.Close()
	}
	if s.topics != nil {
		errs = append(errs, s.topics.Close())
	}
	s.flusher.Close()
	errs = append(errs, s.lock.release())
	if s.tempDir != "" {
		errs = append(errs, os.RemoveAll(s.tempDir))
	}
	s.logger.Info("data dir closed", "data_dir", s.cfg.DataDir)
	return errors.Join(errs...)
}

// principalMapper is the node's ssl.principal.mapping.rules (checked by Validate).
// clusterPeerCheck admits a peer on the cluster port (--cluster-tls). With an authorizer, only
// a node: a certificate whose principal is a super user's, or this node's own certificate's
// (nodes sharing one), as Kafka's inter-broker and controller APIs need CLUSTER_ACTION; the
// node-to-node RPCs are not authorized one by one, so a Kafka client's certificate signed by
// the same client CA must not get in. Without an authorizer the Kafka listeners allow
// everything anyway, and any certificate the client CA signed is a peer (nil).
func clusterPeerCheck(cfg Config, f *security.TLSFiles) func(tls.ConnectionState) error {
	z := authorizer(cfg)
	if z == nil {
		return nil
	}
	m := principalMapper(cfg)
	return func(cs tls.ConnectionState) error {
		p, err := security.Principal(cs, m)
		if err != nil {
			return fmt.Errorf("cluster: a peer's certificate: %w", err)
		}
		if p == "" || !z.SuperUsers[p] && p != f.OwnPrincipal(m) {
			return fmt.Errorf("cluster: %q is not a node's principal (a super user, or this node's own certificate's)", p)
		}
		return nil
	}
}

func principalMapper(cfg Config) *security.PrincipalMapper {
	m, _ := security.ParsePrincipalMappingRules(cfg.SSLPrincipalMappingRules)
	return m
}

// objectPeers routes the read cache's misses to each file's owner node (objects.Owner).
type objectPeers struct{ node *cluster.Node }

func (p objectPeers) Owner(key string) (int32, objects.Route) {
	return objects.Owner(p.node.Image(), p.node.NodeID(), key)
}

func (p objectPeers) Read(ctx context.Context, node int32, key string, off uint64, n uint32) ([]byte, error) {
	data, err := p.node.ReadObjectRange(ctx, node, key, off, n)
	if errors.Is(err, cluster.ErrPeerRefused) {
		err = fmt.Errorf("%w: %v", objects.ErrOwnerRefused, err)
	}
	return data, err
}
