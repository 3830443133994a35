package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/twmb/franz-go/pkg/kgo"
)

// valueHeaderSize is the prefix of every record value: the intended send time, Unix
// nanoseconds, big-endian. See the package doc.
const valueHeaderSize = 8

// putIntended writes t into the value prefix.
func putIntended(value []byte, t time.Time) {
	binary.BigEndian.PutUint64(value, uint64(t.UnixNano()))
}

// intendedTime reads the value prefix; ok is false for a value too short to hold one.
func intendedTime(value []byte) (t time.Time, ok bool) {
	if len(value) < valueHeaderSize {
		return time.Time{}, false
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(value))), true
}

// window is the measured part of a run: intended send times in [start, end).
type window struct{ start, end time.Time }

func (w window) contains(t time.Time) bool { return !t.Before(w.start) && t.Before(w.end) }

// producerOpts turns the workload's producer fields into franz-go options. Linger, batch size,
// acks, compression and in-flight limit are always set explicitly, never left to the client's
// defaults. The bench adds no batching of its own: each record is one Produce call.
func producerOpts(w *Workload) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.ProducerLinger(time.Duration(w.Linger)),
		kgo.ProducerBatchMaxBytes(w.BatchMaxBytes),
		kgo.MaxBufferedRecords(w.MaxBuffered),
		kgo.ProducerBatchCompression(compressionCodec(w.Compression)),
	}
	switch w.Acks {
	case "all", "-1":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()))
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()))
	}
	if !w.Idempotence {
		opts = append(opts, kgo.DisableIdempotentWrite(), kgo.MaxProduceRequestsInflightPerBroker(w.MaxInFlight))
	}
	if w.Keys == KeysRoundRobin {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	return opts
}

func compressionCodec(name string) kgo.CompressionCodec {
	switch name {
	case "gzip":
		return kgo.GzipCompression()
	case "snappy":
		return kgo.SnappyCompression()
	case "lz4":
		return kgo.Lz4Compression()
	case "zstd":
		return kgo.ZstdCompression()
	}
	return kgo.NoCompression()
}

// producerStats are a producer's counters; the promise updates them from the client's goroutines.
type producerStats struct {
	sent          atomic.Int64 // Produce calls
	acked         atomic.Int64 // promises without error
	failed        atomic.Int64 // promises with an error
	ackedMeasured atomic.Int64 // acked with an intended time in the window
	bytesMeasured atomic.Int64 // their value bytes
}

// producer is one franz-go client sending one schedule's records.
type producer struct {
	id, of  int // this is producer id of `of`
	cl      *kgo.Client
	w       *Workload
	topics  []string
	sched   *Schedule // nil at maximum rate
	window  window
	latency *Recorder               // intended send -> ack
	lag     *hdrhistogram.Histogram // intended send -> Produce call in the measured window: the harness's own delay; only run writes it
	stats   producerStats
	errs    *errorLog
	rng     *rand.Rand
	filler  []byte
	free    chan *kgo.Record // records whose promise has run, for reuse
	unsent  int64            // intended times not sent before the hard deadline; set by run
}

func newProducer(id int, cl *kgo.Client, w *Workload, topics []string, sched *Schedule, win window, errs *errorLog) *producer {
	p := &producer{id: id, of: w.Producers, cl: cl, w: w, topics: topics, sched: sched, window: win,
		latency: NewRecorder(), lag: NewHistogram(), errs: errs,
		rng:  rand.New(rand.NewPCG(uint64(id), uint64(time.Now().UnixNano()))),
		free: make(chan *kgo.Record, w.MaxBuffered+1024)}
	// Random filler: compression sees incompressible data, as with OMB's random payloads.
	p.filler = make([]byte, w.RecordSize)
	for i := range p.filler {
		p.filler[i] = byte(p.rng.Uint32())
	}
	return p
}

// run produces until the schedule reaches end (or, at maximum rate, until end), or until ctx
// ends, which is the hard deadline for a producer that has fallen too far behind. Each record
// is produced with recordCtx.
func (p *producer) run(ctx, recordCtx context.Context, end time.Time) {
	for i := int64(0); ; i++ {
		var intended time.Time
		if p.sched != nil {
			intended = p.sched.Next()
			if !intended.Before(end) {
				return
			}
			if !waitUntil(ctx, intended) {
				p.noteUnsent(end, intended)
				return
			}
		} else {
			if intended = time.Now(); !intended.Before(end) || ctx.Err() != nil {
				return
			}
		}
		r := p.record(int64(p.of)*i+int64(p.id), intended)
		if p.window.contains(intended) {
			us, _ := histMicros(time.Since(intended))
			_ = p.lag.RecordValue(us) // in range by construction
		}
		p.stats.sent.Add(1)
		p.cl.Produce(recordCtx, r, p.promise)
	}
}

// noteUnsent counts the intended times from next (handed out, before end) up to end that were
// never sent.
func (p *producer) noteUnsent(end, next time.Time) {
	if !next.Before(end) {
		p.unsent = 0
		return
	}
	p.unsent = 1 + p.sched.CountBefore(end)
}

// record returns a record for global sequence number seq with the intended time in its value,
// reusing one whose promise has run.
func (p *producer) record(seq int64, intended time.Time) *kgo.Record {
	var r *kgo.Record
	select {
	case r = <-p.free:
		value, key := r.Value, r.Key
		*r = kgo.Record{Value: value, Key: key[:0]}
	default:
		r = &kgo.Record{Value: append([]byte(nil), p.filler...)}
	}
	t := len(p.topics)
	r.Topic = p.topics[seq%int64(t)]
	putIntended(r.Value, intended)
	switch p.w.Keys {
	case KeysRandom:
		r.Key = binary.BigEndian.AppendUint64(r.Key, p.rng.Uint64())
		r.Key = binary.BigEndian.AppendUint64(r.Key, p.rng.Uint64())
	case KeysRoundRobin:
		r.Partition = int32((seq / int64(t)) % int64(p.w.Partitions))
		r.Key = binary.BigEndian.AppendUint32(r.Key, uint32(r.Partition))
	default:
		r.Key = nil
	}
	return r
}

// promise runs on the client's goroutines once a record is acknowledged or has failed.
func (p *producer) promise(r *kgo.Record, err error) {
	now := time.Now()
	intended, _ := intendedTime(r.Value)
	if err != nil {
		p.stats.failed.Add(1)
		p.errs.add(fmt.Sprintf("produce to %s: %v", r.Topic, err))
	} else {
		measured := p.window.contains(intended)
		p.latency.Record(now.Sub(intended), measured)
		p.stats.acked.Add(1)
		if measured {
			p.stats.ackedMeasured.Add(1)
			p.stats.bytesMeasured.Add(int64(len(r.Value)))
		}
	}
	select {
	case p.free <- r:
	default:
	}
}
