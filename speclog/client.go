// Package speclog is the Go client of Runnel's SpecLog API (docs/speclog.md): a total-order
// topic is one log ordered across its shards (partitions). Appends return the record's global
// position; subscribers receive records speculatively, as soon as they are durable, at the
// position fix-ante ordering predicts, then Confirm events; after a whole-shard failure a Fail
// event voids what was delivered at or after its position, and the correct records follow.
//
//	c, _ := speclog.Dial(ctx, "127.0.0.1:9096")
//	log := c.Topic("payments")
//	pos, _ := log.Append(ctx, 0, speclog.Record{Value: []byte("hello")})
//	sub := log.Subscribe(ctx, 0, speclog.SubscribeOptions{})
//	for {
//		ev, err := sub.Next()
//		...
//	}
package speclog

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/runnel-dev/runnel/internal/speclog/appendmux"
	pb "github.com/runnel-dev/runnel/speclog/speclogpb"
)

// WithTLS makes the connections TLS (runnel serve --speclog-tls); cfg holds the CA that verifies
// the nodes and, for mTLS, the client certificate, whose subject is then the principal.
func WithTLS(cfg *tls.Config) grpc.DialOption {
	return grpc.WithTransportCredentials(credentials.NewTLS(cfg))
}

// WithUser authenticates every call as one of the cluster's SASL users (docs/security.md §4):
// the node checks the password against the user's SCRAM credentials, as SASL PLAIN does. The
// password travels with each call: use it with WithTLS.
func WithUser(user, password string) grpc.DialOption {
	return grpc.WithPerRPCCredentials(basicAuth{"Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))})
}

// WithBearerToken authenticates every call with an OAuth bearer token from token (called per
// call, so it can refresh), checked by the node as OAUTHBEARER tokens are (docs/security.md §3):
// the principal is User:<the token's sub>. Use it with WithTLS.
func WithBearerToken(token func(ctx context.Context) (string, error)) grpc.DialOption {
	return grpc.WithPerRPCCredentials(bearerAuth(token))
}

type bearerAuth func(ctx context.Context) (string, error)

func (b bearerAuth) GetRequestMetadata(ctx context.Context, _ ...string) (map[string]string, error) {
	tok, err := b(ctx)
	if err != nil {
		return nil, err
	}
	return map[string]string{"authorization": "Bearer " + tok}, nil
}

// RequireTransportSecurity: as basicAuth's.
func (bearerAuth) RequireTransportSecurity() bool { return false }

type basicAuth struct{ header string }

func (b basicAuth) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": b.header}, nil
}

// RequireTransportSecurity is false so that a loopback node without TLS can be used; the
// password is then in clear on the wire, as with SASL PLAIN over SASL_PLAINTEXT.
func (basicAuth) RequireTransportSecurity() bool { return false }

// Header is a record header.
type Header struct {
	Key   string
	Value []byte
}

// Record is what an append writes and a subscriber reads.
type Record struct {
	Key       []byte
	Value     []byte
	Headers   []Header
	Timestamp time.Time // zero in an append: the node's clock
}

// Client talks to the SpecLog service of a Runnel cluster: the node it dialed, and the shards'
// leaders and other nodes it learns from Describe.
type Client struct {
	addr string
	opts []grpc.DialOption
	// attempt bounds one try of an append (and the Describe that re-routes it): a node that
	// stops answering (frozen, cut off) must not hold the append until the caller's deadline
	// when another replica has taken its shard over. Appends are idempotent, so trying again
	// elsewhere stores nothing twice.
	attempt time.Duration
	// silence bounds how long a subscription's stream may give nothing before it is opened
	// again through another node: one that froze, or was cut off from the shards' leaders,
	// holds the stream open and sends nothing, while a topic confirms ~20 cuts a second even
	// idle (docs/speclog.md, runnel.order.idle.ms).
	silence time.Duration

	mu      sync.Mutex
	closed  bool // Close was called: nothing is dialed again
	conns   map[string]*grpc.ClientConn
	appends map[string]*appendmux.Mux // per connection: its appends' stream
	known   []string                  // other nodes' SpecLog addresses, learned from Describe
}

// endpoints is the dialed node's address, then the other nodes' the client has learned.
func (c *Client) endpoints() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string{c.addr}, c.known...)
}

// learn remembers a node's SpecLog address, to fall back on when the dialed node does not
// answer.
func (c *Client) learn(addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if addr != "" && addr != c.addr && !slices.Contains(c.known, addr) {
		c.known = append(c.known, addr)
	}
}

// unreachable reports whether an error says the node did not answer (rather than refused).
func unreachable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return false
}

// DefaultAppendAttempt is how long one try of an append may take before the client asks where
// the shard is led and tries again (SetAppendAttemptTimeout changes it).
const DefaultAppendAttempt = 2 * time.Second

// SetAppendAttemptTimeout sets how long one try of an append may take before it is tried again
// at the shard's (maybe new) leader; the caller's context still bounds the whole append.
func (c *Client) SetAppendAttemptTimeout(d time.Duration) { c.attempt = d }

// DefaultSubscribeSilence is how long a subscription's stream may give no event before the
// client subscribes again through another node (SetSubscribeSilenceTimeout changes it). It is
// above the longest pause of a healthy cluster's confirmations: a shard's takeover
// (runnel.order.takeover.ms, 5 s, after the old leader's session timeout).
const DefaultSubscribeSilence = 15 * time.Second

// SetSubscribeSilenceTimeout sets how long a subscription's stream may give no event before the
// client subscribes again through the next node it knows of (0: no limit). Subscriptions
// started after it use it.
func (c *Client) SetSubscribeSilenceTimeout(d time.Duration) { c.silence = d }

// Dial connects to a node's SpecLog address (runnel serve --speclog-addr). The connection is
// plaintext, as the node's default listener, unless the options say otherwise (WithTLS, or any
// grpc.WithTransportCredentials); WithUser authenticates as one of the cluster's users.
func Dial(ctx context.Context, addr string, opts ...grpc.DialOption) (*Client, error) {
	opts = append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...) // later options win
	c := &Client{addr: addr, opts: opts, attempt: DefaultAppendAttempt, silence: DefaultSubscribeSilence, conns: map[string]*grpc.ClientConn{}, appends: map[string]*appendmux.Mux{}}
	if _, err := c.conn(addr); err != nil {
		return nil, err
	}
	return c, nil
}

// ErrClosed is the error of a call on a closed Client.
var ErrClosed = status.Error(codes.Canceled, "speclog: the client is closed")

// Close closes every connection. Calls made after it fail with ErrClosed (and dial nothing).
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for _, m := range c.appends {
		m.Close()
	}
	clear(c.appends)
	var errs []error
	for _, cc := range c.conns {
		errs = append(errs, cc.Close())
	}
	clear(c.conns)
	return errors.Join(errs...)
}

func (c *Client) conn(addr string) (*grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if cc := c.conns[addr]; cc != nil {
		return cc, nil
	}
	cc, err := grpc.NewClient(addr, c.opts...)
	if err != nil {
		return nil, fmt.Errorf("speclog: connecting to %s: %w", addr, err)
	}
	c.conns[addr] = cc
	return cc, nil
}

func (c *Client) api(addr string) (pb.SpecLogClient, error) {
	if addr == "" {
		addr = c.addr
	}
	cc, err := c.conn(addr)
	if err != nil {
		return nil, err
	}
	return pb.NewSpecLogClient(cc), nil
}

// appender returns the append stream of addr's connection (the dialed node's for ""), api.
func (c *Client) appender(addr string, api pb.SpecLogClient) (*appendmux.Mux, error) {
	if addr == "" {
		addr = c.addr
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed { // since api was got: a new Mux would never be closed
		return nil, ErrClosed
	}
	m := c.appends[addr]
	if m == nil {
		m = appendmux.New(api)
		c.appends[addr] = m
	}
	return m, nil
}

// Topic is a total-order topic seen through the client.
func (c *Client) Topic(name string) *Log { return &Log{c: c, name: name, leaders: map[int32]string{}} }

// Log is one total-order topic.
type Log struct {
	c    *Client
	name string

	mu      sync.Mutex
	leaders map[int32]string // shard → its leader's SpecLog address
	lanes   []*lane          // idempotent producer ids no append holds now
}

// lane is a producer id of a Log's appends. An append holds its lane alone until answered, so
// each producer's appends reach a shard one at a time, in sequence order, and a retry repeats
// the same sequence numbers: the shard stores it once and answers with the first positions.
type lane struct {
	id    int64
	epoch int32
	seq   map[int32]int32 // per shard: the sequence number of the next record
}

// Description is a topic's state as the sequencer has it.
type Description struct {
	Shards          []ShardInfo
	Confirmed       uint64 // positions below are final
	View            uint64
	Trimmed         uint64 // positions below are trimmed
	Window          uint64
	WindowCuts      int
	Interval        time.Duration // T_ord
	SequencerLeader int32
}

// ShardInfo describes a shard.
type ShardInfo struct {
	Shard      int32
	Leader     int32
	LeaderAddr string
	Quota      uint64 // positions per cut in the current window
	Failed     bool
}

// call runs f on the dialed node's API and, while the node it reached does not answer, on the
// other nodes the client has learned of in turn, so that a request any node serves survives
// the dialed node's failure. perTry > 0 bounds each try but the last (a quick request, for a
// node that is frozen rather than down).
func (c *Client) call(ctx context.Context, perTry time.Duration, f func(ctx context.Context, api pb.SpecLogClient) error) error {
	eps := c.endpoints()
	var err error
	for i, addr := range eps {
		var api pb.SpecLogClient
		if api, err = c.api(addr); err != nil {
			return err
		}
		tctx, cancel := ctx, context.CancelFunc(func() {})
		if perTry > 0 && i+1 < len(eps) {
			tctx, cancel = context.WithTimeout(ctx, perTry)
		}
		err = f(tctx, api)
		cancel()
		if err == nil || ctx.Err() != nil || !(status.Code(err) == codes.Unavailable || perTry > 0 && unreachable(err)) {
			break
		}
	}
	return err
}

// Describe describes the topic, through the dialed node or, if it does not answer, another
// node the client knows of.
func (l *Log) Describe(ctx context.Context) (*Description, error) {
	var r *pb.DescribeResponse
	err := l.c.call(ctx, time.Second, func(ctx context.Context, api pb.SpecLogClient) (err error) {
		r, err = api.Describe(ctx, &pb.DescribeRequest{Topic: l.name})
		return err
	})
	if err != nil {
		return nil, err
	}
	d := &Description{Confirmed: r.GetConfirmed(), View: r.GetView(), Trimmed: r.GetTrimmed(), Window: r.GetWindow(),
		WindowCuts: int(r.GetWindowCuts()), Interval: time.Duration(r.GetIntervalUs()) * time.Microsecond, SequencerLeader: r.GetSequencerLeader()}
	l.mu.Lock()
	for _, s := range r.GetShards() {
		d.Shards = append(d.Shards, ShardInfo{Shard: s.GetShard(), Leader: s.GetLeader(), LeaderAddr: s.GetLeaderAddr(), Quota: s.GetQuota(), Failed: s.GetFailed()})
		l.leaders[s.GetShard()] = s.GetLeaderAddr()
		l.c.learn(s.GetLeaderAddr())
	}
	for _, a := range r.GetNodeAddrs() {
		l.c.learn(a)
	}
	l.mu.Unlock()
	return d, nil
}

// Append appends a record to a shard and returns its global position, once committed.
func (l *Log) Append(ctx context.Context, shard int32, rec Record) (uint64, error) {
	ps, err := l.AppendBatch(ctx, shard, []Record{rec})
	if err != nil {
		return 0, err
	}
	return ps[0], nil
}

// AppendBatch appends records to a shard in one request and returns their global positions.
// It follows the shard's leader and retries while the shard has none. Appends are idempotent,
// as a Kafka idempotent producer's: each carries a producer id (InitProducer, one per append in
// flight) and sequence numbers, so a retry of an append that was stored is not stored again.
func (l *Log) AppendBatch(ctx context.Context, shard int32, recs []Record) ([]uint64, error) {
	req := &pb.AppendRequest{Topic: l.name, Shard: shard}
	for _, r := range recs {
		req.Records = append(req.Records, toPB(r))
	}
	var ln *lane
	// sent: a try on ln failed after it may have been stored (the node did not answer in
	// time, or the connection broke). A later try that is refused says nothing of that one:
	// ln's sequence may be taken, and an append reusing it would be answered as its duplicate.
	sent := false
	advance := func() { ln.seq[shard] = int32((int64(ln.seq[shard]) + int64(len(recs))) % (1 << 31)) } // wraps as Kafka's
	defer func() {
		if ln != nil { // answered, or refused (past what may have been stored): the lane goes on
			l.mu.Lock()
			l.lanes = append(l.lanes, ln)
			l.mu.Unlock()
		}
	}()
	backoff := 10 * time.Millisecond
	for {
		l.mu.Lock()
		addr := l.leaders[shard]
		if ln == nil && len(l.lanes) > 0 {
			ln, l.lanes = l.lanes[len(l.lanes)-1], l.lanes[:len(l.lanes)-1]
		}
		l.mu.Unlock()
		api, err := l.c.api(addr)
		if err != nil {
			return nil, err
		}
		appends, err := l.c.appender(addr, api)
		if err != nil {
			return nil, err
		}
		actx, cancel := context.WithTimeout(ctx, l.c.attempt)
		if ln == nil {
			var p *pb.InitProducerResponse
			if p, err = api.InitProducer(actx, &pb.InitProducerRequest{}); err == nil {
				ln = &lane{id: p.GetProducerId(), epoch: p.GetProducerEpoch(), seq: map[int32]int32{}}
			}
		}
		var resp *pb.AppendResponse
		if ln != nil {
			req.ProducerId, req.ProducerEpoch, req.BaseSequence = &ln.id, ln.epoch, ln.seq[shard]
			if resp, err = appends.Append(actx, req); err == nil {
				cancel()
				advance()
				return resp.GetPositions(), nil
			}
			sent = sent || unreachable(err)
		}
		cancel()
		code := status.Code(err)
		if code == codes.DeadlineExceeded && ctx.Err() == nil {
			code = codes.Unavailable // this try took too long (its node may be frozen): ask again where the shard is
		}
		switch code {
		case codes.FailedPrecondition, codes.Unavailable:
			// not the shard's leader, or none yet: learn where it is and try again
		case codes.Aborted:
			// the producer's sequence is off (its state expired, or an append it gave up on
			// was lost): nothing was stored; start again with a new producer id
			ln, sent = nil, false
		case codes.InvalidArgument, codes.PermissionDenied, codes.Unauthenticated, codes.NotFound, codes.OutOfRange:
			if sent && ln != nil {
				// An earlier try may have been stored: the lane goes on past it. If it was not,
				// the lane's next append leaves a gap in its sequence: stored past it (a producer
				// the shard has no state of), or refused as out of sequence (Aborted) and made
				// again with a new producer id. Either way stored once.
				advance()
			}
			return nil, err // this try was refused before anything was stored
		default:
			ln = nil // it may have been stored: the lane's next sequence is not known
			return nil, err
		}
		select {
		case <-ctx.Done():
			ln = nil // the last try may have been stored
			return nil, fmt.Errorf("speclog: append to shard %d: %w (last: %v)", shard, ctx.Err(), err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
		dctx, dcancel := context.WithTimeout(ctx, l.c.attempt)
		_, derr := l.Describe(dctx)
		dcancel()
		if derr != nil {
			l.mu.Lock()
			delete(l.leaders, shard) // ask the dialed node next time
			l.mu.Unlock()
		}
	}
}

// Read returns up to n confirmed records from position from, and the position to read from
// next.
func (l *Log) Read(ctx context.Context, from uint64, n int) ([]Event, uint64, error) {
	var r *pb.ReadResponse
	err := l.c.call(ctx, 0, func(ctx context.Context, api pb.SpecLogClient) (err error) {
		r, err = api.Read(ctx, &pb.ReadRequest{Topic: l.name, From: from, MaxRecords: int32(n)})
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	var out []Event
	for _, d := range r.GetRecords() {
		out = append(out, recordEvent(d))
	}
	return out, r.GetNext(), nil
}

// Trim discards every position below upTo on every shard (their storage is reclaimed). upTo
// must be confirmed. Any node serves it: it returns once every shard's leader has moved its log
// start; a DeadlineExceeded error after about 10 s names the shards whose leader has not (one is
// down): the trim stands (reads below upTo are refused), and Trim again waits for them.
func (l *Log) Trim(ctx context.Context, upTo uint64) error {
	return l.c.call(ctx, 0, func(ctx context.Context, api pb.SpecLogClient) error {
		_, err := api.Trim(ctx, &pb.TrimRequest{Topic: l.name, UpTo: upTo})
		return err
	})
}

func toPB(r Record) *pb.Record {
	p := &pb.Record{Key: r.Key, Value: r.Value}
	if !r.Timestamp.IsZero() {
		p.TimestampMs = r.Timestamp.UnixMilli()
	}
	for _, h := range r.Headers {
		p.Headers = append(p.Headers, &pb.Header{Key: h.Key, Value: h.Value})
	}
	return p
}

func fromPB(p *pb.Record) Record {
	r := Record{Key: p.GetKey(), Value: p.GetValue(), Timestamp: time.UnixMilli(p.GetTimestampMs())}
	for _, h := range p.GetHeaders() {
		r.Headers = append(r.Headers, Header{Key: h.GetKey(), Value: h.GetValue()})
	}
	return r
}
