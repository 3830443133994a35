// Package appendmux carries SpecLog appends over one AppendStream per connection: any number
// in flight, each answered by its id. A unary Append costs a new HTTP/2 stream and its headers
// per append; a message on an open stream costs neither (docs/speclog.md §6). A node that has
// no AppendStream is sent unary Appends.
package appendmux

import (
	"context"
	"errors"
	"io"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/runnel-dev/runnel/speclog/speclogpb"
)

// Mux sends appends to one node.
type Mux struct {
	api pb.SpecLogClient

	mu      sync.Mutex
	cur     *stream       // nil: none open
	opening chan struct{} // non-nil while an append opens a stream; closed once it is done
	unary   bool          // the node has no AppendStream
	closed  bool
	nextID  uint64
	sendMu  sync.Mutex // one sender at a time (gRPC streams allow one)
	streams sync.WaitGroup
}

// stream is one open AppendStream and the appends waiting for its answers.
type stream struct {
	st      pb.SpecLog_AppendStreamClient
	cancel  context.CancelFunc
	mu      sync.Mutex
	pending map[uint64]chan result
	err     error // set once the stream broke: every later wait fails with it
}

type result struct {
	resp *pb.AppendResponse
	err  error
}

// New returns a Mux sending over api's connection.
func New(api pb.SpecLogClient) *Mux { return &Mux{api: api} }

// Append appends as pb.SpecLogClient.Append does and answers what it would: the response, or
// a status error with Append's code. If the stream breaks before the answer, the append may
// or may not have been stored: it fails with codes.Unavailable, as a unary call whose
// connection broke. If ctx ends while the append is being sent (a node that stopped reading
// holds sends), the stream is closed, failing the other appends on it the same way; if it
// ends while the answer is awaited, or before the append is sent (while the stream is opened,
// or before Append is called), only this append gives up.
func (m *Mux) Append(ctx context.Context, req *pb.AppendRequest) (*pb.AppendResponse, error) {
	s, id, ch, err := m.register(ctx)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil && s != nil {
		// Ended already: nothing is sent, and AfterFunc below would close at once the stream
		// the other appends wait on.
		s.mu.Lock()
		delete(s.pending, id)
		s.mu.Unlock()
		return nil, status.FromContextError(err).Err()
	}
	if s == nil {
		return m.api.Append(ctx, req)
	}
	stop := context.AfterFunc(ctx, func() { m.broken(s, ctx.Err()) })
	m.sendMu.Lock()
	err = s.st.Send(&pb.AppendStreamRequest{Id: id, Append: req})
	m.sendMu.Unlock()
	if !stop() {
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	if err != nil && err != io.EOF { // io.EOF: the stream ended, and receive gets its status
		m.broken(s, err)
	}
	select {
	case r := <-ch:
		if status.Code(r.err) == codes.Unimplemented { // refused whole: nothing was stored
			return m.api.Append(ctx, req)
		}
		return r.resp, r.err
	case <-ctx.Done():
		s.mu.Lock()
		delete(s.pending, id)
		s.mu.Unlock()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
}

// register returns the open stream (opening one if needed) with a new id and the channel its
// answer comes on; a nil stream means unary. Opening waits for the connection, which may take
// until gRPC's connect timeout on a node that accepts and says nothing: it is bounded by ctx,
// and done without m.mu so that the other appends (and Close) are not held meanwhile; they
// wait for it, each until its own ctx ends.
func (m *Mux) register(ctx context.Context) (*stream, uint64, chan result, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for {
		if m.closed {
			return nil, 0, nil, status.Error(codes.Canceled, "speclog: the client is closed")
		}
		if m.unary {
			return nil, 0, nil, nil
		}
		if m.cur != nil {
			break
		}
		if m.opening != nil { // another append is opening it
			opening := m.opening
			m.mu.Unlock()
			select {
			case <-opening:
			case <-ctx.Done():
			}
			m.mu.Lock()
			if err := ctx.Err(); err != nil {
				return nil, 0, nil, status.FromContextError(err).Err()
			}
			continue
		}
		if err := m.open(ctx); err != nil {
			return nil, 0, nil, err
		}
	}
	s := m.cur
	m.nextID++
	ch := make(chan result, 1)
	s.mu.Lock()
	if s.err != nil { // broke since: the caller tries again
		err := s.err
		s.mu.Unlock()
		return nil, 0, nil, err
	}
	s.pending[m.nextID] = ch
	s.mu.Unlock()
	return s, m.nextID, ch, nil
}

// open opens a stream as m.cur, unlocking m.mu meanwhile (held on entry and on return); ctx
// bounds the opening, not the stream.
func (m *Mux) open(ctx context.Context) error {
	opening := make(chan struct{})
	m.opening = opening
	m.mu.Unlock()
	sctx, cancel := context.WithCancel(context.Background()) // outlives this call
	stop := context.AfterFunc(ctx, cancel)
	st, err := m.api.AppendStream(sctx)
	ended := !stop()
	m.mu.Lock()
	m.opening = nil
	close(opening)
	switch {
	case ended:
		cancel()
		return status.FromContextError(ctx.Err()).Err()
	case err != nil:
		cancel()
		if status.Code(err) == codes.Unimplemented {
			m.unary = true
			return nil
		}
		return err
	case m.closed: // closed meanwhile: the loop refuses
		cancel()
		return nil
	}
	m.cur = &stream{st: st, cancel: cancel, pending: map[uint64]chan result{}}
	m.streams.Add(1)
	go m.receive(m.cur)
	return nil
}

// receive hands the stream's answers to their waiters until it breaks.
func (m *Mux) receive(s *stream) {
	defer m.streams.Done()
	for {
		resp, err := s.st.Recv()
		if err != nil {
			if status.Code(err) == codes.Unimplemented { // a node without AppendStream answers at once
				m.mu.Lock()
				m.unary = true
				m.mu.Unlock()
			}
			m.broken(s, err)
			return
		}
		r := result{resp: resp.GetAppend()}
		if resp.GetCode() != 0 {
			r = result{err: status.Error(codes.Code(resp.GetCode()), resp.GetMessage())}
		}
		s.mu.Lock()
		ch := s.pending[resp.GetId()]
		delete(s.pending, resp.GetId())
		s.mu.Unlock()
		if ch != nil {
			ch <- r
		}
	}
}

// broken closes s after err: its waiters fail with Unavailable (their appends may have been
// stored), and the next append opens a new stream.
func (m *Mux) broken(s *stream, err error) {
	m.mu.Lock()
	if m.cur == s {
		m.cur = nil
	}
	m.mu.Unlock()
	s.cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return
	}
	switch {
	case status.Code(err) == codes.Unimplemented: // the node has no AppendStream: nothing was stored
		s.err = status.Errorf(codes.Unimplemented, "speclog: the append stream broke: %v", err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		s.err = status.Errorf(codes.Unavailable, "speclog: the append stream was closed: an append on it timed out (this one may have been stored; retry)")
	default:
		s.err = status.Errorf(codes.Unavailable, "speclog: the append stream broke: %v (the append may have been stored; retry)", err)
	}
	for id, ch := range s.pending {
		ch <- result{err: s.err}
		delete(s.pending, id)
	}
}

// Close closes the open stream (its appends fail with Unavailable) and waits for its receiver.
func (m *Mux) Close() {
	m.mu.Lock()
	m.closed = true
	s := m.cur
	m.mu.Unlock()
	if s != nil {
		m.broken(s, errors.New("closed"))
	}
	m.streams.Wait()
}
