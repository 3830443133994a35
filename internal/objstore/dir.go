package objstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// tmpPrefix starts the names of files being written; no key segment may start with it.
const tmpPrefix = ".tmp-"

// Dir is a store in a local directory: an object is a file at its key's path. A write goes to a
// temporary file in the object's directory, which is fsynced and then renamed (Put) or linked
// (PutIfAbsent: link fails if the name exists, so the first writer wins) into place, and the
// directory is fsynced: a write that returned survives a crash of the machine. Several processes
// may share a directory.
type Dir struct {
	root string

	// durable holds directories this process made sure are durable (their entry in their
	// parent synced): a directory seen to exist may be another writer's, whose parent is not
	// synced yet, so existing is not enough. Cleared when it grows past maxDurableDirs (one
	// fsync more per directory then).
	durableMu sync.Mutex
	durable   map[string]bool
}

const maxDurableDirs = 4096

// syncDir makes a directory's entries durable; a variable for tests.
var syncDir = func(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("objstore: %w", err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("objstore: syncing %s: %w", dir, err)
	}
	return nil
}

// OpenDir opens (creating it if needed) a directory store, and removes temporary files a crash
// left there more than an hour ago.
func OpenDir(root string) (*Dir, error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("objstore: %w", err)
	}
	d := &Dir{root: filepath.Clean(root), durable: map[string]bool{}}
	cutoff := time.Now().Add(-time.Hour)
	_ = filepath.WalkDir(d.root, func(path string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() && strings.HasPrefix(e.Name(), tmpPrefix) {
			if info, err := e.Info(); err == nil && info.ModTime().Before(cutoff) {
				os.Remove(path)
			}
		}
		return nil
	})
	return d, nil
}

func (d *Dir) String() string { return "file://" + d.root }

func (d *Dir) path(key string) (string, error) {
	if err := CheckKey(key); err != nil {
		return "", err
	}
	return filepath.Join(d.root, filepath.FromSlash(key)), nil
}

// Put writes an object durably, replacing any object of the key.
func (d *Dir) Put(ctx context.Context, key string, body []byte) error {
	return d.write(ctx, key, body, os.Rename)
}

// PutIfAbsent writes an object durably if the key has none; else ErrExists.
func (d *Dir) PutIfAbsent(ctx context.Context, key string, body []byte) error {
	return d.write(ctx, key, body, func(tmp, final string) error {
		if err := os.Link(tmp, final); err != nil {
			if errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("%w: %s", ErrExists, key)
			}
			return err
		}
		return os.Remove(tmp)
	})
}

func (d *Dir) write(ctx context.Context, key string, body []byte, place func(tmp, final string) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	final, err := d.path(key)
	if err != nil {
		return err
	}
	dir := filepath.Dir(final)
	if err := d.mkdirAll(dir); err != nil {
		return err
	}
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := filepath.Join(dir, tmpPrefix+hex.EncodeToString(rnd[:]))
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if errors.Is(err, fs.ErrNotExist) {
		// A Delete (of this process or another) removed the directory once it was empty.
		d.forget(dir)
		if err := d.mkdirAll(dir); err != nil {
			return err
		}
		f, err = os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	}
	if err != nil {
		return fmt.Errorf("objstore: %w", err)
	}
	_, err = f.Write(body)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = place(tmp, final)
	}
	if err != nil {
		os.Remove(tmp)
		if errors.Is(err, ErrExists) {
			// The object is there, maybe from this writer's own earlier attempt whose
			// directory sync failed: durable before the caller goes by it.
			if serr := syncDir(dir); serr != nil {
				return serr
			}
			return err
		}
		return fmt.Errorf("objstore: writing %s: %w", key, err)
	}
	return syncDir(dir)
}

// mkdirAll creates dir and its missing parents below the root, and makes each one's entry
// durable once per process, also when it exists already: another writer may have just created
// it and not yet synced its parent.
func (d *Dir) mkdirAll(dir string) error {
	if dir == d.root {
		return nil
	}
	d.durableMu.Lock()
	known := d.durable[dir]
	d.durableMu.Unlock()
	if known {
		return nil
	}
	if err := d.mkdirAll(filepath.Dir(dir)); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("objstore: %w", err)
	}
	if err := syncDir(filepath.Dir(dir)); err != nil {
		return err
	}
	d.durableMu.Lock()
	if len(d.durable) >= maxDurableDirs {
		clear(d.durable)
	}
	d.durable[dir] = true
	d.durableMu.Unlock()
	return nil
}

// Get reads a whole object.
func (d *Dir) Get(ctx context.Context, key string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p, err := d.path(key)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	if err != nil {
		return nil, fmt.Errorf("objstore: %w", err)
	}
	return b, nil
}

// GetRange reads n bytes from off (fewer at the end).
func (d *Dir) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if off < 0 || n < 0 {
		return nil, fmt.Errorf("%w: bytes %d+%d", ErrRange, off, n)
	}
	p, err := d.path(key)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	if err != nil {
		return nil, fmt.Errorf("objstore: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("objstore: %w", err)
	}
	if off >= info.Size() {
		return nil, fmt.Errorf("%w: offset %d of %s (%d bytes)", ErrRange, off, key, info.Size())
	}
	n = min(n, info.Size()-off)
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("objstore: %w", err)
	}
	return b, nil
}

// Delete removes an object (and the directories it leaves empty).
func (d *Dir) Delete(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p, err := d.path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("objstore: %w", err)
	}
	dir := filepath.Dir(p)
	if err := syncDir(dir); err != nil {
		return err
	}
	for dir != d.root && os.Remove(dir) == nil { // only empty ones go
		d.forget(dir)
		dir = filepath.Dir(dir)
	}
	return nil
}

// forget drops dir and its parents from the directories known durable (they may be gone).
func (d *Dir) forget(dir string) {
	d.durableMu.Lock()
	defer d.durableMu.Unlock()
	for ; dir != d.root && len(dir) > len(d.root); dir = filepath.Dir(dir) {
		delete(d.durable, dir)
	}
}

// List returns objects under prefix after startAfter, in key order.
func (d *Dir) List(ctx context.Context, prefix, startAfter string, limit int) ([]Object, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Walk from the deepest directory the prefix names completely.
	base := d.root
	if i := strings.LastIndex(prefix, "/"); i > 0 {
		base = filepath.Join(d.root, filepath.FromSlash(prefix[:i]))
	}
	var out []Object
	err := filepath.WalkDir(base, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // a directory removed meanwhile, or a prefix with no objects
			}
			return err
		}
		if e.IsDir() || strings.HasPrefix(e.Name(), tmpPrefix) {
			return nil
		}
		rel, err := filepath.Rel(d.root, path)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if !strings.HasPrefix(key, prefix) || key <= startAfter {
			return nil
		}
		info, err := e.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		out = append(out, Object{Key: key, Size: info.Size(), Modified: info.ModTime()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("objstore: listing %q: %w", prefix, err)
	}
	// Directory order is not key order ("a/b" walks before "a-c", which sorts first).
	slices.SortFunc(out, func(a, b Object) int { return strings.Compare(a.Key, b.Key) })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}
