// Package objstore is the object store that object-storage topics keep their files in: one small
// interface (put, put-if-absent, get, ranged get, delete, list), with a local directory
// (file:///dir, the embedded default), any S3-compatible store (s3://bucket/prefix), and a
// fault-injecting wrapper for tests.
//
// Keys are slash-separated paths of non-empty segments without "." or ".." segments. A Put or
// PutIfAbsent that returns nil is durable: the object survives a crash of this process and, for
// the local directory, of the machine.
package objstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Store is an object store.
type Store interface {
	// Put writes an object, replacing any object of the key.
	Put(ctx context.Context, key string, body []byte) error
	// PutIfAbsent writes an object only if the key has none (S3's If-None-Match: *); otherwise
	// it returns ErrExists and changes nothing. Of concurrent callers, at most one succeeds
	// (S3: of callers writing the same bytes, more may; see S3.PutIfAbsent).
	PutIfAbsent(ctx context.Context, key string, body []byte) error
	// Get reads a whole object; ErrNotFound if there is none.
	Get(ctx context.Context, key string) ([]byte, error)
	// GetRange reads n bytes from offset off; fewer only at the object's end. ErrNotFound if the
	// object does not exist, ErrRange if off is at or past its end.
	GetRange(ctx context.Context, key string, off, n int64) ([]byte, error)
	// Delete removes an object; deleting a missing object is not an error.
	Delete(ctx context.Context, key string) error
	// List returns up to limit objects whose keys start with prefix and sort after startAfter,
	// in key order (limit <= 0: all of them).
	List(ctx context.Context, prefix, startAfter string, limit int) ([]Object, error)
	// String names the store, for logs (no credentials).
	String() string
}

// Object is a listed object.
type Object struct {
	Key      string
	Size     int64
	Modified time.Time // when it was written
}

// Errors of the stores. Others are failures of the store or of the way to it; a caller may retry
// them (ErrUnavailable marks those the store itself said to retry, such as S3's 503 SlowDown).
var (
	ErrNotFound    = errors.New("objstore: no such object")
	ErrExists      = errors.New("objstore: the object exists")
	ErrRange       = errors.New("objstore: range past the object's end")
	ErrBadKey      = errors.New("objstore: bad key")
	ErrUnavailable = errors.New("objstore: store unavailable, retry")
)

// CheckKey reports whether key is a valid object key.
func CheckKey(key string) error {
	if key == "" || len(key) > 1024 {
		return fmt.Errorf("%w: %q", ErrBadKey, key)
	}
	for _, seg := range strings.Split(key, "/") {
		if seg == "" || seg == "." || seg == ".." || strings.HasPrefix(seg, tmpPrefix) {
			return fmt.Errorf("%w: %q", ErrBadKey, key)
		}
	}
	return nil
}

// Open opens the store a URL names:
//
//	file:///abs/dir                          a local directory (created if missing)
//	s3://bucket/prefix?endpoint=URL&region=R  an S3-compatible store; credentials from the
//	                                         standard AWS environment (AWS_ACCESS_KEY_ID, ...)
func Open(ctx context.Context, rawURL string) (Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("objstore: %q: %w", rawURL, err)
	}
	switch u.Scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("objstore: %q: a file URL names a local path (file:///dir)", rawURL)
		}
		if u.Path == "" || !strings.HasPrefix(u.Path, "/") {
			return nil, fmt.Errorf("objstore: %q: the directory must be an absolute path (file:///dir)", rawURL)
		}
		return OpenDir(u.Path)
	case "s3":
		return openS3(u)
	default:
		return nil, fmt.Errorf("objstore: %q: unknown scheme (file:///dir or s3://bucket/prefix)", rawURL)
	}
}
