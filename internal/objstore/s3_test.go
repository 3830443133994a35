package objstore

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/runnel-dev/runnel/internal/testclients"
)

// TestS3PutIfAbsentRetryAfterLostReply: a conditional PUT reached the server and was carried
// out, but its reply was lost (here a proxy answers 500 instead); the SDK retried, the retry
// found the object (412), and PutIfAbsent answered ErrExists for an object only it had written.
func TestS3PutIfAbsentRetryAfterLostReply(t *testing.T) {
	endpoint := testclients.S3(t)
	target, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	var puts atomic.Int32
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(resp *http.Response) error {
		if resp.Request.Method == http.MethodPut && puts.Add(1) == 1 {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			body := `<?xml version="1.0" encoding="UTF-8"?><Error><Code>InternalError</Code><Message>lost</Message></Error>`
			resp.StatusCode, resp.Status = http.StatusInternalServerError, "500 Internal Server Error"
			resp.Body, resp.ContentLength = io.NopCloser(strings.NewReader(body)), int64(len(body))
			resp.Header.Del("Content-Length")
		}
		return nil
	}
	srv := httptest.NewServer(proxy)
	defer srv.Close()
	ctx := context.Background()
	s, err := Open(ctx, "s3://runnel/p?endpoint="+srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutIfAbsent(ctx, "c/lost", []byte("mine")); err != nil {
		t.Fatalf("PutIfAbsent after a lost reply (%d PUTs) = %v; want nil", puts.Load(), err)
	}
	if b, err := s.Get(ctx, "c/lost"); err != nil || string(b) != "mine" {
		t.Fatalf("Get = %q, %v", b, err)
	}
	// Another writer's object is still refused after a retry.
	puts.Store(0)
	if err := s.PutIfAbsent(ctx, "c/lost", []byte("theirs")); !errors.Is(err, ErrExists) {
		t.Fatalf("PutIfAbsent of other contents after a retry = %v; want ErrExists", err)
	}
}

// TestS3MissingBucket: S3 answers 404 NoSuchBucket in a bucket that does not exist (a typo in
// the URL, a bucket deleted); Delete took it for success and Get for a missing object.
func TestS3MissingBucket(t *testing.T) {
	endpoint := testclients.S3(t)
	ctx := context.Background()
	s, err := Open(ctx, "s3://no-such-bucket/p?endpoint="+endpoint)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "k"); err == nil {
		t.Error("Delete in a missing bucket = nil; want an error")
	}
	if _, err := s.Get(ctx, "k"); err == nil || errors.Is(err, ErrNotFound) {
		t.Errorf("Get in a missing bucket = %v; want an error other than ErrNotFound", err)
	}
}
