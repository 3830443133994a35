package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/runnel-dev/runnel/internal/testclients"
)

// conformance checks what every Store promises.
func conformance(t *testing.T, s Store) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	get := func(key string) string {
		t.Helper()
		b, err := s.Get(ctx, key)
		if err != nil {
			t.Fatalf("Get(%s) = %v", key, err)
		}
		return string(b)
	}

	must(s.Put(ctx, "f/one", []byte("first")))
	if got := get("f/one"); got != "first" {
		t.Errorf("Get after Put = %q", got)
	}
	must(s.Put(ctx, "f/one", []byte("second")))
	if got := get("f/one"); got != "second" {
		t.Errorf("Get after overwrite = %q", got)
	}
	must(s.Put(ctx, "f/empty", nil))
	if got := get("f/empty"); got != "" {
		t.Errorf("empty object = %q", got)
	}
	if _, err := s.Get(ctx, "f/missing"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get(missing) = %v; want ErrNotFound", err)
	}

	// Conditional writes: the first wins, of many at once exactly one.
	must(s.PutIfAbsent(ctx, "c/k", []byte("mine")))
	if err := s.PutIfAbsent(ctx, "c/k", []byte("theirs")); !errors.Is(err, ErrExists) {
		t.Errorf("PutIfAbsent(existing) = %v; want ErrExists", err)
	}
	if got := get("c/k"); got != "mine" {
		t.Errorf("after a refused PutIfAbsent: %q", got)
	}
	var wg sync.WaitGroup
	results := make([]error, 8)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = s.PutIfAbsent(ctx, "c/race", bytes.Repeat([]byte{byte('a' + i)}, 64<<10))
		}()
	}
	wg.Wait()
	winner := -1
	for i, err := range results {
		switch {
		case err == nil && winner >= 0:
			t.Errorf("PutIfAbsent racers %d and %d both won", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, ErrExists):
			t.Errorf("racer %d: %v", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no PutIfAbsent racer won")
	}
	if b, err := s.Get(ctx, "c/race"); err != nil || !bytes.Equal(b, bytes.Repeat([]byte{byte('a' + winner)}, 64<<10)) {
		t.Errorf("the race's object is not the winner's (%v)", err)
	}

	// Ranged reads.
	must(s.Put(ctx, "r/obj", []byte("0123456789")))
	for _, c := range []struct {
		off, n int64
		want   string
	}{{0, 4, "0123"}, {3, 4, "3456"}, {8, 10, "89"}, {9, 1, "9"}} {
		b, err := s.GetRange(ctx, "r/obj", c.off, c.n)
		if err != nil || string(b) != c.want {
			t.Errorf("GetRange(%d, %d) = %q, %v; want %q", c.off, c.n, b, err, c.want)
		}
	}
	if _, err := s.GetRange(ctx, "r/obj", 10, 1); !errors.Is(err, ErrRange) {
		t.Errorf("GetRange at the end = %v; want ErrRange", err)
	}
	if _, err := s.GetRange(ctx, "r/none", 0, 1); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetRange(missing) = %v; want ErrNotFound", err)
	}

	// Delete, twice.
	must(s.Delete(ctx, "f/one"))
	must(s.Delete(ctx, "f/one"))
	if _, err := s.Get(ctx, "f/one"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get after Delete = %v", err)
	}

	// Listing in key order, with prefix, start and limit.
	for _, k := range []string{"l/a/b/1", "l/a/b/2", "l/a-c", "l/a/c", "l/b"} {
		must(s.Put(ctx, k, []byte(k)))
	}
	keys := func(prefix, after string, limit int) string {
		t.Helper()
		objs, err := s.List(ctx, prefix, after, limit)
		if err != nil {
			t.Fatalf("List(%q, %q, %d) = %v", prefix, after, limit, err)
		}
		var ks []string
		for _, o := range objs {
			if o.Size != int64(len(o.Key)) {
				t.Errorf("List: %s has size %d; want %d", o.Key, o.Size, len(o.Key))
			}
			ks = append(ks, o.Key)
		}
		return strings.Join(ks, " ")
	}
	for _, c := range []struct {
		prefix, after string
		limit         int
		want          string
	}{
		{"l/", "", 0, "l/a-c l/a/b/1 l/a/b/2 l/a/c l/b"},
		{"l/a/", "", 0, "l/a/b/1 l/a/b/2 l/a/c"},
		{"l/a/", "l/a/b/1", 0, "l/a/b/2 l/a/c"},
		{"l/a", "", 2, "l/a-c l/a/b/1"},
		{"l/zz", "", 0, ""},
	} {
		if got := keys(c.prefix, c.after, c.limit); got != c.want {
			t.Errorf("List(%q, after %q, limit %d) = %q; want %q", c.prefix, c.after, c.limit, got, c.want)
		}
	}

	for _, bad := range []string{"", "/x", "a//b", "a/../b", "./a", "a/.tmp-x"} {
		if err := s.Put(ctx, bad, nil); !errors.Is(err, ErrBadKey) {
			t.Errorf("Put(%q) = %v; want ErrBadKey", bad, err)
		}
	}
}

func TestDir(t *testing.T) {
	root := t.TempDir()
	d, err := OpenDir(root)
	if err != nil {
		t.Fatal(err)
	}
	conformance(t, d)

	// A crash's leftovers: an old temporary file goes at the next open, a fresh one (another
	// process's write in progress) stays; neither is listed.
	old, fresh := filepath.Join(root, "l", tmpPrefix+"old"), filepath.Join(root, "l", tmpPrefix+"fresh")
	for _, p := range []string{old, fresh} {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	past := time.Now().Add(-2 * time.Hour)
	os.Chtimes(old, past, past)
	if objs, _ := d.List(context.Background(), "l/", "", 0); slices.ContainsFunc(objs, func(o Object) bool { return strings.Contains(o.Key, tmpPrefix) }) {
		t.Errorf("List shows temporary files: %v", objs)
	}
	if _, err := OpenDir(root); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(old); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an hour-old temporary file survived the open: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("a fresh temporary file was removed: %v", err)
	}
}

func TestOpenURLs(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	if s.String() != "file://"+dir {
		t.Errorf("String() = %q", s.String())
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	if _, err := Open(ctx, "s3://b/p"); err == nil || !strings.Contains(err.Error(), "AWS_ACCESS_KEY_ID") {
		t.Errorf("Open(s3) without credentials = %v; want an error naming the variables", err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "k")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "s")
	for _, bad := range []string{"ftp://x/y", "file://relative/dir", "file:", "s3:///prefix", "s3://b/p?acl=public", "s3://b/a/../c",
		"s3://b/p?endpoint=127.0.0.1:9000"} {
		if _, err := Open(ctx, bad); err == nil {
			t.Errorf("Open(%q) accepted", bad)
		}
	}
}

func TestFaulty(t *testing.T) {
	ctx := context.Background()
	d, err := OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := NewFaulty(d, 1)
	conformance(t, f) // no faults: a plain store
	if f.Calls("put") == 0 || f.Calls("get") == 0 {
		t.Errorf("calls not counted: put %d get %d", f.Calls("put"), f.Calls("get"))
	}

	f.Set(Faults{ErrorRate: 1})
	if err := f.Put(ctx, "x/failed", []byte("v")); !errors.Is(err, ErrInjected) {
		t.Errorf("Put with ErrorRate 1 = %v", err)
	}
	if _, err := d.Get(ctx, "x/failed"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a failed Put wrote: %v", err)
	}
	f.Set(Faults{SlowDownRate: 1})
	if _, err := f.Get(ctx, "x/failed"); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Get with SlowDownRate 1 = %v", err)
	}
	f.Set(Faults{LostReplyRate: 1})
	if err := f.PutIfAbsent(ctx, "x/lost", []byte("v")); !errors.Is(err, ErrInjected) {
		t.Errorf("PutIfAbsent with a lost reply = %v", err)
	}
	if b, err := d.Get(ctx, "x/lost"); err != nil || string(b) != "v" {
		t.Errorf("a write whose reply was lost was not carried out: %q %v", b, err)
	}
	f.Set(Faults{TimeoutRate: 1})
	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	if _, err := f.List(tctx, "", "", 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("List with TimeoutRate 1 = %v", err)
	}
	cancel()
	f.Set(Faults{Latency: 30 * time.Millisecond})
	start := time.Now()
	if _, err := f.Get(ctx, "x/lost"); err != nil || time.Since(start) < 30*time.Millisecond {
		t.Errorf("Get with 30 ms latency: %v after %v", err, time.Since(start))
	}
	f.Set(Faults{ErrorRate: 0.5})
	failed := 0
	for i := range 400 {
		if f.Put(ctx, fmt.Sprintf("x/p%d", i), nil) != nil {
			failed++
		}
	}
	if failed < 140 || failed > 260 {
		t.Errorf("ErrorRate 0.5: %d of 400 failed", failed)
	}
}

// TestS3 runs the conformance checks against a real S3-compatible server: versitygw, started
// here with scripts/s3server.sh (built once by `scripts/s3server.sh install`, which .ci/run runs).
func TestS3(t *testing.T) {
	endpoint := testclients.S3(t)
	ctx := context.Background()
	admin := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider("runnel-test", "runnel-test-secret", "")})
	s, err := Open(ctx, "s3://runnel/cluster-1?endpoint="+endpoint)
	if err != nil {
		t.Fatal(err)
	}
	conformance(t, s)
	// The prefix keeps the store's objects apart from the rest of the bucket.
	if _, err := admin.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("runnel"), Key: aws.String("cluster-1/l/b")}); err != nil {
		t.Errorf("object not under the prefix: %v", err)
	}
	// A store that is not there: a clear error, not a hang.
	gone, err := Open(ctx, "s3://runnel/x?endpoint=http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := gone.Put(cctx, "k", nil); err == nil {
		t.Error("Put to an unreachable store succeeded")
	}
}

func FuzzCheckKey(f *testing.F) {
	for _, k := range []string{"a/b", "", "/a", "a//b", "../a", "a/.tmp-1", "a/./b"} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, key string) {
		if CheckKey(key) != nil {
			return
		}
		root := "/store"
		p := filepath.Join(root, filepath.FromSlash(key))
		if !strings.HasPrefix(p, root+"/") || filepath.ToSlash(strings.TrimPrefix(p, root+"/")) != key {
			t.Fatalf("key %q maps to %q, outside the store or not one to one", key, p)
		}
	})
}
