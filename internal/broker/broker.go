// Package broker is Runnel's Kafka listener: it accepts connections, decodes requests with
// franz-go's kmsg, dispatches them to one handler per API (one file each), and encodes the
// responses. See conn.go for the connection model.
package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/cluster"
	"github.com/runnel-dev/runnel/internal/group"
	"github.com/runnel-dev/runnel/internal/logevery"
	"github.com/runnel-dev/runnel/internal/metrics"
	"github.com/runnel-dev/runnel/internal/objects"
	"github.com/runnel-dev/runnel/internal/replica"
	"github.com/runnel-dev/runnel/internal/security"
	"github.com/runnel-dev/runnel/internal/share"
	"github.com/runnel-dev/runnel/internal/topics"
	"github.com/runnel-dev/runnel/internal/txn"
	"github.com/runnel-dev/runnel/internal/txncoord"
)

// Config configures a Broker.
type Config struct {
	NodeID int32
	// RackAwareReads sends a consumer that names its rack (client.rack) to an in-sync follower
	// in that rack (KIP-392; Kafka's replica.selector.class=RackAwareReplicaSelector).
	RackAwareReads bool
	AdvertisedHost string // host clients are told to connect to
	AdvertisedPort int32

	// Cluster is this node's member of the cluster: the metadata image, the controller that
	// admin requests go to, and the replicas of the partitions hosted here. Required.
	Cluster *cluster.Node

	AutoCreateTopics  bool  // auto.create.topics.enable
	DefaultPartitions int32 // num.partitions, for auto-created topics and CreateTopics with -1
	// DefaultReplicationFactor is default.replication.factor (0: 3 once three storage nodes
	// are registered, else 1).
	DefaultReplicationFactor int16
	// OffsetsReplicationFactor and TxnStateReplicationFactor are offsets.topic.replication.factor
	// and transaction.state.log.replication.factor: the replication factor __consumer_offsets and
	// __transaction_state are created with (0: 3 once three storage nodes are registered, else 1).
	OffsetsReplicationFactor  int16
	TxnStateReplicationFactor int16
	// NoTopicDeletion refuses DeleteTopics (delete.topic.enable=false).
	NoTopicDeletion bool
	// GivenConfigs names, by Kafka's names, the static broker configs the operator gave (a
	// flag, its environment variable or the config file), which DescribeConfigs shows as
	// STATIC_BROKER_CONFIG whatever their value; the others are static only if their value is
	// not the default.
	GivenConfigs map[string]bool

	MaxRequestBytes int32 // socket.request.max.bytes: larger frames close the connection
	FetchMaxBytes   int32 // fetch.max.bytes: a fetch response's record bytes at most (55 MiB), beyond its first batch
	// ReplicaLagTimeMax is replica.lag.time.max.ms, as DescribeConfigs shows it (the replicas
	// apply it: cluster.Config.Replica).
	ReplicaLagTimeMax    time.Duration
	DisableSendfile      bool  // copy fetch data instead of sending it from the files
	MaxInflightRequests  int   // per connection, queued between the read and write loops
	MaxConnInflightBytes int64 // request bytes in flight per connection
	MaxInflightBytes     int64 // request bytes in flight for the whole broker
	// ConnectionsMaxIdle is connections.max.idle.ms: a connection that sends nothing for this
	// long while the broker waits for a request, or for the rest of one, is closed (10 minutes
	// by default, as Kafka; negative: never).
	ConnectionsMaxIdle time.Duration

	// ObjectWriter and ObjectCache serve object-storage topics; nil: this node has no object
	// store, and object topics cannot be created through it.
	ObjectWriter *objects.Writer
	ObjectCache  *objects.Cache
	// Ripcording reports whether the process is in Ripcord mode now (--ripcord, and the
	// controller unreachable): object topics are then sequenced lazily (produce goes on) and
	// Metadata names the processes in Ripcord mode announced in the object store (Members) as
	// the brokers and object partitions' leaders (docs/object-topics.md §9.5). nil: never.
	Ripcording func() bool
	// Members lists the processes in Ripcord mode announced in the object store moments ago,
	// this one included; nil: this process only.
	Members func() []objects.Member

	// ProducerIDs hands out idempotent producer ids; nil: blocks of ids from the controller.
	ProducerIDs *txn.IDAllocator

	// Consumer groups: the coordinator's settings and offsets.topic.num.partitions.
	Groups group.Config
	// ShareGroups holds the share-partitions' limits (KIP-932; zero: Kafka's defaults).
	ShareGroups            share.Config
	OffsetsTopicPartitions int32
	// Transactions: the coordinator's settings and transaction.state.log.num.partitions.
	Txns               txncoord.Config
	TxnStatePartitions int32

	// Security: SASL mechanisms, credentials, session lifetime (docs/security.md).
	Security Security

	Hooks  Hooks
	Logger *slog.Logger
	// LogLevel is the level Logger's handler logs at: the root logger's level, which
	// BROKER_LOGGER configs describe and change (brokerloggers.go). Nil: the broker filters its
	// own records by a level of its own, starting at the lowest one Logger enables.
	LogLevel *slog.LevelVar

	// Metrics counts requests, connections and each topic's data in and out; nil counts nothing.
	Metrics *metrics.Kafka
	// SlowRequestThreshold: a request that takes longer is logged at Warn with where its time
	// went (observe.go). 0 means DefaultSlowRequestThreshold; negative logs none.
	SlowRequestThreshold time.Duration
}

// Listener is how a Kafka listener's connections are secured (docs/security.md §1).
type Listener struct {
	Name     string            // the listener name clients are told the endpoints of
	Protocol security.Protocol // PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
	TLS      *tls.Config       // required for SSL and SASL_SSL
}

// PlaintextListener is the default listener: PLAINTEXT, named PLAINTEXT.
var PlaintextListener = Listener{Name: string(security.Plaintext), Protocol: security.Plaintext}

// Security configures authentication on SASL listeners.
type Security struct {
	// SASLMechanisms are the enabled mechanisms (nil: SCRAM-SHA-256 and SCRAM-SHA-512).
	SASLMechanisms []string
	// MaxReauth is connections.max.reauth.ms: an authenticated session lasts this long, then
	// the client must re-authenticate (KIP-368); 0: sessions do not expire.
	MaxReauth time.Duration
	// FailedAuthDelay is connection.failed.authentication.delay.ms, the first failure's delay
	// (0: 100 ms; negative: none).
	FailedAuthDelay time.Duration
	// Authorizer checks every request against the ACLs in the metadata; nil allows everything
	// (--authorizer none).
	Authorizer *security.Authorizer
	// OAuth validates OAUTHBEARER tokens (needed when SASLMechanisms has OAUTHBEARER).
	OAuth *security.OAuthValidator
	// Kerberos accepts GSSAPI exchanges (needed when SASLMechanisms has GSSAPI).
	Kerberos *security.Kerberos
	// PrincipalMapper is ssl.principal.mapping.rules: the principal of a client certificate on
	// an SSL listener (nil: DEFAULT, the whole subject).
	PrincipalMapper *security.PrincipalMapper
	// TokenSecret is delegation.token.secret.key, the same on every node: delegation tokens'
	// HMACs derive from it; "" turns delegation tokens off (DELEGATION_TOKEN_AUTH_DISABLED).
	TokenSecret string
	// TokenMaxLifetime (delegation.token.max.lifetime.ms, default 7 days) bounds a token's
	// life with renewals; TokenExpiry (delegation.token.expiry.time.ms, default 1 day) is
	// the life a creation or renewal gives when the request asks for none.
	TokenMaxLifetime, TokenExpiry time.Duration
}

// Hooks let tests intercept what the broker does; production leaves them nil.
type Hooks struct {
	// DropResponse is asked before each response is written. If it returns true, the
	// connection is closed instead: the request was carried out, its answer is lost, as when
	// the network fails at that moment.
	DropResponse func(key int16, resp kmsg.Response) bool
	// BeforeMarkers is called when a transaction's decision is durable and its marker round is
	// about to start (fault injection: a crash between the prepare and the markers).
	BeforeMarkers func(txnID string, commit bool)
	// GroupTick replaces how often the group service ticks (0: 100 ms).
	GroupTick time.Duration
}

// The defaults of Kafka's socket.request.max.bytes and fetch.max.bytes, and of
// runnel.speclog.addr (runnel serve's --speclog-addr).
const (
	defaultMaxRequestBytes = 100 << 20
	defaultFetchMaxBytes   = 55 << 20
	DefaultSpecLogAddr     = "127.0.0.1:9096"
)

// DefaultLimits fills zero limits with their defaults.
func (c *Config) DefaultLimits() {
	if c.MaxRequestBytes == 0 {
		c.MaxRequestBytes = defaultMaxRequestBytes
	}
	if c.FetchMaxBytes == 0 {
		c.FetchMaxBytes = defaultFetchMaxBytes
	}
	if c.ReplicaLagTimeMax == 0 {
		c.ReplicaLagTimeMax = replica.DefaultLagMax
	}
	if c.MaxInflightRequests == 0 {
		c.MaxInflightRequests = 100
	}
	if c.MaxConnInflightBytes == 0 {
		c.MaxConnInflightBytes = 128 << 20
	}
	if c.MaxInflightBytes == 0 {
		c.MaxInflightBytes = 512 << 20
	}
	if c.ConnectionsMaxIdle == 0 {
		c.ConnectionsMaxIdle = 10 * time.Minute
	}
	if c.DefaultPartitions == 0 {
		c.DefaultPartitions = 1
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.LogLevel == nil {
		c.LogLevel = new(slog.LevelVar)
		c.LogLevel.Set(lowestEnabled(c.Logger))
		c.Logger = slog.New(&levelFilter{Handler: c.Logger.Handler(), level: c.LogLevel})
	}
	if c.Groups.MaxSessionTimeout == 0 {
		overrides := c.Groups.Overrides
		c.Groups = group.DefaultConfig()
		c.Groups.Overrides = overrides
	}
	c.ShareGroups = c.ShareGroups.WithDefaults()
	// The defaults of the share.* group configs.
	c.Groups.ShareRecordLockDuration, c.Groups.ShareDeliveryCountLimit = c.ShareGroups.LockDuration, c.ShareGroups.DeliveryLimit
	c.Groups.SharePartitionMaxRecordLocks = c.ShareGroups.MaxInFlight
	if c.OffsetsTopicPartitions == 0 {
		c.OffsetsTopicPartitions = 50
	}
	if c.Txns == (txncoord.Config{}) {
		c.Txns = txncoord.DefaultConfig()
	}
	if c.TxnStatePartitions == 0 {
		c.TxnStatePartitions = 50
	}
	if c.Security.SASLMechanisms == nil {
		c.Security.SASLMechanisms = []string{string(security.ScramSHA256), string(security.ScramSHA512)}
	}
	if c.Security.FailedAuthDelay == 0 {
		c.Security.FailedAuthDelay = 100 * time.Millisecond
	}
}

// Broker serves the Kafka protocol for the topics of a registry.
type Broker struct {
	// objReadWarn bounds the warnings of failed object-partition reads: a store failing its
	// GETs failed every partition of every fetch, each with a warning.
	objReadWarn   logevery.Limiter
	cfg           Config
	cl            *cluster.Node
	topics        *topics.Registry
	logger        *slog.Logger
	mem           *semaphore.Weighted // in-flight request bytes, all connections
	fetchSessions *fetchSessions
	groups        *groups
	streamsTopics streamsTopicCreator // streams groups' internal topics being created
	shares        *shares
	txns          *txns
	authFailures  *security.FailureLimiter
	acls          security.ACLCache
	// tokenKeyCheck is security.TokenKeyCheck of the secret key (once, not per request);
	// tokenKeyWarned: a delegation token made under another key was logged.
	tokenKeyCheck  string
	tokenKeyWarned atomic.Bool
	quotas         quotaManager

	ctx    context.Context // ends when the broker stops: cancels waits in handlers
	cancel context.CancelFunc

	stopping atomic.Bool   // Shutdown has begun: Serve returns nil when its listener closes
	stopped  chan struct{} // closed by Shutdown: long polls answer at once

	mu    sync.Mutex
	lns   []net.Listener
	conns map[net.Conn]struct{}
	perIP map[string]int // open connections by client IP (connlimits.go)

	acceptMu sync.Mutex
	accepts  rate // connections accepted, for max.connection.creation.rate
	wg       sync.WaitGroup
}

// New returns a broker serving reg.
// It loads the consumer groups from __consumer_offsets and starts their timers, which run until
// Shutdown.
func New(cfg Config, reg *topics.Registry) (*Broker, error) {
	cfg.DefaultLimits()
	if cfg.Cluster == nil {
		return nil, errors.New("broker: Config.Cluster is required")
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &Broker{objReadWarn: logevery.Limiter{Every: 10 * time.Second},
		cfg: cfg, cl: cfg.Cluster, topics: reg, logger: cfg.Logger, mem: semaphore.NewWeighted(cfg.MaxInflightBytes),
		fetchSessions: newFetchSessions(1000), ctx: ctx, cancel: cancel, conns: map[net.Conn]struct{}{}, perIP: map[string]int{},
		stopped: make(chan struct{}), authFailures: security.NewFailureLimiter(max(cfg.Security.FailedAuthDelay, 0), 5*time.Second, time.Minute),
	}
	if b.cfg.ProducerIDs == nil {
		b.cfg.ProducerIDs = txn.NewBlockAllocator(b.producerIDBlock)
	}
	if cfg.Security.TokenSecret != "" {
		b.tokenKeyCheck = security.TokenKeyCheck(cfg.Security.TokenSecret)
	}
	b.quotas.windows = b.quotaWindows
	b.groups = newGroups(b)
	go b.groups.run(ctx)
	b.txns = newTxns(b)
	go b.txns.run(ctx)
	b.shares = newShares(b)
	go b.shares.run(ctx)
	b.cl.HandleActive(mutationMethod, b.handleMutationQuota)
	return b, nil
}

// ProducerIDs is the allocator of idempotent producers' ids (the SpecLog API's appenders share
// it).
func (b *Broker) ProducerIDs() *txn.IDAllocator { return b.cfg.ProducerIDs }

// Serve accepts PLAINTEXT connections on ln until Shutdown. It returns nil after Shutdown.
func (b *Broker) Serve(ln net.Listener) error { return b.ServeListener(ln, PlaintextListener) }

// ServeListener accepts connections on ln, secured as l says, until Shutdown. It returns nil
// after Shutdown.
func (b *Broker) ServeListener(ln net.Listener, l Listener) error {
	if l.Protocol.TLS() && l.TLS == nil {
		ln.Close()
		return fmt.Errorf("broker: listener %s is %s but has no TLS config", l.Name, l.Protocol)
	}
	b.mu.Lock()
	if b.stopping.Load() {
		b.mu.Unlock()
		ln.Close()
		return nil
	}
	b.lns = append(b.lns, ln)
	b.mu.Unlock()
	var backoff time.Duration // after a failed accept
	for {
		if !b.waitConnSlot() {
			return nil
		}
		nc, err := ln.Accept()
		if err != nil {
			if b.stopping.Load() {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			// Out of file descriptors for a moment (EMFILE, ENFILE), a connection reset
			// before it was taken: the listener goes on, as Kafka's acceptor does, after a
			// pause that doubles up to a second while accepts keep failing.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			b.logger.Warn("broker: accepting a connection failed; retrying", "listener", l.Name, "err", err, "retry_in", backoff)
			select {
			case <-time.After(backoff):
			case <-b.ctx.Done():
				return nil
			}
			continue
		}
		backoff = 0
		b.mu.Lock()
		if b.stopping.Load() {
			b.mu.Unlock()
			nc.Close()
			return nil
		}
		ip, hasIP := connIP(nc)
		if hasIP && !b.admitIP(ip) {
			b.mu.Unlock()
			b.logger.Debug("broker: connection refused: its IP has max.connections.per.ip open", "remote", nc.RemoteAddr().String(), "limit", b.ipLimit(ip))
			nc.Close()
			continue
		}
		b.conns[nc] = struct{}{}
		b.wg.Add(1)
		b.mu.Unlock()
		go func() {
			defer b.wg.Done()
			b.serveConn(nc, &l, ip)
			b.mu.Lock()
			delete(b.conns, nc)
			if hasIP {
				b.releaseIP(ip)
			}
			b.mu.Unlock()
		}()
		if !b.paceAccepts() {
			return nil
		}
	}
}

// Shutdown stops accepting, stops reading new requests, answers long-poll fetches at once with
// what they have, lets other in-flight requests finish and their responses go out (until ctx
// ends), and closes every connection.
func (b *Broker) Shutdown(ctx context.Context) error {
	if !b.stopping.Swap(true) {
		close(b.stopped)
	}
	b.mu.Lock()
	for _, ln := range b.lns {
		ln.Close()
	}
	for nc := range b.conns {
		if tc, ok := nc.(*net.TCPConn); ok {
			tc.CloseRead() // the read loop ends; queued responses are still written
		}
	}
	b.mu.Unlock()
	done := make(chan struct{})
	go func() { b.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	b.cancel() // abandon waits still running
	<-b.groups.done
	b.mu.Lock()
	for nc := range b.conns {
		nc.Close()
	}
	b.mu.Unlock()
	<-done
	return ctx.Err()
}
