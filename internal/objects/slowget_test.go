package objects

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/objstore"
)

// blockedStore holds ranged GETs of keys holding block until release is closed.
type blockedStore struct {
	objstore.Store
	block   string
	release chan struct{}
}

func (s *blockedStore) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if strings.Contains(key, s.block) {
		select {
		case <-s.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.Store.GetRange(ctx, key, off, n)
}

// TestReadAnswersWithWhatItHas: a fetch's read (FetchBelow) that has batches in hand answers
// with them once its budget (500 ms) is spent, instead of waiting for the GET of the next
// section, which goes on for the next read. With GETs of 10 s a read that waited for every
// section up to its size outlasted the client's request timeout, every retry started over, and
// an object topic's consumer got nothing at all (the fifteenth round's slow S3). With the GET
// let go, the next read finds the section.
func TestReadAnswersWithWhatItHas(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dir := testDir(t)
	store := &blockedStore{Store: dir, block: "journal/r/1", release: make(chan struct{})}
	p := twoFilePartition(t, ctx, dir)
	c := NewCache(store, 1<<20, nil)
	start := time.Now()
	out, err := c.FetchBelow(ctx, p, 0, math.MaxInt64, 1<<20, true)
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := batch.ParseHeader(out); len(out) == 0 || h.BaseOffset != 0 || time.Since(start) > 5*time.Second {
		t.Fatalf("read with the second file's GET held: %d bytes (base %d) after %v; want the first file's batch at once", len(out), h.BaseOffset, time.Since(start))
	}
	next := int64(batchRecords(t, out))
	close(store.release) // the GET goes on; the next read finds it
	out, err = c.FetchBelow(ctx, p, next, math.MaxInt64, 1<<20, true)
	if h, _ := batch.ParseHeader(out); err != nil || len(out) == 0 || h.BaseOffset != next {
		t.Fatalf("the next read from %d: %d bytes, base %d, %v", next, len(out), h.BaseOffset, err)
	}
}

// batchRecords counts the records of the batches in b.
func batchRecords(t *testing.T, b []byte) int {
	t.Helper()
	n := 0
	for len(b) > 0 {
		h, err := batch.ParseHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		n += int(h.LastOffsetDelta) + 1
		b = b[h.Length+12:]
	}
	return n
}
