package objstore

import (
	"context"
	"time"
)

// WithTimeout bounds every call to s by d, so a call the store never answers (a lost
// connection, a hung server) fails instead of stalling its caller for good. A caller's own
// shorter deadline still applies.
func WithTimeout(s Store, d time.Duration) Store { return timeoutStore{s, d} }

type timeoutStore struct {
	inner Store
	d     time.Duration
}

func (t timeoutStore) Put(ctx context.Context, key string, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, t.d)
	defer cancel()
	return t.inner.Put(ctx, key, body)
}

func (t timeoutStore) PutIfAbsent(ctx context.Context, key string, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, t.d)
	defer cancel()
	return t.inner.PutIfAbsent(ctx, key, body)
}

func (t timeoutStore) Get(ctx context.Context, key string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, t.d)
	defer cancel()
	return t.inner.Get(ctx, key)
}

func (t timeoutStore) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, t.d)
	defer cancel()
	return t.inner.GetRange(ctx, key, off, n)
}

func (t timeoutStore) Delete(ctx context.Context, key string) error {
	ctx, cancel := context.WithTimeout(ctx, t.d)
	defer cancel()
	return t.inner.Delete(ctx, key)
}

func (t timeoutStore) List(ctx context.Context, prefix, startAfter string, limit int) ([]Object, error) {
	ctx, cancel := context.WithTimeout(ctx, t.d)
	defer cancel()
	return t.inner.List(ctx, prefix, startAfter, limit)
}

func (t timeoutStore) String() string { return t.inner.String() }
