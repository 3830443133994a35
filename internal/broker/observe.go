package broker

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"reflect"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/metrics"
)

// What the connection loop reports: request metrics (count, latency, error codes), the
// slow-request log line, each topic's data sent by fetches, and one log line for every error
// that closes a connection.

// DefaultSlowRequestThreshold is how long a request may take before it is logged as slow.
const DefaultSlowRequestThreshold = 500 * time.Millisecond

// stamps are the moments a request passed through the connection's stages. The read loop sets
// the first three; the wait goroutine sets waited before it closes done; the write loop sets the
// last two after done.
type stamps struct {
	readStart time.Time // the size prefix was read; the memory budget and the body come next
	received  time.Time // the whole frame was read
	handled   time.Time // parsed and handled on the read loop
	waited    time.Time // reply.wait returned (zero without a wait)
	writing   time.Time // the write loop took the response up
	written   time.Time // the response was written (for no response: when it was handled)
}

// protocolError is a request the broker will not serve (unparseable, unknown API, unsupported
// version, frame size out of bounds): it closes the connection.
type protocolError struct{ error }

func (e protocolError) Unwrap() error { return e.error }

// observe reports a request that is done: its response written, or handled without one.
func (c *conn) observe(f *inflight) {
	m := c.b.cfg.Metrics
	total := f.written.Sub(f.readStart)
	if m != nil && f.reply.resp != nil {
		eachErrorCode(f.reply.resp, func(code int16) { m.ErrorCode(f.r.key, code) })
		c.countFetched(f)
	}
	if f.r.key == kmsg.Produce.Int16() && f.reply.resp != nil {
		ready, commit := f.handled, time.Duration(0)
		if !f.waited.IsZero() {
			ready, commit = f.waited, f.waited.Sub(f.handled)
		}
		req, _ := f.r.req.(*kmsg.ProduceRequest)
		m.Produce(metrics.ProduceStages{f.received.Sub(f.readStart), f.handled.Sub(f.received), commit, f.writing.Sub(ready), f.written.Sub(f.writing)},
			func(yield func(string) bool) {
				if req == nil {
					return
				}
				for i := range req.Topics {
					if !yield(req.Topics[i].Topic) {
						return
					}
				}
			})
	}
	m.Request(f.r.key, total) // last: once a request is counted, all it counts is in
	c.logIfSlow(f, total)
}

// logIfSlow logs a request that took longer than the threshold, with where its time went. A
// fetch may take its long-poll wait (MaxWaitMillis) on top, as asked, and JoinGroup and
// SyncGroup their wait for the rebalance.
func (c *conn) logIfSlow(f *inflight, total time.Duration) {
	limit := c.b.cfg.SlowRequestThreshold
	if limit == 0 {
		limit = DefaultSlowRequestThreshold
	}
	if limit < 0 {
		return
	}
	ready, wait := f.handled, time.Duration(0)
	if !f.waited.IsZero() {
		ready, wait = f.waited, f.waited.Sub(f.handled)
	}
	switch r := f.r.req.(type) { // requests that wait by design do not count their wait
	case *kmsg.FetchRequest:
		limit += time.Duration(r.MaxWaitMillis) * time.Millisecond
	case *kmsg.ShareFetchRequest:
		limit += time.Duration(r.MaxWaitMillis) * time.Millisecond
	case *kmsg.JoinGroupRequest, *kmsg.SyncGroupRequest: // until the rebalance completes
		limit += wait
	}
	if total <= limit {
		return
	}
	c.b.logger.Warn("slow request", "api", kmsg.NameForKey(f.r.key), "version", f.r.version,
		"client_id", f.r.clientID, "remote", c.remote, "correlation_id", f.r.corrID,
		"total_ms", millis(total),
		"read_ms", millis(f.received.Sub(f.readStart)), // the body, and waiting for the memory budget
		"handle_ms", millis(f.handled.Sub(f.received)), // parse and handler, on the read loop
		"wait_ms", millis(wait), // off the read loop: fsync for acks=all, fetch reads and long poll
		"queue_ms", millis(max(0, f.writing.Sub(ready))), // ready, behind earlier responses
		"write_ms", millis(f.written.Sub(f.writing)))
}

// millis is d in milliseconds, to the microsecond.
func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// logClose logs, once, the error that closed the connection: a failed write if there was one
// (the read loop then fails too, only because of it), else what ended the read loop. A client
// that hangs up, and the broker shutting down, are not errors.
func (c *conn) logClose(readErr error) {
	if c.idled.Load() { // as Kafka's, an idle close is no error: counted, logged at debug
		c.b.cfg.Metrics.ConnectionError(metrics.ReasonIdle)
		c.b.logger.Debug("broker: closed an idle connection (connections.max.idle.ms)", "remote", c.remote, "idle", c.b.cfg.ConnectionsMaxIdle)
		return
	}
	reason, err := metrics.ReasonWrite, c.writeErr
	if err == nil {
		reason, err = metrics.ReasonRead, readErr
		if errors.As(err, new(protocolError)) {
			reason = metrics.ReasonProtocol
		}
	}
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) ||
		(c.b.stopping.Load() && errors.Is(err, context.Canceled)) {
		return
	}
	c.b.cfg.Metrics.ConnectionError(reason)
	c.b.logger.Info("broker: closing connection", "remote", c.remote, "on", reason, "reason", err)
}

// eachErrorCode calls fn with every non-zero error code in resp: top-level, per topic, per
// partition. The hot APIs are walked directly; the others by reflection over their ErrorCode
// fields.
func eachErrorCode(resp kmsg.Response, fn func(int16)) {
	report := func(code int16) {
		if code != 0 {
			fn(code)
		}
	}
	switch r := resp.(type) {
	case *kmsg.ProduceResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				report(p.ErrorCode)
			}
		}
	case *kmsg.FetchResponse:
		report(r.ErrorCode)
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				report(p.ErrorCode)
			}
		}
	case *kmsg.MetadataResponse:
		for _, t := range r.Topics {
			report(t.ErrorCode)
			for _, p := range t.Partitions {
				report(p.ErrorCode)
			}
		}
	case *kmsg.ListOffsetsResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				report(p.ErrorCode)
			}
		}
	default:
		walkErrorCodes(reflect.ValueOf(resp), report)
	}
}

// walkErrorCodes calls fn with the value of every int16 field named ErrorCode in v, in nested
// structs, pointers and slices too.
func walkErrorCodes(v reflect.Value, fn func(int16)) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			walkErrorCodes(v.Elem(), fn)
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return
		}
		for i := range v.Len() {
			walkErrorCodes(v.Index(i), fn)
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			field := t.Field(i)
			if !field.IsExported() {
				continue
			}
			if field.Name == "ErrorCode" && field.Type.Kind() == reflect.Int16 {
				fn(int16(v.Field(i).Int()))
				continue
			}
			walkErrorCodes(v.Field(i), fn)
		}
	}
}

// countFetched counts each topic's record bytes and records in a fetch response that was sent.
// Zero-copy partitions are counted from their file ranges, reading only batch headers.
func (c *conn) countFetched(f *inflight) {
	resp, ok := f.reply.resp.(*kmsg.FetchResponse)
	if !ok {
		return
	}
	var ranges []*fileRange
	if f.reply.files != nil {
		ranges = f.reply.files.ranges // the wait is over: nobody adds to them any more
	}
	for _, t := range resp.Topics {
		var size, records int
		for _, p := range t.Partitions {
			if len(p.RecordBatches) == 0 {
				continue
			}
			if len(ranges) > 0 && bytes.Equal(p.RecordBatches, ranges[0].marker[:]) {
				s := ranges[0].slice
				ranges = ranges[1:]
				size += s.Size
				records += countRecords(s.File, s.Position, s.Size)
				continue
			}
			size += len(p.RecordBatches)
			records += countRecords(bytes.NewReader(p.RecordBatches), 0, len(p.RecordBatches))
		}
		if size > 0 {
			c.b.cfg.Metrics.Fetched(t.Topic, size, records)
		}
	}
}

// countRecords adds up the record counts in the headers of the batches in size bytes of r from
// pos, stopping at the first incomplete header.
func countRecords(r io.ReaderAt, pos int64, size int) int {
	var buf [batch.HeaderSize]byte
	n := 0
	for off := 0; off+batch.HeaderSize <= size; {
		if _, err := r.ReadAt(buf[:], pos+int64(off)); err != nil {
			break
		}
		h, err := batch.ParseHeader(buf[:])
		if err != nil || h.Length <= 0 {
			break
		}
		n += int(h.RecordCount)
		off += h.Size()
	}
	return n
}
