package broker

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sync/semaphore"
)

// A Kafka connection carries size-prefixed frames. A request frame:
//
//	int32 size | int16 apiKey | int16 apiVersion | int32 correlationId | nullable string clientId
//	| tagged fields (flexible versions only) | body
//
// A response frame: int32 size | int32 correlationId | tagged fields (flexible, except
// ApiVersions) | body.
//
// The read loop parses requests and calls their handlers one at a time, in order, so effects
// (appends above all) happen in request order. A handler may leave work that waits (for an fsync,
// for fetch data) to run off the loop; the write loop sends responses strictly in request order,
// as Kafka requires of pipelined requests.

// request is one decoded request.
type request struct {
	conn     *conn
	key      int16
	version  int16
	corrID   int32
	clientID string
	req      kmsg.Request
}

// reply is a handler's answer. resp nil means no response (produce with acks=0). If wait is set,
// it runs off the read loop and resp is complete only once it returns.
type reply struct {
	resp  kmsg.Response
	wait  func()
	files *fileRanges // fetch record data to send from segment files (sendfile.go)
	// closeAfter closes the connection once the response is written (a failed
	// authentication), or, with no response (acks=0), once the responses before it are; the
	// error is why.
	closeAfter error
	// throttle is a quota the handler enforced itself (controller_mutation_rate): sent as
	// throttle_time_ms, and the connection is muted for it, as for the other quotas.
	throttle time.Duration
}

// inflight is a request between the read and write loops.
type inflight struct {
	r     *request
	reply reply
	size  int64         // bytes charged to the memory budgets
	done  chan struct{} // closed when reply.wait returned (nil if there was no wait)
	// throttle is what the client's quotas ask (quotas.go): sent as throttle_time_ms, and the
	// connection reads nothing more until it has passed after the response.
	throttle time.Duration
	stamps
}

type conn struct {
	act      activity // progress, for connections.max.idle.ms (watchIdle)
	b        *Broker
	mem      *semaphore.Weighted // this connection's in-flight request bytes
	nc       net.Conn
	remote   string
	out      chan *inflight // bounded: the write loop's queue
	zeroCopy bool           // plain TCP: fetches may use sendfile
	ctx      context.Context
	cancel   context.CancelFunc
	writeErr error       // why the write loop gave up; set before it cancels ctx
	idled    atomic.Bool // watchIdle closed the connection
	// readDone is closed when the read loop ends (the client closed the connection, or sent
	// what cannot be read): the answers of requests still in flight reach no one, so a long
	// poll that would take something for its client (share records) stops instead.
	readDone chan struct{}
	// software is the client's ClientSoftwareName (ApiVersions v3+, KIP-511); read loop only.
	software string

	// Security state, read loop only (sasl.go). listener is the listener the connection came
	// in on; principal is who the connection is ("User:ANONYMOUS" until authenticated).
	listener  *Listener
	principal string
	host      string // the client's IP address, as ACLs name hosts
	auth      authState

	// mutedUntil (unix ns): a throttled client's next request is not handled before then.
	mutedUntil atomic.Int64
}

// serveConn serves one accepted connection; ip is its client IP in canonical form ("": none).
func (b *Broker) serveConn(nc net.Conn, l *Listener, ip string) {
	ctx, cancel := context.WithCancel(b.ctx)
	_, isTCP := nc.(*net.TCPConn)
	c := &conn{b: b, mem: semaphore.NewWeighted(b.cfg.MaxConnInflightBytes), nc: nc, zeroCopy: isTCP && !b.cfg.DisableSendfile, remote: nc.RemoteAddr().String(), out: make(chan *inflight, b.cfg.MaxInflightRequests), ctx: ctx, cancel: cancel,
		readDone: make(chan struct{}), listener: l, principal: anonymous, host: aclHost(nc.RemoteAddr().String())}
	if c.overConnectionQuota(ip) {
		cancel()
		nc.Close()
		return
	}
	b.cfg.Metrics.ConnectionOpened()
	defer b.cfg.Metrics.ConnectionClosed()
	if l.Protocol.TLS() {
		if err := c.handshakeTLS(); err != nil {
			cancel()
			nc.Close()
			b.logger.Debug("broker: TLS handshake failed", "remote", c.remote, "listener", l.Name, "err", err)
			return
		}
	}
	c.act.touch()
	go c.watchIdle(nc)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); c.writeLoop() }()
	err := c.readLoop()
	close(c.readDone)
	close(c.out) // the write loop drains what is in flight, then exits
	wg.Wait()
	cancel()
	nc.Close()
	c.logClose(err)
}

// errCloseConn closes the connection without a response, as Kafka does for requests it cannot
// parse.
var errCloseConn = errors.New("broker: close connection")

// errDroppedByHook is why a connection closes when a test hook dropped a response.
var errDroppedByHook = errors.New("broker: a test hook dropped the response")

// saslMaxReceiveBytes bounds a request on a SASL listener before the client has authenticated
// (Kafka's sasl.server.max.receive.size): a client that has not logged in cannot make the
// node hold more for it.
const saslMaxReceiveBytes = 512 << 10

// Idle connections (connections.max.idle.ms): a connection that makes no progress for idle is
// closed, as Kafka's selector closes a channel without activity: progress is a byte read from
// it, a byte written to it, or its socket's send queue shrinking (a client draining a long
// response). A watchdog per connection looks every quarter of idle; reads and writes carry no
// deadline (a TLS connection cannot be written again after a write deadline passes).

// activity is when a connection last made progress, as monotonic time since monoBase (a wall
// clock step neither closes every connection nor keeps idle ones).
type activity struct{ last atomic.Int64 }

var monoBase = time.Now()

func (a *activity) touch()               { a.last.Store(int64(time.Since(monoBase))) }
func (a *activity) since() time.Duration { return time.Since(monoBase) - time.Duration(a.last.Load()) }
func (a *activity) progress(n int) {
	if n > 0 {
		a.touch()
	}
}

// progressConn counts a connection's reads and writes as progress.
type progressConn struct {
	net.Conn
	act *activity
}

func (p progressConn) Read(b []byte) (int, error) {
	n, err := p.Conn.Read(b)
	p.act.progress(n)
	return n, err
}

// Write writes b in pieces of at most progressChunk, each one progress: a large response
// written to a slow reader makes progress piece by piece.
func (p progressConn) Write(b []byte) (int, error) {
	written := 0
	for len(b) > 0 {
		n, err := p.Conn.Write(b[:min(len(b), progressChunk)])
		written += n
		p.act.progress(n)
		if err != nil {
			return written, err
		}
		b = b[n:]
	}
	return written, nil
}

// progressChunk is the most written to a connection at once (progressConn).
const progressChunk = 64 << 10

// watchIdle closes the connection once it has made no progress for connections.max.idle.ms;
// raw is the TCP connection under any TLS, whose send queue it watches. It returns when the
// connection ends.
func (c *conn) watchIdle(raw net.Conn) {
	idle := c.b.cfg.ConnectionsMaxIdle
	if idle <= 0 {
		return
	}
	t := time.NewTicker(max(idle/4, 10*time.Millisecond))
	defer t.Stop()
	lastQueue := -1
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		if q, ok := sendQueue(raw); ok {
			if q < lastQueue {
				c.act.touch() // the client takes what was sent
			}
			lastQueue = q
		}
		if c.act.since() >= idle {
			c.idled.Store(true)
			c.nc.Close()
			return
		}
	}
}

func (c *conn) readLoop() error {
	br := bufio.NewReaderSize(progressConn{c.nc, &c.act}, 64<<10)
	var sizeBuf [4]byte
	for {
		if _, err := io.ReadFull(br, sizeBuf[:]); err != nil {
			return err
		}
		readStart := time.Now()
		size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
		if size < 8 || size > c.b.cfg.MaxRequestBytes {
			return protocolError{fmt.Errorf("request frame of %d bytes is outside [8, %d] (socket.request.max.bytes)", size, c.b.cfg.MaxRequestBytes)}
		}
		if c.listener.Protocol.SASL() && (!c.auth.authenticated || c.auth.session != nil) && size > saslMaxReceiveBytes {
			// Before authentication, and during a re-authentication (Kafka reads those frames
			// with its SASL authenticator's limit too).
			return protocolError{fmt.Errorf("request frame of %d bytes during SASL authentication exceeds %d bytes (sasl.server.max.receive.size)", size, saslMaxReceiveBytes)}
		}
		if err := c.acquire(int64(size)); err != nil {
			return err
		}
		buf := make([]byte, size)
		if _, err := io.ReadFull(br, buf); err != nil {
			c.release(int64(size))
			return err
		}
		if err := c.waitMuted(); err != nil {
			c.release(int64(size))
			return err
		}
		f := &inflight{size: int64(size), stamps: stamps{readStart: readStart, received: time.Now()}}
		err := c.handleFrame(buf, f)
		f.handled = time.Now()
		if err != nil {
			c.release(f.size)
			return protocolError{err}
		}
		// A throttled request holds back the requests after it at once: a client may have
		// several in flight, and the connection is muted again from its response.
		c.requestQuotas(f)
		c.mute(f.throttle)
		if f.reply.resp == nil && f.reply.wait == nil && f.reply.closeAfter == nil {
			c.release(f.size)
			f.writing, f.written = f.handled, f.handled
			c.observe(f)
			continue
		}
		if f.reply.wait != nil {
			f.done = make(chan struct{})
			go func() { f.reply.wait(); f.waited = time.Now(); close(f.done) }()
		}
		select {
		case c.out <- f:
			if f.reply.closeAfter != nil {
				// The connection closes once this answer is written: nothing after it is
				// read, so a client cannot pipeline more work (another SASL attempt after a
				// failed one, with its CPU and its count against the host) behind it.
				return f.reply.closeAfter
			}
		case <-c.ctx.Done(): // the write loop gave up: this request never reaches it
			if f.done != nil {
				<-f.done
			}
			f.reply.files.release()
			c.release(f.size)
			return c.ctx.Err()
		}
	}
}

// handleFrame parses one request and runs its handler.
func (c *conn) handleFrame(buf []byte, f *inflight) error {
	rd := kbin.Reader{Src: buf}
	r := &request{conn: c, key: rd.Int16(), version: rd.Int16(), corrID: rd.Int32()}
	if id := rd.NullableString(); id != nil {
		r.clientID = *id
	}
	if !rd.Ok() {
		return fmt.Errorf("malformed request header")
	}
	f.r = r
	api, ok := apis[r.key]
	if !ok {
		return fmt.Errorf("unknown API key %d", r.key)
	}
	if err := c.admit(r.key); err != nil {
		return err
	}
	if r.version < api.min || r.version > api.max {
		if r.key == kmsg.ApiVersions.Int16() {
			f.reply = reply{resp: unsupportedApiVersions(r)}
			return nil
		}
		return fmt.Errorf("%s v%d is not supported (v%d-v%d)", kmsg.NameForKey(r.key), r.version, api.min, api.max)
	}
	req := kmsg.RequestForKey(r.key)
	req.SetVersion(r.version)
	if req.IsFlexible() {
		skipTags(&rd)
	}
	if !rd.Ok() {
		return fmt.Errorf("malformed %s v%d request header", kmsg.NameForKey(r.key), r.version)
	}
	if err := req.ReadFrom(rd.Src); err != nil {
		return fmt.Errorf("malformed %s v%d request: %w", kmsg.NameForKey(r.key), r.version, err)
	}
	r.req = req
	f.reply = authorize(c.ctx, r, api.handle)
	if f.reply.resp != nil {
		f.reply.resp.SetVersion(r.version)
	}
	return nil
}

func (c *conn) writeLoop() {
	bw := bufio.NewWriterSize(progressConn{c.nc, &c.act}, 64<<10)
	var buf []byte
	broken := false
	for f := range c.out {
		if f.done != nil {
			select {
			case <-f.done:
			default:
				// Its answer is not ready (a long poll, an acks=all commit): the answers before
				// it go out now rather than wait in the buffer for it, as Kafka sends each
				// response once it is ready.
				if !broken && bw.Buffered() > 0 {
					if err := bw.Flush(); err != nil {
						broken = true
						c.writeErr = fmt.Errorf("writing responses: %w", err)
						c.cancel()
						c.nc.Close()
					}
				}
				<-f.done
			}
		}
		f.writing = time.Now()
		if !broken && f.reply.resp != nil && c.b.cfg.Hooks.DropResponse != nil && c.b.cfg.Hooks.DropResponse(f.r.key, f.reply.resp) {
			broken = true
			c.writeErr = errDroppedByHook
			c.cancel()
			c.nc.Close()
		}
		if !broken && f.reply.resp != nil {
			buf = appendResponse(buf[:0], f.r, f.reply.resp)
			if c.responseQuotas(f, len(buf)) {
				buf = appendResponse(buf[:0], f.r, f.reply.resp) // with its throttle time
			}
			err := c.writeFrame(bw, buf, f.reply)
			if err == nil && (len(c.out) == 0 || f.reply.closeAfter != nil) { // flush when nothing else is ready to go
				err = bw.Flush()
			}
			if err == nil && f.reply.closeAfter != nil {
				err = f.reply.closeAfter
			}
			if err != nil {
				broken = true
				c.writeErr = fmt.Errorf("writing a %s response: %w", kmsg.NameForKey(f.r.key), err)
				if f.reply.closeAfter != nil && errors.Is(err, f.reply.closeAfter) {
					c.writeErr = err
				}
				c.cancel()
				c.nc.Close() // unblock the read loop
			} else {
				f.written = time.Now()
				c.mute(f.throttle)
				c.observe(f)
			}
		}
		if !broken && f.reply.resp == nil && f.reply.closeAfter != nil {
			// No response to send (acks=0): what went before goes out, then the connection
			// closes, the only way to tell such a client of an error.
			bw.Flush()
			broken = true
			c.writeErr = f.reply.closeAfter
			c.cancel()
			c.nc.Close()
		}
		f.reply.files.release()
		c.release(f.size)
	}
	if !broken {
		bw.Flush()
	}
}

// writeFrame writes one encoded response, splicing in file ranges if it has any.
func (c *conn) writeFrame(bw *bufio.Writer, frame []byte, rep reply) error {
	if rep.files == nil || len(rep.files.ranges) == 0 {
		_, err := bw.Write(frame)
		return err
	}
	pieces, err := spliceFrame(frame, rep.files.ranges, rep.resp.IsFlexible())
	if err != nil {
		return err
	}
	return writeSpliced(c.nc, bw, pieces, &c.act)
}

// appendResponse encodes a response frame.
func appendResponse(dst []byte, r *request, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(r.corrID))
	if resp.IsFlexible() && r.key != kmsg.ApiVersions.Int16() {
		dst = append(dst, 0) // empty tagged fields
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// acquire charges n request bytes to the connection's and the broker's in-flight budgets,
// waiting while either is spent: past the bound, a client is slowed down (its socket is not
// read), not answered with an out-of-memory failure. A request larger than a whole budget is
// charged the whole budget.
func (c *conn) acquire(n int64) error {
	m := c.b.cfg.Metrics
	connN, brokerN := min(n, c.b.cfg.MaxConnInflightBytes), min(n, c.b.cfg.MaxInflightBytes)
	if !c.mem.TryAcquire(connN) {
		m.InflightLimitWait("connection")
		if err := c.mem.Acquire(c.ctx, connN); err != nil {
			return err
		}
	}
	if !c.b.mem.TryAcquire(brokerN) {
		m.InflightLimitWait("broker")
		if err := c.b.mem.Acquire(c.ctx, brokerN); err != nil {
			c.mem.Release(connN)
			return err
		}
	}
	m.InflightBytes(n)
	return nil
}

func (c *conn) release(n int64) {
	c.b.mem.Release(min(n, c.b.cfg.MaxInflightBytes))
	c.mem.Release(min(n, c.b.cfg.MaxConnInflightBytes))
	c.b.cfg.Metrics.InflightBytes(-n)
}

// skipTags skips a tagged-field section like kmsg.SkipTags, but stops as soon as the reader is
// exhausted: a forged count of 2^32-1 tags must not spin the read loop.
func skipTags(rd *kbin.Reader) {
	for n := rd.Uvarint(); n > 0 && rd.Ok(); n-- {
		rd.Uvarint()
		rd.Span(int(rd.Uvarint()))
	}
}
