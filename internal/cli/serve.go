package cli

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/runnel-dev/runnel/internal/gctune"
	"github.com/runnel-dev/runnel/internal/group"
	"github.com/runnel-dev/runnel/internal/security"
	"github.com/runnel-dev/runnel/internal/server"
	"github.com/runnel-dev/runnel/internal/share"
)

// serveFlags are the flags of `runnel serve`.
type serveFlags struct {
	groupMigration        string
	shareLock             time.Duration
	shareDeliveries       int
	shareRecordLocks      int64
	streamsSession        time.Duration
	streamsHeartbeat      time.Duration
	streamsStandbys       int
	streamsDelay          time.Duration
	groupDelay            time.Duration
	retentionCheck        time.Duration
	cleanerBackoff        time.Duration
	streamsInterval       time.Duration
	fetchMaxBytes         int32
	numPartitions         int32
	defaultRF             int16
	offsetsRF, txnStateRF int16
	offsetsPartitions     int32
	txnStatePartitions    int32
	autoCreateTopics      bool
	deleteTopics          bool
	autoLeaderRebalance   bool
	leaderBalanceInterval time.Duration
	replicaLagTimeMax     time.Duration
	leaderImbalancePct    int
	dataDir               string
	kafkaAddr             string
	advertisedKafkaAddr   string
	nodeID                int32
	adminAddr             string
	speclogAddr           string
	logLevel              string
	logFormat             string
	slowRequest           time.Duration
	gcHeadroomMiB         uint64
	clusterAddr           string
	voters                string
	rack                  string
	replicaSelector       string
	sessionTimeout        time.Duration
	controlledShutdown    bool
	faultInjection        bool
	objectStore           string
	objectBatchTimeout    time.Duration
	objectBatchBytes      int
	objectCacheMiB        int64
	objectPeerReads       bool
	agent                 bool // runnel agent
	ripcord               bool

	// Security (docs/security.md).
	listeners, advertisedListeners, protocolMap string
	tlsCert, tlsKey, tlsClientCA, tlsClientAuth string
	principalRules                              string
	clusterTLS, adminTLS, speclogTLS            bool
	consoleHosts                                string
	saslMechanisms                              string
	oauthJWKS, oauthAudience, oauthIssuer       string
	oauthSubClaim                               string
	oauthUnsecured                              bool
	oauthClockSkew, oauthRefresh                time.Duration
	krbKeytab, krbService, krbPrincipal         string
	krbRules, krbRealm                          string
	maxReauth, maxIdle                          time.Duration
	tokenSecret                                 string
	tokenMaxLifetime, tokenExpiry               time.Duration
	bootstrapUser                               string
	authorizer, superUsers                      string
	allowIfNoACL                                bool
}

func (f *serveFlags) register(flags *pflag.FlagSet) {
	flags.StringVar(&f.dataDir, "data-dir", "./runnel-data", "directory holding this node's data")
	flags.StringVar(&f.kafkaAddr, "kafka-addr", "127.0.0.1:9092", "host:port the Kafka listener binds")
	flags.StringVar(&f.advertisedKafkaAddr, "advertised-kafka-addr", "", "host:port clients are told to connect to (default: --kafka-addr)")
	flags.Int32Var(&f.nodeID, "node-id", 0, "this node's broker id")
	flags.StringVar(&f.clusterAddr, "cluster-addr", "127.0.0.1:9093", "host:port of the node's internal listener (controller Raft, replication)")
	flags.StringVar(&f.voters, "controller-voters", "", "the controller quorum as ID@HOST:PORT,... by node id and cluster address (default: this node alone)")
	flags.StringVar(&f.objectStore, "object-store", "", "object store URL: file:///dir or s3://bucket/prefix?endpoint=URL&region=R, credentials from the AWS environment (default: file://<data-dir>/objects)")
	flags.DurationVar(&f.objectBatchTimeout, "object-batch-timeout", 250*time.Millisecond, "object topics: write the node's buffer as one file this long after its first batch")
	flags.IntVar(&f.objectBatchBytes, "object-batch-bytes", 4<<20, "object topics: write the node's buffer as one file once it holds this many bytes")
	flags.Int64Var(&f.objectCacheMiB, "object-cache-mib", 256, "object topics: MiB of the read cache")
	flags.BoolVar(&f.objectPeerReads, "object-peer-reads", true, "object topics: read a file another node owns (its writer, or the one of this rack it hashes to) through that node's cache; false: every node reads the object store itself")
	flags.BoolVar(&f.ripcord, "ripcord", false, "object topics: keep accepting produce while the controller is unreachable (sequenced lazily, committed when it returns)")
	flags.StringVar(&f.rack, "rack", "", "the node's rack, shown to clients in Metadata (and matched against client.rack by --replica-selector rack)")
	flags.StringVar(&f.groupMigration, "group-consumer-migration-policy", group.MigrationBidirectional, "which way a live consumer group may switch between the classic and the consumer (KIP-848) protocol as its members are upgraded or downgraded: bidirectional, upgrade, downgrade or disabled (Kafka's group.consumer.migration.policy)")
	flags.DurationVar(&f.shareLock, "group-share-record-lock-duration", 30*time.Second, "share groups: how long a consumer holds a record it was given before it is offered again (Kafka's group.share.record.lock.duration.ms; 1 s to 1 h)")
	flags.IntVar(&f.shareDeliveries, "group-share-delivery-count-limit", 5, "share groups: deliveries of a record before it is archived instead of offered again (Kafka's group.share.delivery.count.limit; 2 to 10)")
	flags.Int64Var(&f.shareRecordLocks, "group-share-partition-max-record-locks", 2000, "share groups: offsets in flight per share-partition, from its start (Kafka's group.share.partition.max.record.locks; 100 to 10000)")
	flags.DurationVar(&f.streamsSession, "group-streams-session-timeout", 45*time.Second, "streams groups (KIP-1071): how long a member may go without a heartbeat before it is removed (Kafka's group.streams.session.timeout.ms)")
	flags.DurationVar(&f.streamsHeartbeat, "group-streams-heartbeat-interval", 5*time.Second, "streams groups: the heartbeat interval given to members (Kafka's group.streams.heartbeat.interval.ms)")
	flags.DurationVar(&f.retentionCheck, "log-retention-check-interval", 5*time.Minute, "how often the node deletes what retention.ms, retention.bytes and DeleteRecords leave behind in its replicated topics' logs (Kafka's log.retention.check.interval.ms)")
	flags.DurationVar(&f.cleanerBackoff, "log-cleaner-backoff", 15*time.Second, "how often the node looks for a replicated topic's log to compact (Kafka's log.cleaner.backoff.ms)")
	flags.DurationVar(&f.groupDelay, "group-initial-rebalance-delay", 3*time.Second, "classic consumer groups: how long a group a member joins empty waits for more members before its first rebalance (Kafka's group.initial.rebalance.delay.ms; 0: none)")
	flags.DurationVar(&f.streamsDelay, "group-streams-initial-rebalance-delay", 3*time.Second, "streams groups: how long a group a member joins empty waits for more members before its first assignment (Kafka's group.streams.initial.rebalance.delay.ms; 0: none)")
	flags.DurationVar(&f.streamsInterval, "group-streams-assignment-interval", time.Second, "streams groups: the least time between two computations of a group's target assignment (Kafka's group.streams.assignment.interval.ms; 0 to 15s, 0: at each change)")
	flags.IntVar(&f.streamsStandbys, "group-streams-num-standby-replicas", 0, "streams groups: standby replicas of each stateful task, unless the group sets streams.num.standby.replicas (Kafka's group.streams.num.standby.replicas; 0 to 2)")
	flags.StringVar(&f.replicaSelector, "replica-selector", "", `where consumers read: "" (the leader) or "rack" (KIP-392: a consumer with client.rack reads from an in-sync replica in its rack; Kafka's replica.selector.class `+rackSelectorClass+` is accepted too)`)
	flags.Int32Var(&f.fetchMaxBytes, "fetch-max-bytes", 55<<20, "the most record bytes a fetch response carries whatever the client asks, beyond its first batch (Kafka's fetch.max.bytes; at least 1024)")
	flags.Int32Var(&f.numPartitions, "num-partitions", 1, "partitions of a topic created without a count: auto-created, or CreateTopics with -1 (Kafka's num.partitions)")
	flags.Int16Var(&f.offsetsRF, "offsets-topic-replication-factor", 0, "replication factor __consumer_offsets is created with (Kafka's offsets.topic.replication.factor; 0: 3 once three nodes are registered, else 1)")
	flags.Int32Var(&f.offsetsPartitions, "offsets-topic-num-partitions", 50, "partitions __consumer_offsets is created with (Kafka's offsets.topic.num.partitions); once it exists, groups are mapped over its own count")
	flags.Int32Var(&f.txnStatePartitions, "transaction-state-log-num-partitions", 50, "partitions __transaction_state is created with (Kafka's transaction.state.log.num.partitions); once it exists, transactional ids are mapped over its own count")
	flags.Int16Var(&f.txnStateRF, "transaction-state-log-replication-factor", 0, "replication factor __transaction_state is created with (Kafka's transaction.state.log.replication.factor; 0: 3 once three nodes are registered, else 1)")
	flags.Int16Var(&f.defaultRF, "default-replication-factor", 0, "replication factor of a topic created without one (Kafka's default.replication.factor; 0: 3 once three nodes are registered, else 1)")
	flags.BoolVar(&f.deleteTopics, "delete-topic-enable", true, "let DeleteTopics delete topics (Kafka's delete.topic.enable; off: TOPIC_DELETION_DISABLED)")
	flags.BoolVar(&f.autoLeaderRebalance, "auto-leader-rebalance", true, "while this node runs the active controller, move leaderships back to preferred replicas (Kafka's auto.leader.rebalance.enable)")
	flags.IntVar(&f.leaderImbalancePct, "leader-imbalance-per-broker-percentage", 10, "leaderships go back to a node's preferred partitions only once more than this percent of them are led elsewhere (Kafka's leader.imbalance.per.broker.percentage; 0: any)")
	flags.DurationVar(&f.replicaLagTimeMax, "replica-lag-time-max", 30*time.Second, "a follower not caught up with its leader's log for this long leaves the ISR (Kafka's replica.lag.time.max.ms; 0: 30s)")
	flags.DurationVar(&f.leaderBalanceInterval, "leader-imbalance-check-interval", 5*time.Second, "how often leaderships are moved back to preferred replicas (Kafka's leader.imbalance.check.interval.seconds, 300 s there)")
	flags.BoolVar(&f.autoCreateTopics, "auto-create-topics", true, "create a topic a client asks Metadata for, or produces to, when it does not exist (Kafka's auto.create.topics.enable)")
	flags.BoolVar(&f.faultInjection, "enable-fault-injection", false, "serve POST /v1/debug/faults on the admin listener (tests only)")
	flags.DurationVar(&f.sessionTimeout, "session-timeout", 1500*time.Millisecond, "a node not heard from this long is fenced and its partitions get new leaders")
	flags.BoolVar(&f.controlledShutdown, "controlled-shutdown", true, "at SIGTERM, move the partitions this node leads and its controller leadership to other nodes before stopping (Kafka's controlled.shutdown.enable)")
	flags.StringVar(&f.adminAddr, "admin-addr", "127.0.0.1:9644", "host:port of the admin HTTP server (metrics, health)")
	flags.StringVar(&f.speclogAddr, "speclog-addr", "127.0.0.1:9096", `host:port of the SpecLog gRPC API of total-order topics ("": none)`)
	flags.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	flags.StringVar(&f.logFormat, "log-format", "text", "text or json")
	flags.DurationVar(&f.slowRequest, "slow-request-threshold", 500*time.Millisecond, "log Kafka requests that take longer (0: none)")
	flags.Uint64Var(&f.gcHeadroomMiB, "gc-headroom-mib", 256, "MiB the Go heap may grow past its live size before a GC cycle (0: plain GOGC; a set GOGC wins)")
	f.registerSecurity(flags)
	flags.String("config", "", `file of "flag-name: value" lines; flags and environment variables win over it`)
	flags.SetAnnotation("config", configFileAnnotation, []string{"true"})
}

// registerSecurity adds the listener, TLS and SASL flags (docs/security.md).
func (f *serveFlags) registerSecurity(flags *pflag.FlagSet) {
	flags.StringVar(&f.listeners, "listeners", "", "Kafka listeners as NAME://host:port,... (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL or a mapped name); replaces --kafka-addr")
	flags.StringVar(&f.advertisedListeners, "advertised-listeners", "", "addresses clients are told, as NAME://host:port,... (default: the listeners)")
	flags.StringVar(&f.protocolMap, "listener-security-protocol-map", "", "security protocols of custom listener names, as NAME:PROTOCOL,...")
	flags.StringVar(&f.tlsCert, "tls-cert-file", "", "PEM certificate (chain) of TLS listeners, --cluster-tls and --admin-tls; reloaded when it changes")
	flags.StringVar(&f.tlsKey, "tls-key-file", "", "PEM private key of --tls-cert-file")
	flags.StringVar(&f.tlsClientCA, "tls-client-ca-file", "", "PEM CA bundle that verifies client certificates (mTLS) and the cluster's nodes")
	flags.StringVar(&f.tlsClientAuth, "tls-client-auth", "", "none, requested or required: whether TLS listeners ask for client certificates (default: required with --tls-client-ca-file)")
	flags.StringVar(&f.principalRules, "ssl-principal-mapping-rules", "", "Kafka's ssl.principal.mapping.rules: how a client certificate's subject becomes its principal (RULE:pattern/replacement/[LU],...,DEFAULT; default: the whole subject)")
	flags.BoolVar(&f.clusterTLS, "cluster-tls", false, "node-to-node traffic over TLS; peers present certificates signed by --tls-client-ca-file")
	flags.BoolVar(&f.adminTLS, "admin-tls", false, "serve the admin endpoint over HTTPS")
	flags.StringVar(&f.consoleHosts, "console-hosts", "", `more host names the web console answers under, comma-separated (a proxy's, a DNS alias; "*": any), besides IP addresses, localhost, the machine's host name and the listeners' and advertised ones`)
	flags.BoolVar(&f.speclogTLS, "speclog-tls", false, "serve the SpecLog API (total-order topics) over TLS")
	flags.StringVar(&f.saslMechanisms, "sasl-mechanisms", "SCRAM-SHA-256,SCRAM-SHA-512", "SASL mechanisms of SASL listeners: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, GSSAPI (PLAIN is checked against the SCRAM credentials; OAUTHBEARER against --sasl-oauthbearer-jwks-endpoint-url; GSSAPI is Kerberos, with --sasl-kerberos-keytab)")
	flags.StringVar(&f.krbKeytab, "sasl-kerberos-keytab", "", "GSSAPI: the keytab with this node's Kerberos keys (the keyTab of Kafka's JAAS KafkaServer section)")
	flags.StringVar(&f.krbService, "sasl-kerberos-service-name", "kafka", "GSSAPI: the first component of the principal clients name this node by (Kafka's sasl.kerberos.service.name)")
	flags.StringVar(&f.krbPrincipal, "sasl-kerberos-principal", "", "GSSAPI: the one principal clients may name this node by, service/host@REALM (default: any of the keytab's principals of the service name)")
	flags.StringVar(&f.krbRules, "sasl-kerberos-principal-to-local-rules", "DEFAULT", "GSSAPI: Kafka's sasl.kerberos.principal.to.local.rules, which turn a client's Kerberos principal into its user name (DEFAULT: alice@REALM is User:alice when REALM is the default realm)")
	flags.StringVar(&f.krbRealm, "sasl-kerberos-default-realm", "", "GSSAPI: the realm the DEFAULT principal-to-local rule takes as local (default: krb5.conf's default_realm, from $KRB5_CONFIG or /etc/krb5.conf, as Kafka; without one, the node principal's realm)")
	flags.StringVar(&f.oauthJWKS, "sasl-oauthbearer-jwks-endpoint-url", "", "OAUTHBEARER: the JSON Web Key Set tokens are verified with (http(s) URL or file), Kafka's sasl.oauthbearer.jwks.endpoint.url")
	flags.StringVar(&f.oauthAudience, "sasl-oauthbearer-expected-audience", "", "OAUTHBEARER: comma-separated audiences, one of which a token's aud must hold (default: not checked)")
	flags.StringVar(&f.oauthIssuer, "sasl-oauthbearer-expected-issuer", "", "OAUTHBEARER: the iss a token must have (default: not checked)")
	flags.StringVar(&f.oauthSubClaim, "sasl-oauthbearer-sub-claim-name", "sub", "OAUTHBEARER: the claim naming the principal")
	flags.BoolVar(&f.oauthUnsecured, "sasl-oauthbearer-unsecured", false, "OAUTHBEARER: take unsigned tokens (alg none), as Kafka's unsecured validator, its default without a JWKS: any client can claim any principal, for development only")
	flags.DurationVar(&f.oauthClockSkew, "sasl-oauthbearer-clock-skew", 30*time.Second, "OAUTHBEARER: clock skew allowed on exp, nbf and iat")
	flags.DurationVar(&f.oauthRefresh, "sasl-oauthbearer-jwks-refresh", time.Hour, "OAUTHBEARER: how often the JWKS is fetched again (sooner for an unknown key id)")
	flags.DurationVar(&f.maxReauth, "connections-max-reauth", 0, "connections.max.reauth.ms: SASL sessions last this long, then clients re-authenticate (0: no expiry)")
	flags.DurationVar(&f.maxIdle, "connections-max-idle", 10*time.Minute, "connections.max.idle.ms: a Kafka connection that sends nothing for this long is closed (negative: never)")
	flags.StringVar(&f.tokenSecret, "delegation-token-secret-key", "", "delegation.token.secret.key: the key delegation tokens' HMACs derive from, the same on every node (better: the RUNNEL_DELEGATION_TOKEN_SECRET_KEY environment variable); empty: no delegation tokens")
	flags.DurationVar(&f.tokenMaxLifetime, "delegation-token-max-lifetime", 7*24*time.Hour, "delegation.token.max.lifetime.ms: no renewal takes a token past this age")
	flags.DurationVar(&f.tokenExpiry, "delegation-token-expiry-time", 24*time.Hour, "delegation.token.expiry.time.ms: a token's life from its creation or renewal when the request names none")
	flags.StringVar(&f.bootstrapUser, "bootstrap-user", "", "name:password of a SCRAM user to add if the cluster has none of that name (the first way in)")
	flags.StringVar(&f.authorizer, "authorizer", "none", "none (every request allowed) or acl (Kafka's ACLs, managed with kafka-acls or runnel acl)")
	flags.StringVar(&f.superUsers, "super-users", "", "principals allowed everything, as User:a;User:b (super.users)")
	flags.BoolVar(&f.allowIfNoACL, "allow-everyone-if-no-acl-found", false, "allow a request on a resource no ACL names (allow.everyone.if.no.acl.found)")
}

// securityConfig fills in cfg's listeners, TLS and SASL settings from the flags.
func (f *serveFlags) securityConfig(cfg *server.Config) error {
	if f.listeners != "" {
		if f.kafkaAddr != "127.0.0.1:9092" || f.advertisedKafkaAddr != "" {
			return fmt.Errorf("--kafka-addr and --advertised-kafka-addr are the short form of one PLAINTEXT listener: use --listeners and --advertised-listeners instead")
		}
		protocols, err := security.ParseProtocolMap(f.protocolMap)
		if err != nil {
			return err
		}
		ls, err := security.ParseListeners(f.listeners, protocols)
		if err != nil {
			return err
		}
		if err := security.Advertise(ls, f.advertisedListeners); err != nil {
			return err
		}
		cfg.Listeners = ls
	} else if f.advertisedListeners != "" || f.protocolMap != "" {
		return fmt.Errorf("--advertised-listeners and --listener-security-protocol-map need --listeners")
	}
	var mechs []string // nil: the default
	if f.saslMechanisms != "" {
		var err error
		if mechs, err = security.ParseMechanisms(f.saslMechanisms); err != nil {
			return err
		}
	}
	cfg.SASLMechanisms, cfg.MaxReauth, cfg.BootstrapUser = mechs, f.maxReauth, f.bootstrapUser
	cfg.ConnectionsMaxIdle = f.maxIdle
	if cfg.ConnectionsMaxIdle == 0 {
		cfg.ConnectionsMaxIdle = -1 // 0 would be the default: none means never
	}
	cfg.DelegationTokenSecret, cfg.DelegationTokenMaxLifetime, cfg.DelegationTokenExpiry = f.tokenSecret, f.tokenMaxLifetime, f.tokenExpiry
	cfg.Kerberos = security.KerberosConfig{Keytab: f.krbKeytab, ServiceName: f.krbService, Principal: f.krbPrincipal, Rules: f.krbRules, DefaultRealm: f.krbRealm}
	cfg.OAuth = security.OAuthConfig{JWKSURL: f.oauthJWKS, Unsecured: f.oauthUnsecured, ExpectedIssuer: f.oauthIssuer, SubClaim: f.oauthSubClaim,
		ClockSkew: f.oauthClockSkew, Refresh: f.oauthRefresh}
	for _, a := range strings.Split(f.oauthAudience, ",") {
		if a = strings.TrimSpace(a); a != "" {
			cfg.OAuth.ExpectedAudience = append(cfg.OAuth.ExpectedAudience, a)
		}
	}
	cfg.TLSCertFile, cfg.TLSKeyFile, cfg.TLSClientCAFile, cfg.TLSClientAuth = f.tlsCert, f.tlsKey, f.tlsClientCA, f.tlsClientAuth
	cfg.SSLPrincipalMappingRules = f.principalRules
	cfg.ClusterTLS, cfg.AdminTLS, cfg.SpecLogTLS = f.clusterTLS, f.adminTLS, f.speclogTLS
	for _, h := range strings.Split(f.consoleHosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			cfg.ConsoleHosts = append(cfg.ConsoleHosts, h)
		}
	}
	cfg.Authorizer, cfg.SuperUsers, cfg.AllowEveryoneIfNoACL = f.authorizer, f.superUsers, f.allowIfNoACL
	return nil
}

// config turns the flags into a server configuration; logs go to logOut, notices to console.
func (f *serveFlags) config(logOut, console io.Writer) (server.Config, error) {
	logLevel := new(slog.LevelVar)
	logger, err := newLogger(logOut, f.logLevel, f.logFormat, logLevel)
	if err != nil {
		return server.Config{}, err
	}
	if f.numPartitions < 1 && !f.agent {
		return server.Config{}, fmt.Errorf("--num-partitions must be at least 1 (got %d)", f.numPartitions)
	}
	if !f.autoLeaderRebalance {
		f.leaderBalanceInterval = -1
	} else if f.leaderBalanceInterval < 0 {
		return server.Config{}, fmt.Errorf("--leader-imbalance-check-interval must not be negative (got %v)", f.leaderBalanceInterval)
	}
	if f.replicaLagTimeMax < 0 {
		return server.Config{}, fmt.Errorf("--replica-lag-time-max must not be negative (got %v)", f.replicaLagTimeMax)
	}
	if f.leaderImbalancePct < 0 || f.leaderImbalancePct > 100 {
		return server.Config{}, fmt.Errorf("--leader-imbalance-per-broker-percentage must be 0 to 100 (got %d)", f.leaderImbalancePct)
	}
	if f.offsetsPartitions < 0 || f.txnStatePartitions < 0 { // 0 (an agent's, which has no such flags): Kafka's 50
		return server.Config{}, fmt.Errorf("--offsets-topic-num-partitions and --transaction-state-log-num-partitions must be at least 1 (got %d, %d)", f.offsetsPartitions, f.txnStatePartitions)
	}
	if f.offsetsRF < 0 || f.txnStateRF < 0 {
		return server.Config{}, fmt.Errorf("--offsets-topic-replication-factor and --transaction-state-log-replication-factor must be at least 1, or 0 for the automatic choice (got %d, %d)", f.offsetsRF, f.txnStateRF)
	}
	if f.defaultRF < 0 {
		return server.Config{}, fmt.Errorf("--default-replication-factor must be at least 1, or 0 for the automatic choice (got %d)", f.defaultRF)
	}
	voters, err := ParseVoters(f.voters)
	if err != nil {
		return server.Config{}, err
	}
	cfg := server.Config{
		DataDir: f.dataDir, KafkaAddr: f.kafkaAddr, AdvertisedKafkaAddr: f.advertisedKafkaAddr,
		NodeID: f.nodeID, AdminAddr: f.adminAddr, Logger: logger, LogLevel: logLevel, Console: console,
		SlowRequestThreshold: f.slowRequest, ClusterAddr: f.clusterAddr, ControllerVoters: voters,
		Rack: f.rack, RackAwareReads: f.replicaSelector == "rack" || f.replicaSelector == rackSelectorClass, GroupMigrationPolicy: f.groupMigration,
		NumPartitions: f.numPartitions, DefaultReplicationFactor: f.defaultRF,
		OffsetsReplicationFactor: f.offsetsRF, TxnStateReplicationFactor: f.txnStateRF, NoAutoCreateTopics: !f.autoCreateTopics,
		OffsetsPartitions: f.offsetsPartitions, TxnStatePartitions: f.txnStatePartitions,
		NoTopicDeletion: !f.deleteTopics && !f.agent, LeaderBalanceInterval: f.leaderBalanceInterval, ReplicaLagTimeMax: f.replicaLagTimeMax,
		LeaderImbalancePercent: imbalancePercent(f.leaderImbalancePct),
		SessionTimeout:         f.sessionTimeout, NoControlledShutdown: !f.controlledShutdown, FaultInjection: f.faultInjection,
		ObjectStore: f.objectStore, ObjectBatchTimeout: f.objectBatchTimeout, ObjectBatchBytes: f.objectBatchBytes,
		ObjectCacheBytes: f.objectCacheMiB << 20, NoObjectPeerReads: !f.objectPeerReads, Agent: f.agent, Ripcord: f.ripcord,
	}
	if !f.agent {
		cfg.SpecLogAddr = f.speclogAddr
	}
	if cfg.ShareGroups, err = f.shareConfig(); err != nil {
		return server.Config{}, err
	}
	session, interval := cmp.Or(f.streamsSession, 45*time.Second), cmp.Or(f.streamsHeartbeat, 5*time.Second) // zero: Kafka's defaults
	switch {
	case session < time.Second || interval < 100*time.Millisecond || interval >= session:
		return server.Config{}, fmt.Errorf("--group-streams-session-timeout %v and --group-streams-heartbeat-interval %v: want a session of at least 1s above the interval (at least 100ms)", session, interval)
	case f.streamsStandbys < 0 || f.streamsStandbys > 2:
		return server.Config{}, fmt.Errorf("--group-streams-num-standby-replicas %d: want 0 to 2", f.streamsStandbys)
	case f.fetchMaxBytes != 0 && f.fetchMaxBytes < 1024:
		return server.Config{}, fmt.Errorf("--fetch-max-bytes %d: want at least 1024", f.fetchMaxBytes)
	case f.streamsInterval < 0 || f.streamsInterval > 15*time.Second:
		return server.Config{}, fmt.Errorf("--group-streams-assignment-interval %v: want 0 to 15s", f.streamsInterval)
	case f.retentionCheck < 0 || f.retentionCheck > 0 && f.retentionCheck < time.Millisecond:
		return server.Config{}, fmt.Errorf("--log-retention-check-interval %v: want at least 1ms", f.retentionCheck)
	case f.cleanerBackoff < 0 || f.cleanerBackoff > 0 && f.cleanerBackoff < time.Millisecond:
		return server.Config{}, fmt.Errorf("--log-cleaner-backoff %v: want at least 1ms", f.cleanerBackoff)
	}
	cfg.LogRetentionCheckInterval, cfg.LogCleanerBackoff = f.retentionCheck, f.cleanerBackoff
	cfg.StreamsSessionTimeout, cfg.StreamsHeartbeatInterval, cfg.StreamsStandbyReplicas = session, interval, f.streamsStandbys
	cfg.GroupInitialRebalanceDelay = f.groupDelay
	if f.groupDelay <= 0 {
		cfg.GroupInitialRebalanceDelay = -1 // none (zero in server.Config is Kafka's default)
	}
	cfg.StreamsInitialRebalanceDelay = f.streamsDelay
	if f.streamsDelay <= 0 {
		cfg.StreamsInitialRebalanceDelay = -1 // none (zero in server.Config is Kafka's default)
	}
	cfg.FetchMaxBytes = f.fetchMaxBytes
	cfg.StreamsAssignmentInterval = f.streamsInterval
	if f.streamsInterval <= 0 {
		cfg.StreamsAssignmentInterval = -1
	}
	if f.groupMigration != "" && !slices.Contains(group.MigrationPolicies, f.groupMigration) { // "": an agent, which has no groups
		return server.Config{}, fmt.Errorf("--group-consumer-migration-policy %q: want one of %s", f.groupMigration, strings.Join(group.MigrationPolicies, ", "))
	}
	switch f.replicaSelector {
	case "", "leader", "rack", rackSelectorClass:
	default:
		return server.Config{}, fmt.Errorf("--replica-selector %q: want \"rack\" or none", f.replicaSelector)
	}
	if f.slowRequest <= 0 {
		cfg.SlowRequestThreshold = -1 // the flag's 0 means off; the config's 0 means the default
	}
	if err := f.securityConfig(&cfg); err != nil {
		return server.Config{}, err
	}
	return cfg, cfg.Validate()
}

// ParseVoters parses --controller-voters: ID@HOST:PORT,... ("" means none).
func ParseVoters(s string) (map[int32]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	out := map[int32]string{}
	for _, v := range strings.Split(s, ",") {
		id, addr, ok := strings.Cut(strings.TrimSpace(v), "@")
		n, err := strconv.ParseInt(id, 10, 32)
		if !ok || err != nil || n < 0 {
			return nil, fmt.Errorf("invalid --controller-voters entry %q: want ID@HOST:PORT", v)
		}
		if _, dup := out[int32(n)]; dup {
			return nil, fmt.Errorf("--controller-voters names node %d twice", n)
		}
		out[int32(n)] = addr
	}
	return out, nil
}

// newLogger builds the node's logger, which logs at lv's level: lv is set to level here, and
// BROKER_LOGGER configs change it at run time (docs/configuration.md).
func newLogger(w io.Writer, level, format string, lv *slog.LevelVar) (*slog.Logger, error) {
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("invalid log level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("invalid log format %q: want text or json", format)
}

// staticConfigFlags are the flags that set Kafka's static broker configs, by flag name.
var staticConfigFlags = map[string]string{
	"auto-create-topics":                       "auto.create.topics.enable",
	"delete-topic-enable":                      "delete.topic.enable",
	"num-partitions":                           "num.partitions",
	"default-replication-factor":               "default.replication.factor",
	"offsets-topic-replication-factor":         "offsets.topic.replication.factor",
	"offsets-topic-num-partitions":             "offsets.topic.num.partitions",
	"transaction-state-log-replication-factor": "transaction.state.log.replication.factor",
	"transaction-state-log-num-partitions":     "transaction.state.log.num.partitions",
	"fetch-max-bytes":                          "fetch.max.bytes",
	"replica-lag-time-max":                     "replica.lag.time.max.ms",
	"speclog-addr":                             "runnel.speclog.addr",
	"group-initial-rebalance-delay":            "group.initial.rebalance.delay.ms",
}

// givenConfigs names, by Kafka's names, the static broker configs whose flags were given: on
// the command line, in the environment or in the config file (applyEnv and applyConfigFile set
// the flags they take).
func givenConfigs(flags *pflag.FlagSet) map[string]bool {
	given := map[string]bool{}
	for flag, name := range staticConfigFlags {
		if flags.Changed(flag) {
			given[name] = true
		}
	}
	return given
}

func newServeCommand() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a Runnel node",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := f.config(cmd.ErrOrStderr(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			cfg.GivenConfigs = givenConfigs(cmd.Flags())
			slog.SetDefault(cfg.Logger)
			defer gctune.Start(f.gcHeadroomMiB << 20).Stop()
			return serve(cmd.Context(), cfg)
		},
	}
	f.register(cmd.Flags())
	return cmd
}

// serve runs a server until SIGINT or SIGTERM, then closes it. A second signal during the
// shutdown kills the process.
func serve(ctx context.Context, cfg server.Config) error {
	s, err := server.Open(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	// Once the first signal has cancelled ctx, stop catching them: a second one during the
	// drain gets the default action and ends the process.
	context.AfterFunc(ctx, stop)
	runErr := s.Run(ctx)
	stop()
	cfg.Logger.Info("shutting down")
	if err := s.Close(); err != nil {
		return err
	}
	return runErr
}

// rackSelectorClass is Kafka's replica.selector.class for rack-aware reads (KIP-392).
const rackSelectorClass = "org.apache.kafka.common.replica.RackAwareReplicaSelector"

// imbalancePercent maps --leader-imbalance-per-broker-percentage to the server's config, where
// 0 means the default and a negative value 0.
func imbalancePercent(p int) int {
	if p == 0 {
		return -1
	}
	return p
}

// shareConfig is the share groups' limits the flags set (zero: Kafka's default), in Kafka's
// ranges.
func (f *serveFlags) shareConfig() (share.Config, error) {
	c := share.DefaultConfig()
	switch {
	case f.shareLock != 0 && (f.shareLock < time.Second || f.shareLock > time.Hour):
		return c, fmt.Errorf("--group-share-record-lock-duration %v: want 1s to 1h", f.shareLock)
	case f.shareDeliveries != 0 && (f.shareDeliveries < 2 || f.shareDeliveries > 10):
		return c, fmt.Errorf("--group-share-delivery-count-limit %d: want 2 to 10", f.shareDeliveries)
	case f.shareRecordLocks != 0 && (f.shareRecordLocks < 100 || f.shareRecordLocks > 10000):
		return c, fmt.Errorf("--group-share-partition-max-record-locks %d: want 100 to 10000", f.shareRecordLocks)
	}
	if f.shareLock != 0 {
		c.LockDuration = f.shareLock
	}
	if f.shareDeliveries != 0 {
		c.DeliveryLimit = int16(f.shareDeliveries)
	}
	if f.shareRecordLocks != 0 {
		c.MaxInFlight = f.shareRecordLocks
	}
	return c, nil
}
