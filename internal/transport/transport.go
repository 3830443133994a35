// Package transport carries messages between the nodes of a cluster: the controller's Raft
// messages, partition replication and controller RPCs. Every node listens on its cluster
// address; a node sends everything it has for a peer on one outbound TCP connection that it
// dials itself, so a pair of nodes uses two connections, one per direction. Messages queued
// for a peer while a write is under way go out together in the next write: the heartbeats and
// appends of every partition between two nodes are coalesced into the same syscalls.
//
// A connection carries frames:
//
//	u32 length (of what follows) | u8 kind | body
//
// The first frame on a connection is a hello (kind 0):
//
//	"RNL1" | i32 from node | i32 to node | string cluster id (i16 length, may be empty)
//	       | string dialer's cluster address (i16 length; absent or empty if not given)
//
// The receiver checks that it is the node the dialer meant and, when both know it, that the
// cluster ids match; otherwise it closes the connection. It remembers the dialer's address, so
// it can answer a node that is not in its metadata yet (a broker registering with the
// controller learns the answer only that way). Kinds 1-255 belong to the users of the
// transport. Delivery is at most once and in order per connection: a frame is lost when its
// connection breaks, and senders (Raft, replication acks, RPC retries) recover from loss.
package transport

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
)

// Kind is a frame's kind. 0 is the hello; the rest are the users'.
type Kind uint8

const kindHello Kind = 0

const helloMagic = "RNL1"

// Handler receives a frame from node from. body is valid only during the call: the handler
// copies what it keeps. Frames of one connection arrive in order, handed to the handler by the
// goroutine reading the connection; a handler that runs on for 10-20 ms (handOverTick) has
// the reading handed to a new goroutine, so the frames after its own may be handled while it
// runs on: a handler whose frames must keep their order behind a slow one keeps it itself.
type Handler func(from int32, kind Kind, body []byte)

// Config configures a Transport.
type Config struct {
	NodeID int32
	// Listener accepts the peers' connections; the transport closes it on Close.
	Listener net.Listener
	// Resolve returns a node's cluster address, or "" if it is not known (yet).
	Resolve func(node int32) string
	// Addr is the address peers dial to reach this node, sent in hellos (default: the
	// listener's address).
	Addr    string
	Handler Handler
	// PeerDown is told when a connection to node breaks or cannot be made. refused means the
	// node's address refused the connection: nothing listens there, its process is gone.
	PeerDown func(node int32, refused bool)
	Logger   *slog.Logger

	MaxQueueBytes int           // frames waiting for one peer; more are dropped (default 64 MiB)
	MaxFrameBytes int           // larger inbound frames close the connection (default 64 MiB)
	DialTimeout   time.Duration // default 1 s
	WriteTimeout  time.Duration // a write stuck this long breaks the connection (default 5 s)

	// TLS, when set, makes outgoing connections TLS with the client config it returns for the
	// peer's host, asked at each dial (the listener is then a TLS listener too, wrapped by the
	// caller; docs/security.md §2).
	TLS func(serverName string) *tls.Config
}

// Transport is one node's end of the cluster network.
type Transport struct {
	cfg       Config
	logger    *slog.Logger
	clusterID atomic.Pointer[string]

	mu       sync.Mutex
	peers    map[int32]*peer
	inbound  map[net.Conn]int32 // accepted connections and their peer (-1 before the hello)
	isolated map[int32]bool     // fault injection: frames to and from these peers are dropped
	filter   func(from, to int32, kind Kind) bool
	learned  map[int32]string // addresses peers gave in their hellos

	closed chan struct{}
	ctx    context.Context // ends at Close: cancels dials
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// The inbound connections' readings, which the watchdog hands over past a slow handler.
	watchMu     sync.Mutex
	readings    map[*reading]struct{}
	watchAsleep atomic.Bool
	watchWake   chan struct{}

	// Counters, for metrics and tests. HandOvers: readings handed to a new goroutine past a
	// slow handler.
	SentFrames, SentBytes, Dropped, Writes, HandOvers atomic.Int64
}

// New starts accepting on cfg.Listener.
func New(cfg Config) *Transport {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxQueueBytes <= 0 {
		cfg.MaxQueueBytes = 64 << 20
	}
	if cfg.MaxFrameBytes <= 0 {
		cfg.MaxFrameBytes = 64 << 20
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 5 * time.Second
	}
	t := &Transport{cfg: cfg, logger: cfg.Logger, peers: map[int32]*peer{}, inbound: map[net.Conn]int32{},
		isolated: map[int32]bool{}, learned: map[int32]string{}, closed: make(chan struct{}),
		readings: map[*reading]struct{}{}, watchWake: make(chan struct{}, 1)}
	if t.cfg.Addr == "" {
		t.cfg.Addr = cfg.Listener.Addr().String()
	}
	t.clusterID.Store(new(""))
	t.ctx, t.cancel = context.WithCancel(context.Background())
	t.wg.Add(2)
	go t.accept()
	go t.watchdog()
	return t
}

// Addr is the address the transport listens on.
func (t *Transport) Addr() string { return t.cfg.Listener.Addr().String() }

// SetClusterID sets the cluster id checked in hellos once it is known.
func (t *Transport) SetClusterID(id string) { t.clusterID.Store(&id) }

// Send queues a frame for node to. It never blocks: if the peer's queue is full the frame is
// dropped (and counted). The transport copies body.
func (t *Transport) Send(to int32, kind Kind, body []byte) {
	if to == t.cfg.NodeID {
		panic(fmt.Sprintf("transport: node %d sends to itself", to))
	}
	if t.dropOut(to, kind) {
		t.Dropped.Add(1)
		return
	}
	p := t.peer(to)
	if p == nil {
		return
	}
	p.mu.Lock()
	if len(p.queue)+5+len(body) > t.cfg.MaxQueueBytes {
		p.mu.Unlock()
		t.Dropped.Add(1)
		return
	}
	p.queue = binary.BigEndian.AppendUint32(p.queue, uint32(1+len(body)))
	p.queue = append(p.queue, byte(kind))
	p.queue = append(p.queue, body...)
	p.mu.Unlock()
	t.SentFrames.Add(1)
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Forget drops the frames queued for node to and closes the connection to it: to was removed
// from a Raft group, and what was queued for the process it was must not reach another
// process that takes the id later (a Raft heartbeat that names a commit index the old member
// had reached makes a member with an empty log panic).
func (t *Transport) Forget(to int32) {
	t.mu.Lock()
	p := t.peers[to]
	t.mu.Unlock()
	if p == nil {
		return
	}
	p.mu.Lock()
	p.queue = p.queue[:0]
	p.mu.Unlock()
	if c := p.takeConn(); c != nil {
		go c.Close() // not on the caller's goroutine: a TLS close writes
	}
}

// Queued is how many bytes of frames wait to be written to node to.
func (t *Transport) Queued(to int32) int {
	t.mu.Lock()
	p := t.peers[to]
	t.mu.Unlock()
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.queue)
}

// Isolate drops every frame to and from the given peers (fault injection: a network partition
// around this node). Connections stay up, as in a real partition, so nobody sees a refusal.
func (t *Transport) Isolate(peers ...int32) {
	t.mu.Lock()
	for _, p := range peers {
		t.isolated[p] = true
	}
	t.mu.Unlock()
}

// Heal ends every isolation.
func (t *Transport) Heal() {
	t.mu.Lock()
	t.isolated = map[int32]bool{}
	t.mu.Unlock()
}

// Isolated lists the isolated peers.
func (t *Transport) Isolated() []int32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []int32
	for p := range t.isolated {
		out = append(out, p)
	}
	return out
}

// SetFilter installs a fault-injection filter: a frame for which it returns true is dropped,
// on its way out (to = the peer) and on its way in (from = the peer). nil removes it.
func (t *Transport) SetFilter(f func(from, to int32, kind Kind) bool) {
	t.mu.Lock()
	t.filter = f
	t.mu.Unlock()
}

func (t *Transport) dropOut(to int32, kind Kind) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.isolated[to] || (t.filter != nil && t.filter(t.cfg.NodeID, to, kind))
}

func (t *Transport) dropIn(from int32, kind Kind) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.isolated[from] || (t.filter != nil && t.filter(from, t.cfg.NodeID, kind))
}

// CutConnections closes every connection to and from peer (fault injection: a connection reset).
func (t *Transport) CutConnections(peer int32) {
	t.mu.Lock()
	p := t.peers[peer]
	var in []net.Conn
	for c, from := range t.inbound {
		if from == peer {
			in = append(in, c)
		}
	}
	t.mu.Unlock()
	if p != nil {
		p.breakConn()
	}
	for _, c := range in {
		c.Close()
	}
}

// Close stops the transport: the listener and every connection are closed.
func (t *Transport) Close() error {
	select {
	case <-t.closed:
		return nil
	default:
	}
	close(t.closed)
	t.cancel()
	err := t.cfg.Listener.Close()
	t.mu.Lock()
	for c := range t.inbound {
		c.Close()
	}
	for _, p := range t.peers {
		p.breakConn()
	}
	t.mu.Unlock()
	t.wg.Wait()
	return err
}

func (t *Transport) peer(id int32) *peer {
	t.mu.Lock()
	defer t.mu.Unlock()
	select {
	case <-t.closed:
		return nil
	default:
	}
	p := t.peers[id]
	if p == nil {
		p = &peer{t: t, id: id, wake: make(chan struct{}, 1)}
		t.peers[id] = p
		t.wg.Add(1)
		go p.run()
	}
	return p
}

// peer is the outbound side towards one node: a queue of frames and the goroutine writing them.
type peer struct {
	t    *Transport
	id   int32
	wake chan struct{}

	mu    sync.Mutex
	queue []byte
	conn  net.Conn
	// quickDeaths counts the connections in a row the peer closed soon after they were made;
	// no dial is made before notBefore (redialDelay).
	quickDeaths int
	notBefore   time.Time
}

// redialDelay is how long to wait before dialing again after the peer closed a connection
// that lived for lived: at once after one that served, else a pause doubling from 20 ms to a
// second, so a peer that refuses the hello (another node or cluster at the address, this
// node's certificate refused) is not dialed in a tight loop.
func (p *peer) redialDelay(lived time.Duration) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if lived >= time.Second {
		p.quickDeaths = 0
		return 0
	}
	p.quickDeaths = min(p.quickDeaths+1, 8)
	d := min(20*time.Millisecond<<(p.quickDeaths-1), time.Second)
	p.notBefore = time.Now().Add(d)
	return d
}

// waitRedial waits, when there is no connection, until a dial is allowed again (redialDelay),
// whatever woke the run loop (a Send too). It reports false once the transport closes.
func (p *peer) waitRedial() bool {
	p.mu.Lock()
	wait := time.Until(p.notBefore)
	if p.conn != nil {
		wait = 0
	}
	p.mu.Unlock()
	if wait <= 0 {
		return true
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-p.t.closed:
		return false
	case <-t.C:
		return true
	}
}

func (p *peer) breakConn() {
	if c := p.takeConn(); c != nil {
		c.Close()
	}
}

// takeConn detaches the current connection, if any, for the caller to close.
func (p *peer) takeConn() net.Conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.conn
	p.conn = nil
	return c
}

// run writes queued frames until the transport closes, dialing as needed. Frames queued while
// there is no connection are dropped when a dial fails: they would be stale by the next try.
func (p *peer) run() {
	defer p.t.wg.Done()
	var spare []byte
	backoff := 20 * time.Millisecond
	for {
		select {
		case <-p.t.closed:
			return
		case <-p.wake:
		}
		if !p.waitRedial() {
			return
		}
		c, err := p.connect()
		if errors.Is(err, errClosed) {
			return
		}
		if err != nil {
			p.mu.Lock()
			dropped := len(p.queue) > 0
			p.queue = p.queue[:0]
			p.mu.Unlock()
			if dropped {
				p.t.Dropped.Add(1)
			}
			p.reportDown(err)
			select {
			case <-p.t.closed:
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 20 * time.Millisecond
		p.mu.Lock()
		out := p.queue
		p.queue = spare[:0]
		p.mu.Unlock()
		if len(out) == 0 {
			spare = out
			continue
		}
		c.SetWriteDeadline(time.Now().Add(p.t.cfg.WriteTimeout))
		_, err = c.Write(out)
		p.t.Writes.Add(1)
		p.t.SentBytes.Add(int64(len(out)))
		spare = out
		if err != nil {
			p.t.Dropped.Add(1)
			p.breakConn()
			p.reportDown(err)
		}
		p.mu.Lock()
		more := len(p.queue) > 0
		p.mu.Unlock()
		if more {
			select {
			case p.wake <- struct{}{}:
			default:
			}
		}
	}
}

// errClosed: the transport was closed while a connection was being made.
var errClosed = errors.New("transport: closed")

func (p *peer) reportDown(err error) {
	if p.t.cfg.PeerDown != nil {
		p.t.cfg.PeerDown(p.id, errors.Is(err, syscall.ECONNREFUSED))
	}
}

// connect returns the current connection, dialing one (and sending the hello) if there is none.
func (p *peer) connect() (net.Conn, error) {
	p.mu.Lock()
	c := p.conn
	p.mu.Unlock()
	if c != nil {
		return c, nil
	}
	addr := ""
	if p.t.cfg.Resolve != nil {
		addr = p.t.cfg.Resolve(p.id)
	}
	p.t.mu.Lock()
	learned := p.t.learned[p.id]
	p.t.mu.Unlock()
	if addr == "" {
		addr = learned
	}
	if addr == "" {
		return nil, fmt.Errorf("transport: no address for node %d", p.id)
	}
	d := net.Dialer{Timeout: p.t.cfg.DialTimeout}
	c, err := d.DialContext(p.t.ctx, "tcp", addr)
	if err != nil && learned != "" && learned != addr {
		// The peer restarted on another address than the metadata has (a broker's cluster
		// port is often chosen anew): its hello gave the new one, before it registered it.
		c, err = d.DialContext(p.t.ctx, "tcp", learned)
	}
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	if p.t.cfg.TLS != nil {
		host, _, _ := net.SplitHostPort(addr)
		tc := tls.Client(c, p.t.cfg.TLS(host))
		tc.SetDeadline(time.Now().Add(p.t.cfg.DialTimeout))
		if err := tc.HandshakeContext(p.t.ctx); err != nil {
			c.Close()
			return nil, fmt.Errorf("transport: TLS handshake with node %d at %s: %w", p.id, addr, err)
		}
		tc.SetDeadline(time.Time{})
		c = tc
	}
	hello := []byte(helloMagic)
	hello = kbin.AppendInt32(hello, p.t.cfg.NodeID)
	hello = kbin.AppendInt32(hello, p.id)
	hello = kbin.AppendString(hello, *p.t.clusterID.Load())
	hello = kbin.AppendString(hello, p.t.cfg.Addr)
	frame := binary.BigEndian.AppendUint32(nil, uint32(1+len(hello)))
	frame = append(frame, byte(kindHello))
	frame = append(frame, hello...)
	c.SetWriteDeadline(time.Now().Add(p.t.cfg.WriteTimeout))
	if _, err := c.Write(frame); err != nil {
		c.Close()
		return nil, err
	}
	p.mu.Lock()
	select {
	case <-p.t.closed: // Close has broken (or is breaking) the connections: not this one
		p.mu.Unlock()
		c.Close()
		return nil, errClosed
	default:
	}
	p.conn = c
	p.t.wg.Add(1)
	p.mu.Unlock()
	made := time.Now()
	// The peer never writes on this connection; a read returns only when it closes (its
	// process died, or it dropped us): then break the connection at once, and try to dial
	// again, so a dead peer is reported as refused without waiting for the next frame.
	go func() {
		defer p.t.wg.Done()
		var b [1]byte
		_, err := c.Read(b[:])
		p.mu.Lock()
		current := p.conn == c
		if current {
			p.conn = nil
		}
		p.mu.Unlock()
		c.Close()
		if current {
			p.reportDown(err)
			p.redialDelay(time.Since(made)) // the run loop waits it out before dialing
			select {
			case p.wake <- struct{}{}: // redial (a refusal is reported by run)
			default:
			}
		}
	}()
	return c, nil
}

func (t *Transport) accept() {
	defer t.wg.Done()
	for {
		c, err := t.cfg.Listener.Accept()
		if err != nil {
			select {
			case <-t.closed:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			t.logger.Warn("transport: accept", "err", err)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		t.mu.Lock()
		select {
		case <-t.closed:
			t.mu.Unlock()
			c.Close()
			return
		default:
		}
		t.inbound[c] = -1
		t.wg.Add(1)
		t.mu.Unlock()
		go func() {
			defer t.wg.Done()
			err := t.serve(c)
			if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				t.logger.Debug("transport: inbound connection closed", "remote", c.RemoteAddr().String(), "err", err)
			}
			t.mu.Lock()
			delete(t.inbound, c)
			t.mu.Unlock()
			c.Close()
		}()
	}
}

// maxHelloBytes bounds an inbound connection's first frame, its hello (a few ids and two
// addresses); helloTimeout is how long the dialer has to send it.
const maxHelloBytes = 4 << 10

var helloTimeout = 10 * time.Second

// ErrBadHello is returned for a connection whose first frame is not an acceptable hello.
var ErrBadHello = errors.New("transport: bad hello")

// handOverTick is how often the watchdog looks at the connections' readers: a handler still in
// the same frame at two looks in a row (it has run 10-20 ms) gets its connection's reading
// handed to a new goroutine, so a replica writing to a slow disk does not hold back the Raft
// messages and RPCs behind its frame. After handOverIdle of no frame at all the watchdog sleeps
// until the next one.
const (
	handOverTick = 10 * time.Millisecond
	handOverIdle = 200 // ticks
)

// readFrame reads one frame of at most limit bytes into *buf (grown as needed); the body is valid
// until the next read into buf.
func readFrame(r *bufio.Reader, buf *[]byte, limit int) (Kind, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := int(binary.BigEndian.Uint32(hdr[:4]))
	if n < 1 || n > limit {
		return 0, nil, fmt.Errorf("transport: frame of %d bytes (limit %d)", n, limit)
	}
	if cap(*buf) < n-1 {
		*buf = make([]byte, n-1)
	}
	body := (*buf)[:n-1]
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, nil, err
	}
	return Kind(hdr[4]), body, nil
}

// serve reads one inbound connection's frames and hands them to the handler.
func (t *Transport) serve(c net.Conn) error {
	r := bufio.NewReaderSize(c, 256<<10)
	var buf []byte
	// The hello comes first, small and soon (a TLS handshake included): a connection that is
	// not a node's holds no more than that, for no longer.
	c.SetReadDeadline(time.Now().Add(helloTimeout))
	kind, body, err := readFrame(r, &buf, maxHelloBytes)
	if err != nil {
		return err
	}
	from, addr, err := t.checkHello(kind, body)
	if err != nil {
		return err
	}
	c.SetReadDeadline(time.Time{})
	t.mu.Lock()
	t.inbound[c] = from
	if addr != "" {
		t.learned[from] = addr
	}
	t.mu.Unlock()
	rd := &reading{r: r, from: from, done: make(chan struct{})}
	t.watch(rd)
	defer t.unwatch(rd)
	t.readFrames(rd)
	<-rd.done // the goroutine reading last ends the connection's reading
	return rd.err
}

// reading is an inbound connection's reading, which passes from goroutine to goroutine: the one
// reading hands each frame to the handler itself (no hand-over on the commit path); if the
// handler runs on past a watchdog tick, the watchdog starts a new goroutine that reads on.
type reading struct {
	r    *bufio.Reader
	from int32
	// seq counts handler calls twice, at their start and at their end: odd while the reading
	// goroutine is in the handler. Whoever moves it from an odd value first, the goroutine
	// back from its handler or the watchdog handing the reading over, decides.
	seq  atomic.Uint64
	seen uint64 // the watchdog's: seq at its last look
	done chan struct{}
	err  error // why the reading ended, once done is closed
}

// readFrames reads frames until the connection fails or, past a handler that ran too long, the
// reading is handed over.
func (t *Transport) readFrames(rd *reading) {
	var buf []byte // this goroutine's own: a handler handed over past still has its body
	for {
		kind, body, err := readFrame(rd.r, &buf, t.cfg.MaxFrameBytes)
		if err == nil && kind == kindHello {
			err = fmt.Errorf("%w: a second hello", ErrBadHello)
		}
		if err != nil {
			rd.err = err
			close(rd.done)
			return
		}
		if t.dropIn(rd.from, kind) {
			continue
		}
		s := rd.seq.Add(1)
		t.handling()
		t.cfg.Handler(rd.from, kind, body)
		if !rd.seq.CompareAndSwap(s, s+1) {
			return // handed over: another goroutine reads on
		}
		if cap(buf) > 4<<20 { // do not keep a huge buffer for small frames
			buf = nil
		}
	}
}

// watch and unwatch register a connection's reading with the watchdog.
func (t *Transport) watch(rd *reading) {
	t.watchMu.Lock()
	t.readings[rd] = struct{}{}
	t.watchMu.Unlock()
}

func (t *Transport) unwatch(rd *reading) {
	t.watchMu.Lock()
	delete(t.readings, rd)
	t.watchMu.Unlock()
}

// handling wakes the watchdog if it sleeps (cheap otherwise: one atomic load per frame).
func (t *Transport) handling() {
	if t.watchAsleep.Load() {
		select {
		case t.watchWake <- struct{}{}:
		default:
		}
	}
}

// watchdog hands a connection's reading over to a new goroutine when its handler has run
// through a whole tick.
func (t *Transport) watchdog() {
	defer t.wg.Done()
	tick := time.NewTicker(handOverTick)
	defer tick.Stop()
	idle := 0
	for {
		select {
		case <-t.closed:
			return
		case <-tick.C:
		}
		moved := false // a frame was handled since the last look, or a handler is under way
		t.watchMu.Lock()
		for rd := range t.readings {
			s := rd.seq.Load()
			moved = moved || s%2 == 1
			if s != rd.seen {
				rd.seen, moved = s, true
				continue
			}
			if s%2 == 1 && rd.seq.CompareAndSwap(s, s+1) { // in the same handler as a tick ago
				rd.seen = s + 1
				t.HandOvers.Add(1)
				t.wg.Add(1)
				go func() {
					defer t.wg.Done()
					t.readFrames(rd)
				}()
			}
		}
		t.watchMu.Unlock()
		if moved {
			idle = 0
			continue
		}
		if idle++; idle < handOverIdle {
			continue
		}
		idle = 0
		t.watchAsleep.Store(true)
		if t.readingsMoved() { // a reader that began a handler just before the store did not wake us
			t.watchAsleep.Store(false)
			continue
		}
		tick.Stop()
		select {
		case <-t.closed:
			return
		case <-t.watchWake:
		}
		t.watchAsleep.Store(false)
		tick.Reset(handOverTick)
	}
}

// readingsMoved reports whether a reading handled a frame since the watchdog's last look or is
// in a handler. With watchAsleep stored first, a reader that begins a handler after this look
// finds it set (its seq moves before it loads watchAsleep) and wakes the watchdog.
func (t *Transport) readingsMoved() bool {
	t.watchMu.Lock()
	defer t.watchMu.Unlock()
	for rd := range t.readings {
		if s := rd.seq.Load(); s != rd.seen || s%2 == 1 {
			return true
		}
	}
	return false
}

// Hello is a decoded hello.
type Hello struct {
	From, To  int32
	ClusterID string
	Addr      string // the dialer's cluster address; "" from a node that does not send it
}

// ParseHello decodes a hello body.
func ParseHello(body []byte) (Hello, error) {
	if len(body) < len(helloMagic) || string(body[:len(helloMagic)]) != helloMagic {
		return Hello{}, fmt.Errorf("%w: no magic", ErrBadHello)
	}
	r := kbin.Reader{Src: body[len(helloMagic):]}
	h := Hello{From: r.Int32(), To: r.Int32(), ClusterID: r.String()}
	if len(r.Src) > 0 {
		h.Addr = r.String()
	}
	if err := r.Complete(); err != nil {
		return Hello{}, fmt.Errorf("%w: %v", ErrBadHello, err)
	}
	return h, nil
}

func (t *Transport) checkHello(kind Kind, body []byte) (int32, string, error) {
	if kind != kindHello {
		return 0, "", fmt.Errorf("%w: first frame is kind %d", ErrBadHello, kind)
	}
	h, err := ParseHello(body)
	if err != nil {
		return 0, "", err
	}
	if h.To != t.cfg.NodeID {
		return 0, "", fmt.Errorf("%w: node %d dialed node %d, this is node %d", ErrBadHello, h.From, h.To, t.cfg.NodeID)
	}
	if mine := *t.clusterID.Load(); mine != "" && h.ClusterID != "" && mine != h.ClusterID {
		return 0, "", fmt.Errorf("%w: node %d is of cluster %q, this node of %q", ErrBadHello, h.From, h.ClusterID, mine)
	}
	return h.From, h.Addr, nil
}
