package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"path"
	"slices"
	"sync"
	"syscall"
	"testing"
)

func TestDefault(t *testing.T) {
	runSuite(t, func(t *testing.T) (FS, string) { return Default, t.TempDir() })
}

func TestMem(t *testing.T) {
	runSuite(t, func(t *testing.T) (FS, string) {
		m := NewMem()
		if err := m.MkdirAll("data/db", 0o755); err != nil {
			t.Fatal(err)
		}
		return m, "data/db"
	})
}

func TestErrorFSNoRules(t *testing.T) {
	runSuite(t, func(t *testing.T) (FS, string) {
		m := NewMem()
		if err := m.MkdirAll("/root", 0o755); err != nil {
			t.Fatal(err)
		}
		return NewErrorFS(m, &Rules{}), "/root"
	})
}

// runSuite checks the behaviour every FS shares. newFS returns an FS and an existing,
// empty directory of it to work in.
func runSuite(t *testing.T, newFS func(t *testing.T) (FS, string)) {
	t.Run("SyncFS", func(t *testing.T) {
		fsys, root := newFS(t)
		s, ok := fsys.(FSSyncer)
		if !ok {
			t.Skipf("%T has no SyncFS", fsys)
		}
		a := create(t, fsys, path.Join(root, "a"), "alpha")
		defer a.Close()
		b := create(t, fsys, path.Join(root, "b"), "beta")
		defer b.Close()
		if err := s.SyncFS(a); err != nil {
			t.Fatalf("SyncFS = %v", err)
		}
		if mem, ok := fsys.(*MemFS); ok { // both files' contents survive a crash
			if err := fsys.SyncDir(root); err != nil {
				t.Fatal(err)
			}
			crashed := mem.Crash(CrashOptions{})
			for name, want := range map[string]string{"a": "alpha", "b": "beta"} {
				if got, err := ReadFile(crashed, path.Join(root, name)); string(got) != want || err != nil {
					t.Errorf("after SyncFS and a crash %s = %q, %v; want %q", name, got, err, want)
				}
			}
		}
	})
	t.Run("ReadFileRemoveAll", func(t *testing.T) {
		fsys, root := newFS(t)
		dir := path.Join(root, "d")
		if err := fsys.MkdirAll(path.Join(dir, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		create(t, fsys, path.Join(dir, "a"), "alpha").Close()
		create(t, fsys, path.Join(dir, "sub", "b"), "").Close()
		if b, err := ReadFile(fsys, path.Join(dir, "a")); string(b) != "alpha" || err != nil {
			t.Errorf("ReadFile(a) = %q, %v; want alpha", b, err)
		}
		if b, err := ReadFile(fsys, path.Join(dir, "sub", "b")); len(b) != 0 || err != nil {
			t.Errorf("ReadFile(empty) = %q, %v; want empty", b, err)
		}
		if _, err := ReadFile(fsys, path.Join(dir, "missing")); !errors.Is(err, ErrNotExist) {
			t.Errorf("ReadFile(missing) = %v; want ErrNotExist", err)
		}
		if err := RemoveAll(fsys, dir); err != nil {
			t.Fatal(err)
		}
		if _, err := fsys.Stat(dir); !errors.Is(err, ErrNotExist) {
			t.Errorf("Stat after RemoveAll = %v; want ErrNotExist", err)
		}
		if err := RemoveAll(fsys, dir); err != nil {
			t.Errorf("RemoveAll(missing) = %v; want nil", err)
		}
	})
	t.Run("WriteRead", func(t *testing.T) {
		fsys, root := newFS(t)
		name := path.Join(root, "f")
		f := create(t, fsys, name, "hello")
		defer f.Close()
		if n, err := f.WriteAt([]byte(" world"), 5); n != 6 || err != nil {
			t.Fatalf("WriteAt(\" world\", 5) = %d, %v; want 6, nil", n, err)
		}
		if got := readAll(t, f); got != "hello world" {
			t.Errorf("contents = %q; want %q", got, "hello world")
		}
		if f.Name() != name {
			t.Errorf("Name() = %q; want %q", f.Name(), name)
		}
		fi, err := f.Stat()
		if err != nil || fi.Name() != "f" || fi.Size() != 11 || fi.IsDir() || fi.ModTime().IsZero() {
			t.Errorf("Stat() = %v, %v; want f, size 11, not a directory", fi, err)
		}
		if err := f.Sync(); err != nil {
			t.Errorf("Sync() = %v; want nil", err)
		}
	})

	t.Run("ReadAtEOF", func(t *testing.T) {
		fsys, root := newFS(t)
		f := create(t, fsys, path.Join(root, "f"), "0123456789")
		defer f.Close()
		for _, tc := range []struct {
			off     int64
			len     int
			want    string
			wantErr error
		}{
			{0, 10, "0123456789", nil},
			{2, 3, "234", nil},
			{8, 4, "89", io.EOF},
			{10, 1, "", io.EOF},
			{20, 1, "", io.EOF},
			{3, 0, "", nil},
		} {
			p := make([]byte, tc.len)
			n, err := f.ReadAt(p, tc.off)
			if got := string(p[:n]); got != tc.want || err != tc.wantErr {
				t.Errorf("ReadAt(%d bytes, %d) = %q, %v; want %q, %v", tc.len, tc.off, got, err, tc.want, tc.wantErr)
			}
		}
		if _, err := f.ReadAt(make([]byte, 1), -1); err == nil || err == io.EOF {
			t.Errorf("ReadAt(1 byte, -1) = %v; want an error", err)
		}
		if _, err := f.WriteAt([]byte("x"), -1); err == nil {
			t.Errorf("WriteAt(x, -1) = nil; want an error")
		}
	})

	t.Run("WriteAtPastEnd", func(t *testing.T) {
		fsys, root := newFS(t)
		f := create(t, fsys, path.Join(root, "f"), "ab")
		defer f.Close()
		if _, err := f.WriteAt([]byte("yz"), 5); err != nil {
			t.Fatal(err)
		}
		if got, want := readAll(t, f), "ab\x00\x00\x00yz"; got != want {
			t.Errorf("contents = %q; want %q", got, want)
		}
	})

	t.Run("Truncate", func(t *testing.T) {
		fsys, root := newFS(t)
		f := create(t, fsys, path.Join(root, "f"), "abcdef")
		defer f.Close()
		for _, tc := range []struct {
			size int64
			want string
		}{{3, "abc"}, {5, "abc\x00\x00"}, {0, ""}, {2, "\x00\x00"}} {
			if err := f.Truncate(tc.size); err != nil {
				t.Fatalf("Truncate(%d) = %v", tc.size, err)
			}
			if got := readAll(t, f); got != tc.want {
				t.Errorf("after Truncate(%d): contents = %q; want %q", tc.size, got, tc.want)
			}
		}
		if err := f.Truncate(-1); err == nil {
			t.Errorf("Truncate(-1) = nil; want an error")
		}
	})

	t.Run("CreateTruncatesOpenDoesNot", func(t *testing.T) {
		fsys, root := newFS(t)
		name := path.Join(root, "f")
		create(t, fsys, name, "abcdef").Close()
		f, err := fsys.OpenReadWrite(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte("X"), 1); err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, f); got != "aXcdef" {
			t.Errorf("after OpenReadWrite and WriteAt: contents = %q; want %q", got, "aXcdef")
		}
		f.Close()
		f = create(t, fsys, name, "")
		defer f.Close()
		if got := readAll(t, f); got != "" {
			t.Errorf("after Create: contents = %q; want empty", got)
		}
	})

	t.Run("ReadOnly", func(t *testing.T) {
		fsys, root := newFS(t)
		name := path.Join(root, "f")
		create(t, fsys, name, "abc").Close()
		f, err := fsys.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if got := readAll(t, f); got != "abc" {
			t.Errorf("contents = %q; want %q", got, "abc")
		}
		if n, err := f.WriteAt([]byte("x"), 0); n != 0 || err == nil {
			t.Errorf("read-only WriteAt = %d, %v; want 0, an error", n, err)
		}
		if err := f.Truncate(1); err == nil {
			t.Errorf("read-only Truncate(1) = nil; want an error")
		}
		if got := readAll(t, f); got != "abc" {
			t.Errorf("after failed writes: contents = %q; want %q", got, "abc")
		}
	})

	t.Run("Closed", func(t *testing.T) {
		fsys, root := newFS(t)
		f := create(t, fsys, path.Join(root, "f"), "abc")
		if err := f.Close(); err != nil {
			t.Fatalf("Close() = %v", err)
		}
		_, rerr := f.ReadAt(make([]byte, 1), 0)
		_, werr := f.WriteAt([]byte("x"), 0)
		_, serr := f.Stat()
		for op, err := range map[string]error{
			"ReadAt": rerr, "WriteAt": werr, "Stat": serr,
			"Sync": f.Sync(), "Truncate": f.Truncate(0), "Close": f.Close(),
		} {
			if !errors.Is(err, fs.ErrClosed) {
				t.Errorf("%s on a closed file = %v; want fs.ErrClosed", op, err)
			}
		}
	})

	t.Run("NotExist", func(t *testing.T) {
		fsys, root := newFS(t)
		missing := path.Join(root, "missing")
		_, cerr := fsys.Create(path.Join(missing, "f"))
		_, oerr := fsys.Open(missing)
		_, rwerr := fsys.OpenReadWrite(missing)
		_, serr := fsys.Stat(missing)
		_, lerr := fsys.List(missing)
		for op, err := range map[string]error{
			"Create(missing/f)":       cerr,
			"Open(missing)":           oerr,
			"OpenReadWrite(missing)":  rwerr,
			"Stat(missing)":           serr,
			"List(missing)":           lerr,
			"Remove(missing)":         fsys.Remove(missing),
			"Rename(missing, x)":      fsys.Rename(missing, path.Join(root, "x")),
			"SyncDir(missing)":        fsys.SyncDir(missing),
			"Rename(f, missing/f)":    fsys.Rename(path.Join(root, "f"), path.Join(missing, "f")),
			"MkdirAll(\"\")+Create()": errors.Join(fsys.MkdirAll("", 0o755), func() error { _, err := fsys.Create(""); return err }()),
		} {
			if !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s = %v; want fs.ErrNotExist", op, err)
			}
		}
	})

	t.Run("WrongKind", func(t *testing.T) {
		fsys, root := newFS(t)
		file, dir := path.Join(root, "file"), path.Join(root, "dir")
		create(t, fsys, file, "x").Close()
		mkdir(t, fsys, dir)
		create(t, fsys, path.Join(dir, "inner"), "y").Close()
		_, cerr := fsys.Create(dir)
		_, rwerr := fsys.OpenReadWrite(dir)
		_, fcerr := fsys.Create(path.Join(file, "x"))
		_, lerr := fsys.List(file)
		oerr := func() error { // the OS opens a directory, then fails to read it
			f, err := fsys.Open(dir)
			if err == nil {
				_, err = f.ReadAt(make([]byte, 1), 0)
				f.Close()
			}
			return err
		}()
		for op, err := range map[string]error{
			"Create(dir)":               cerr,
			"OpenReadWrite(dir)":        rwerr,
			"Open(dir)+ReadAt":          oerr,
			"Create(file/x)":            fcerr,
			"List(file)":                lerr,
			"MkdirAll(file)":            fsys.MkdirAll(file, 0o755),
			"MkdirAll(file/x)":          fsys.MkdirAll(path.Join(file, "x"), 0o755),
			"Remove(non-empty dir)":     fsys.Remove(dir),
			"Rename(file, dir)":         fsys.Rename(file, dir),
			"Rename(dir, dir/sub)":      fsys.Rename(dir, path.Join(dir, "sub")),
			"Rename(dir, file)":         fsys.Rename(dir, file),
			"Rename(file, file/x)":      fsys.Rename(file, path.Join(file, "x")),
			"Rename(file, dir/inner/x)": fsys.Rename(file, path.Join(dir, "inner", "x")),
		} {
			if err == nil || errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s = %v; want an error other than fs.ErrNotExist", op, err)
			}
		}
		if got, want := list(t, fsys, root), []string{"dir", "file"}; !slices.Equal(got, want) {
			t.Errorf("after failed calls: List(root) = %q; want %q", got, want)
		}
	})

	t.Run("StatListMkdir", func(t *testing.T) {
		fsys, root := newFS(t)
		mkdir(t, fsys, path.Join(root, "a/b/c"))
		mkdir(t, fsys, path.Join(root, "a/b")) // exists: no error
		for _, n := range []string{"z", "m", "a/x"} {
			create(t, fsys, path.Join(root, n), n).Close()
		}
		for _, tc := range []struct {
			dir  string
			want []string
		}{{"", []string{"a", "m", "z"}}, {"a", []string{"b", "x"}}, {"a/b/c", nil}} {
			if got := list(t, fsys, path.Join(root, tc.dir)); !slices.Equal(got, tc.want) {
				t.Errorf("List(%q) = %q; want %q", tc.dir, got, tc.want)
			}
		}
		for _, tc := range []struct {
			name  string
			isDir bool
			size  int64
		}{{"a/b", true, -1}, {"a/x", false, 3}, {"m", false, 1}} {
			fi, err := fsys.Stat(path.Join(root, tc.name))
			if err != nil {
				t.Errorf("Stat(%q) = %v", tc.name, err)
				continue
			}
			if fi.Name() != path.Base(tc.name) || fi.IsDir() != tc.isDir || fi.Mode().IsDir() != tc.isDir ||
				(tc.size >= 0 && fi.Size() != tc.size) {
				t.Errorf("Stat(%q) = %s, dir %v, size %d; want %s, dir %v, size %d",
					tc.name, fi.Name(), fi.IsDir(), fi.Size(), path.Base(tc.name), tc.isDir, tc.size)
			}
		}
		if err := fsys.SyncDir(path.Join(root, "a/b")); err != nil {
			t.Errorf("SyncDir(a/b) = %v; want nil", err)
		}
	})

	t.Run("Rename", func(t *testing.T) {
		fsys, root := newFS(t)
		mkdir(t, fsys, path.Join(root, "d"))
		a, b, c := path.Join(root, "a"), path.Join(root, "b"), path.Join(root, "d/c")
		f := create(t, fsys, a, "A")
		defer f.Close()
		create(t, fsys, b, "B").Close()
		if err := fsys.Rename(a, b); err != nil { // replaces b
			t.Fatalf("Rename(a, b) = %v", err)
		}
		if err := fsys.Rename(b, c); err != nil { // across directories
			t.Fatalf("Rename(b, d/c) = %v", err)
		}
		if _, err := f.WriteAt([]byte("2"), 1); err != nil {
			t.Fatalf("WriteAt on a renamed open file = %v", err)
		}
		if got := readFile(t, fsys, c); got != "A2" {
			t.Errorf("contents of d/c = %q; want %q", got, "A2")
		}
		if got, want := list(t, fsys, root), []string{"d"}; !slices.Equal(got, want) {
			t.Errorf("List(root) = %q; want %q", got, want)
		}
		if err := fsys.Rename(path.Join(root, "d"), path.Join(root, "e")); err != nil {
			t.Fatalf("Rename(d, e) = %v", err)
		}
		if got := readFile(t, fsys, path.Join(root, "e/c")); got != "A2" {
			t.Errorf("contents of e/c = %q; want %q", got, "A2")
		}
	})

	t.Run("Remove", func(t *testing.T) {
		fsys, root := newFS(t)
		name, dir := path.Join(root, "f"), path.Join(root, "d")
		mkdir(t, fsys, dir)
		f := create(t, fsys, name, "abc")
		defer f.Close()
		if err := fsys.Remove(name); err != nil {
			t.Fatalf("Remove(f) = %v", err)
		}
		if _, err := fsys.Stat(name); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Stat(removed) = %v; want fs.ErrNotExist", err)
		}
		if _, err := f.WriteAt([]byte("d"), 3); err != nil {
			t.Errorf("WriteAt on a removed open file = %v", err)
		}
		if got := readAll(t, f); got != "abcd" {
			t.Errorf("contents of removed open file = %q; want %q", got, "abcd")
		}
		if err := fsys.Remove(dir); err != nil {
			t.Errorf("Remove(empty dir) = %v", err)
		}
		if got := list(t, fsys, root); len(got) != 0 {
			t.Errorf("List(root) = %q; want none", got)
		}
	})

	t.Run("Concurrent", func(t *testing.T) {
		fsys, root := newFS(t)
		f := create(t, fsys, path.Join(root, "f"), "")
		defer f.Close()
		const workers, size = 4, 512
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				off := int64(w * size)
				want := bytes.Repeat([]byte{byte('a' + w)}, size)
				for i := range size {
					if _, err := f.WriteAt(want[i:i+1], off+int64(i)); err != nil {
						t.Error(err)
						return
					}
					got := make([]byte, i+1)
					if _, err := f.ReadAt(got, off); err != nil || !bytes.Equal(got, want[:i+1]) {
						t.Errorf("worker %d: ReadAt = %q, %v; want %q", w, got, err, want[:i+1])
						return
					}
				}
			})
		}
		wg.Wait()
		if fi, err := f.Stat(); err != nil || fi.Size() != workers*size {
			t.Errorf("Stat() = %v, %v; want size %d", fi, err, workers*size)
		}
	})
}

func create(t *testing.T, fsys FS, name, data string) File {
	t.Helper()
	f, err := fsys.Create(name)
	if err != nil {
		t.Fatalf("Create(%q) = %v", name, err)
	}
	if data != "" {
		if _, err := f.WriteAt([]byte(data), 0); err != nil {
			t.Fatalf("WriteAt = %v", err)
		}
	}
	return f
}

func mkdir(t *testing.T, fsys FS, dir string) {
	t.Helper()
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("MkdirAll(%q) = %v", dir, err)
	}
}

func list(t *testing.T, fsys FS, dir string) []string {
	t.Helper()
	names, err := fsys.List(dir)
	if err != nil {
		t.Fatalf("List(%q) = %v", dir, err)
	}
	return names
}

func readAll(t *testing.T, f File) string {
	t.Helper()
	fi, err := f.Stat()
	if err != nil {
		t.Fatalf("Stat() = %v", err)
	}
	p := make([]byte, fi.Size()+1)
	n, err := f.ReadAt(p, 0)
	if err != io.EOF {
		t.Fatalf("ReadAt(size+1 bytes, 0) = %d, %v; want io.EOF", n, err)
	}
	return string(p[:n])
}

func readFile(t *testing.T, fsys FS, name string) string {
	t.Helper()
	f, err := fsys.Open(name)
	if err != nil {
		t.Fatalf("Open(%q) = %v", name, err)
	}
	defer f.Close()
	return readAll(t, f)
}

// contents returns the contents of file name, and whether it could be opened.
func contents(fsys FS, name string) (string, bool) {
	f, err := fsys.Open(name)
	if err != nil {
		return "", false
	}
	defer f.Close()
	p := make([]byte, 1<<20)
	n, _ := f.ReadAt(p, 0)
	return string(p[:n]), true
}

func TestMemCrashContents(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  func(f File) // on a file synced with "0123456789"
		want string
	}{
		{"nothing unsynced", func(File) {}, "0123456789"},
		{"append lost", func(f File) { f.WriteAt([]byte("abc"), 10) }, "0123456789"},
		{"overwrite lost", func(f File) { f.WriteAt([]byte("abc"), 2) }, "0123456789"},
		{"write past end lost", func(f File) { f.WriteAt([]byte("abc"), 20) }, "0123456789"},
		{"shrink lost", func(f File) { f.Truncate(3) }, "0123456789"},
		{"grow lost", func(f File) { f.Truncate(30) }, "0123456789"},
		{"mixed lost", func(f File) {
			f.Truncate(4)
			f.WriteAt([]byte("abcdefgh"), 2)
			f.Truncate(20)
			f.WriteAt([]byte("X"), 0)
			f.Truncate(1)
		}, "0123456789"},
		{"synced kept", func(f File) {
			f.Truncate(4)
			f.WriteAt([]byte("ab"), 6)
			f.Sync()
			f.WriteAt([]byte("zzz"), 0)
		}, "0123\x00\x00ab"},
	} {
		m := NewMem()
		f := create(t, m, "f", "0123456789")
		f.Sync()
		m.SyncDir("/")
		tc.ops(f)
		got, ok := contents(m.Crash(CrashOptions{}), "f")
		if !ok || got != tc.want {
			t.Errorf("%s: Crash contents = %q, %v; want %q", tc.name, got, ok, tc.want)
		}
		if got := readAll(t, f); tc.name == "nothing unsynced" && got != tc.want {
			t.Errorf("%s: original contents = %q; want %q", tc.name, got, tc.want)
		}
	}
}

func TestMemCrashEntries(t *testing.T) {
	m := NewMem()
	mkdir(t, m, "/d1/sub")
	mkdir(t, m, "/d2")
	for _, n := range []string{"/d1/a", "/d1/b", "/d1/c", "/d2/x"} {
		f := create(t, m, n, n)
		f.Sync()
		f.Close()
	}
	m.SyncDir("/d1")
	m.SyncDir("/d2")
	create(t, m, "/d1/new", "new").Sync()  // never SyncDir'd
	create(t, m, "/d2/new2", "n2").Sync()  // SyncDir'd below
	m.Remove("/d1/c")                      // not durable
	m.Rename("/d1/a", "/d1/a2")            // not durable
	m.Rename("/d1/b", "/d2/b")             // only /d2 synced: b in both
	m.Remove("/d2/x")                      // durable
	mkdir(t, m, "/d3/deep")                // durable at once
	create(t, m, "/d3/deep/f", "f").Sync() // not durable
	m.SyncDir("/d2")
	c := m.Crash(CrashOptions{})
	for _, tc := range []struct {
		name, want string
		exists     bool
	}{
		{"/d1/a", "/d1/a", true}, {"/d1/a2", "", false}, {"/d1/b", "/d1/b", true},
		{"/d1/c", "/d1/c", true}, {"/d1/new", "", false}, {"/d2/b", "/d1/b", true},
		{"/d2/x", "", false}, {"/d2/new2", "n2", true}, {"/d3/deep/f", "", false},
	} {
		if got, ok := contents(c, tc.name); ok != tc.exists || got != tc.want {
			t.Errorf("after crash: contents(%s) = %q, %v; want %q, %v", tc.name, got, ok, tc.want, tc.exists)
		}
	}
	if got, want := list(t, c, "/d1"), []string{"a", "b", "c", "sub"}; !slices.Equal(got, want) {
		t.Errorf("after crash: List(/d1) = %q; want %q", got, want)
	}
	if got := list(t, c, "/d3/deep"); len(got) != 0 {
		t.Errorf("after crash: List(/d3/deep) = %q; want none", got)
	}
	m.SyncDir("/d1")
	c = m.Crash(CrashOptions{})
	if got, want := list(t, c, "/d1"), []string{"a2", "new", "sub"}; !slices.Equal(got, want) {
		t.Errorf("after SyncDir and crash: List(/d1) = %q; want %q", got, want)
	}
	// The crashed copy is durable as it is, and a new crash of it keeps everything.
	if got, want := list(t, c.Crash(CrashOptions{}), "/d1"), []string{"a2", "new", "sub"}; !slices.Equal(got, want) {
		t.Errorf("after a second crash: List(/d1) = %q; want %q", got, want)
	}
}

func TestMemCrashIndependent(t *testing.T) {
	m := NewMem()
	f := create(t, m, "f", "synced")
	f.Sync()
	m.SyncDir(".")
	c := m.Crash(CrashOptions{})
	f.WriteAt([]byte("CHANGED"), 0)
	f.Sync()
	create(t, m, "g", "g").Sync()
	m.SyncDir(".")
	if got := readFile(t, c, "f"); got != "synced" {
		t.Errorf("crashed copy after writes to the original: f = %q; want %q", got, "synced")
	}
	cf, err := c.OpenReadWrite("f")
	if err != nil {
		t.Fatal(err)
	}
	cf.WriteAt([]byte("crashed!"), 0)
	if got := readAll(t, f); got != "CHANGED" {
		t.Errorf("original after writes to the crashed copy: f = %q; want %q", got, "CHANGED")
	}
	if got, want := list(t, c, "/"), []string{"f"}; !slices.Equal(got, want) {
		t.Errorf("crashed copy: List(/) = %q; want %q", got, want)
	}
}

// TestMemCrashTear appends writes after a synced prefix and checks that a torn crash keeps
// the prefix and then the writes in order, the last kept one possibly cut (and, with
// Garbage, replaced).
func TestMemCrashTear(t *testing.T) {
	const synced = "SYNCED"
	var writes []string
	for i := range 8 {
		writes = append(writes, fmt.Sprintf("<write %d:%s>", i, bytes.Repeat([]byte{byte('a' + i)}, i*3)))
	}
	all := synced
	var bounds []int // offsets where a write starts, and the end
	for _, w := range writes {
		bounds = append(bounds, len(all))
		all += w
	}
	bounds = append(bounds, len(all))
	for _, garbage := range []bool{false, true} {
		lengths := map[int]bool{}
		torn, garbled := 0, 0
		for seed := range uint64(200) {
			m := NewMem()
			f := create(t, m, "f", synced)
			f.Sync()
			m.SyncDir("/")
			for i, w := range writes {
				f.WriteAt([]byte(w), int64(bounds[i]))
			}
			got, _ := contents(m.Crash(CrashOptions{Tear: true, Garbage: garbage, Rand: rand.New(rand.NewPCG(seed, 0))}), "f")
			lengths[len(got)] = true
			if len(got) < len(synced) || len(got) > len(all) {
				t.Fatalf("garbage %v, seed %d: crash kept %d bytes; want %d to %d", garbage, seed, len(got), len(synced), len(all))
			}
			whole := bounds[0] // end of the last write kept whole
			for _, b := range bounds {
				if b <= len(got) {
					whole = b
				}
			}
			if got[:whole] != all[:whole] {
				t.Fatalf("garbage %v, seed %d: crash kept %q; want a prefix of %q", garbage, seed, got, all)
			}
			if whole < len(got) {
				torn++
			}
			if got[whole:] != all[whole:len(got)] {
				garbled++
				if !garbage {
					t.Fatalf("seed %d: crash kept %q; want a prefix of %q", seed, got, all)
				}
			}
		}
		if len(lengths) < 10 || torn == 0 || !lengths[len(synced)] || !lengths[len(all)] {
			t.Errorf("garbage %v: %d distinct lengths, %d torn, none kept %v, all kept %v; want variety",
				garbage, len(lengths), torn, lengths[len(synced)], lengths[len(all)])
		}
		if garbage && garbled == 0 {
			t.Errorf("with Garbage: no torn write was replaced in 200 crashes")
		}
	}
}

func TestMemCrashTearOverwrite(t *testing.T) {
	for seed := range uint64(50) {
		m := NewMem()
		f := create(t, m, "f", "0123456789")
		f.Sync()
		m.SyncDir("/")
		f.WriteAt([]byte("abcd"), 2)
		opts := CrashOptions{Tear: true, Rand: rand.New(rand.NewPCG(seed, 1))}
		got, _ := contents(m.Crash(opts), "f")
		opts.Rand = rand.New(rand.NewPCG(seed, 1))
		if again, _ := contents(m.Crash(opts), "f"); again != got {
			t.Errorf("seed %d: crash = %q, then %q with the same seed; want equal", seed, got, again)
		}
		var ok bool
		for k := range 5 {
			ok = ok || got == "01"+"abcd"[:k]+"23456789"[k:]
		}
		if !ok {
			t.Errorf("seed %d: crash after torn overwrite of 0123456789 by abcd at 2 = %q; want 01, a prefix of abcd, then the rest of 23456789", seed, got)
		}
	}
}

func TestMemSyncCost(t *testing.T) {
	// Appending and syncing many chunks must not copy the whole file per sync.
	m := NewMem()
	f := create(t, m, "f", "")
	chunk := make([]byte, 16<<10)
	for i := range 2048 { // 32 MiB
		f.WriteAt(chunk, int64(i*len(chunk)))
		f.Sync()
	}
	if fi, _ := f.Stat(); fi.Size() != 32<<20 {
		t.Errorf("size = %d; want %d", fi.Size(), 32<<20)
	}
}

func TestErrorFSInject(t *testing.T) {
	rules := &Rules{}
	m := NewMem()
	e := NewErrorFS(m, rules)
	f := create(t, e, "f", "0123456789")
	defer f.Close()

	rules.Add(Rule{Op: OpWrite})
	if n, err := f.WriteAt([]byte("ab"), 0); n != 0 || !errors.Is(err, ErrInjected) {
		t.Errorf("WriteAt with a write rule = %d, %v; want 0, ErrInjected", n, err)
	}
	if _, err := f.ReadAt(make([]byte, 1), 0); err != nil {
		t.Errorf("ReadAt with a write rule = %v; want nil", err)
	}
	rules.Clear()
	rules.Add(Rule{Op: OpSync, Err: syscall.EIO})
	if err := f.Sync(); !errors.Is(err, syscall.EIO) {
		t.Errorf("Sync with an EIO rule = %v; want EIO", err)
	}
	rules.Clear()
	rules.Add(Rule{Op: OpWrite, Err: syscall.ENOSPC, PartialWrite: true})
	n, err := f.WriteAt([]byte("abcdefg"), 8)
	var pe *fs.PathError
	if n != 3 || !errors.Is(err, syscall.ENOSPC) || !errors.As(err, &pe) {
		t.Errorf("WriteAt(7 bytes) on a full disk = %d, %v; want 3, *fs.PathError ENOSPC", n, err)
	}
	if got := readFile(t, m, "f"); got != "01234567abc" {
		t.Errorf("inner file after a partial write = %q; want %q", got, "01234567abc")
	}
	rules.Clear()
	if err := f.Sync(); err != nil {
		t.Errorf("Sync after Clear = %v; want nil", err)
	}
	rules.Add(Rule{Op: OpClose})
	if err := f.Close(); !errors.Is(err, ErrInjected) {
		t.Errorf("Close with a close rule = %v; want ErrInjected", err)
	}
	if _, err := f.ReadAt(make([]byte, 1), 0); !errors.Is(err, fs.ErrClosed) {
		t.Errorf("ReadAt after a failed Close = %v; want fs.ErrClosed (inner file closed)", err)
	}
}

func TestErrorFSOps(t *testing.T) {
	m := NewMem()
	mkdir(t, m, "d")
	create(t, m, "d/f", "abc").Close()
	calls := map[Op]func(e FS, f File) error{
		OpCreate:   func(e FS, _ File) error { _, err := e.Create("d/g"); return err },
		OpOpen:     func(e FS, _ File) error { _, err := e.OpenReadWrite("d/f"); return err },
		OpRemove:   func(e FS, _ File) error { return e.Remove("d/f") },
		OpRename:   func(e FS, _ File) error { return e.Rename("d/f", "d/h") },
		OpMkdir:    func(e FS, _ File) error { return e.MkdirAll("d/e", 0o755) },
		OpList:     func(e FS, _ File) error { _, err := e.List("d"); return err },
		OpStat:     func(e FS, _ File) error { _, err := e.Stat("d/f"); return err },
		OpSyncDir:  func(e FS, _ File) error { return e.SyncDir("d") },
		OpRead:     func(_ FS, f File) error { _, err := f.ReadAt(make([]byte, 1), 0); return err },
		OpWrite:    func(_ FS, f File) error { _, err := f.WriteAt([]byte("x"), 0); return err },
		OpSync:     func(_ FS, f File) error { return f.Sync() },
		OpTruncate: func(_ FS, f File) error { return f.Truncate(1) },
	}
	for op, call := range calls {
		rules := &Rules{}
		e := NewErrorFS(m, rules)
		f, err := e.Open("d/f")
		if err != nil {
			t.Fatal(err)
		}
		rules.Add(Rule{Op: op, PathContains: "d"})
		rules.Add(Rule{Op: op, PathContains: "nomatch", Err: syscall.EIO})
		if err := call(e, f); !errors.Is(err, ErrInjected) {
			t.Errorf("%v with an injected error = %v; want ErrInjected", op, err)
		}
		f.Close()
	}
	if got, want := list(t, m, "d"), []string{"f"}; !slices.Equal(got, want) {
		t.Errorf("after failed calls: List(d) = %q; want %q", got, want)
	}
	if got := readFile(t, m, "d/f"); got != "abc" {
		t.Errorf("after failed calls: d/f = %q; want %q", got, "abc")
	}
}

func TestRulesAfterTimes(t *testing.T) {
	for _, tc := range []struct {
		after, times int
		want         string // x: the op failed, .: it succeeded
	}{
		{0, 0, "xxxxxx"}, {2, 0, "..xxxx"}, {2, 1, "..x..."}, {0, 2, "xx...."}, {1, 3, ".xxx.."},
	} {
		rules := &Rules{}
		rules.Add(Rule{Op: OpSync, PathContains: "log", After: tc.after, Times: tc.times})
		got := ""
		for range 6 {
			if rules.MaybeError(OpSync, "x.data") != nil || rules.MaybeError(OpWrite, "x.log") != nil {
				t.Fatalf("rule fired for another op or path")
			}
			if rules.MaybeError(OpSync, "x.log") != nil {
				got += "x"
			} else {
				got += "."
			}
		}
		if got != tc.want {
			t.Errorf("Rule{After: %d, Times: %d} over 6 ops = %s; want %s", tc.after, tc.times, got, tc.want)
		}
	}
}

func TestOpString(t *testing.T) {
	for op, want := range map[Op]string{OpCreate: "create", OpSyncDir: "syncdir", OpClose: "close", Op(99): "Op(99)", Op(-1): "Op(-1)"} {
		if got := op.String(); got != want {
			t.Errorf("Op(%d).String() = %q; want %q", int(op), got, want)
		}
	}
}

// TestBootID: the operating system names its boot and a directory's mount the same way twice,
// and another mount otherwise; a MemFS crash is a new boot; ErrorFS passes it through.
func TestBootID(t *testing.T) {
	booter, ok := Default.(Booter)
	if !ok {
		t.Skip("the operating system's file system names no boot here")
	}
	dir := t.TempDir()
	a, err := booter.BootID(dir)
	if err != nil || a == "" {
		t.Fatalf("BootID = %q, %v", a, err)
	}
	if b, _ := booter.BootID(dir); b != a {
		t.Fatalf("BootID changed within a boot: %q, then %q", a, b)
	}
	if p, err := booter.BootID("/dev/shm"); err == nil && p == a { // tmpfs, when there is one
		t.Errorf("BootID(/dev/shm) = %q; want another mount than %s's", p, dir)
	}
	if p, err := booter.BootID("/proc"); err == nil { // no syncfs to report a writeback error
		t.Errorf("BootID(/proc) = %q; want an error: procfs's syncfs reports no writeback error", p)
	}
	m := NewMem()
	before, _ := m.BootID("/")
	after, _ := m.Crash(CrashOptions{}).BootID("/")
	if before == after {
		t.Fatalf("a crash kept the boot id %q", before)
	}
	if e, _ := NewErrorFS(m, InjectorFunc(func(Op, string) error { return nil })).BootID("/"); e != before {
		t.Fatalf("ErrorFS BootID = %q; want its inner %q", e, before)
	}
}
