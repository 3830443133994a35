package objstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// Faults are what a Faulty store does to the calls going through it. Rates are shares of the
// calls, from 0 to 1, drawn independently per call.
type Faults struct {
	Latency      time.Duration // added before every call
	Jitter       time.Duration // and up to this much more, uniformly (S3 Express-like 10-20 ms: 10 ms + 10 ms)
	ErrorRate    float64       // the call fails at once with an error (nothing happens)
	SlowDownRate float64       // the call fails at once with ErrUnavailable (S3's 503 SlowDown)
	TimeoutRate  float64       // the call hangs until its context ends (nothing happens)
	// LostReplyRate: a write or delete is carried out, then reported failed (the answer was
	// lost): a caller must not take an error for "not written".
	LostReplyRate float64
}

// ErrInjected is the error of an injected failure.
var ErrInjected = errors.New("objstore: injected failure")

// Faulty wraps a store and injects faults into its calls, for tests. Its zero faults pass every
// call through. It counts calls by operation.
type Faulty struct {
	inner Store

	mu     sync.Mutex
	faults Faults
	rnd    *rand.Rand
	calls  map[string]int64
}

// NewFaulty wraps inner; seed makes the draws reproducible.
func NewFaulty(inner Store, seed uint64) *Faulty {
	return &Faulty{inner: inner, rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), calls: map[string]int64{}}
}

// Set replaces the faults.
func (f *Faulty) Set(faults Faults) {
	f.mu.Lock()
	f.faults = faults
	f.mu.Unlock()
}

// Calls returns how many calls of an operation ("put", "get", "delete", "list") came in.
func (f *Faulty) Calls(op string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

func (f *Faulty) String() string { return "faulty(" + f.inner.String() + ")" }

type outcome int

const (
	pass outcome = iota
	fail
	slowDown
	hang
	lostReply
)

// draw counts a call and decides its fate.
func (f *Faulty) draw(op string, write bool) (outcome, time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[op]++
	fs := f.faults
	if fs.Jitter > 0 {
		fs.Latency += time.Duration(f.rnd.Int64N(int64(fs.Jitter) + 1))
	}
	x := f.rnd.Float64()
	switch {
	case x < fs.ErrorRate:
		return fail, fs.Latency
	case x < fs.ErrorRate+fs.SlowDownRate:
		return slowDown, fs.Latency
	case x < fs.ErrorRate+fs.SlowDownRate+fs.TimeoutRate:
		return hang, fs.Latency
	case write && x < fs.ErrorRate+fs.SlowDownRate+fs.TimeoutRate+fs.LostReplyRate:
		return lostReply, fs.Latency
	}
	return pass, fs.Latency
}

// before counts a call, waits its latency and runs its fault; a non-nil error means the call must
// not go on (the error is its result).
func (f *Faulty) before(ctx context.Context, op string, write bool) (outcome, error) {
	o, lat := f.draw(op, write)
	if lat > 0 {
		t := time.NewTimer(lat)
		select {
		case <-ctx.Done():
			t.Stop()
			return fail, ctx.Err()
		case <-t.C:
		}
	}
	switch o {
	case fail:
		return o, fmt.Errorf("%w: %s", ErrInjected, op)
	case slowDown:
		return o, fmt.Errorf("%w: %s: injected 503 SlowDown", ErrUnavailable, op)
	case hang:
		<-ctx.Done()
		return o, ctx.Err()
	}
	return o, nil
}

// after turns a carried-out write into a failure when its reply is to be lost.
func after(o outcome, op string, err error) error {
	if err == nil && o == lostReply {
		return fmt.Errorf("%w: %s carried out, reply lost", ErrInjected, op)
	}
	return err
}

func (f *Faulty) Put(ctx context.Context, key string, body []byte) error {
	o, err := f.before(ctx, "put", true)
	if err != nil {
		return err
	}
	return after(o, "put", f.inner.Put(ctx, key, body))
}

func (f *Faulty) PutIfAbsent(ctx context.Context, key string, body []byte) error {
	o, err := f.before(ctx, "put", true)
	if err != nil {
		return err
	}
	return after(o, "put", f.inner.PutIfAbsent(ctx, key, body))
}

func (f *Faulty) Get(ctx context.Context, key string) ([]byte, error) {
	if _, err := f.before(ctx, "get", false); err != nil {
		return nil, err
	}
	return f.inner.Get(ctx, key)
}

func (f *Faulty) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if _, err := f.before(ctx, "get", false); err != nil {
		return nil, err
	}
	return f.inner.GetRange(ctx, key, off, n)
}

func (f *Faulty) Delete(ctx context.Context, key string) error {
	o, err := f.before(ctx, "delete", true)
	if err != nil {
		return err
	}
	return after(o, "delete", f.inner.Delete(ctx, key))
}

func (f *Faulty) List(ctx context.Context, prefix, startAfter string, limit int) ([]Object, error) {
	if _, err := f.before(ctx, "list", false); err != nil {
		return nil, err
	}
	return f.inner.List(ctx, prefix, startAfter, limit)
}
