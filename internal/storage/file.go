package storage

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
	"syscall"
)

// LocalPather is implemented by buckets whose objects are plain local files.
// Callers may os.Open the returned path to read an object without going
// through the Bucket (the Lance file reader and the in-kernel copy want an *os.File for pread and copy_file_range). The path
// must only be read: writes must go through the Bucket to stay atomic.
type LocalPather interface {
	// LocalPath returns the file that holds key, and false if the bucket has
	// no local file for it (the key is invalid or the bucket is remote). It
	// does not check that the object exists.
	LocalPath(key string) (string, bool)
}

// fileBucket stores objects as files under root, directly on the OS.
//
// gocloud's fileblob is not used: its IfNotExist is a stat followed by a
// rename, so two concurrent writers can both "win". Here every write goes to
// a temporary file in the destination directory, is fsynced, and is then
// published atomically: rename(2) for overwriting writes, link(2) for
// PutIfAbsent (link fails with EEXIST if the name exists, which is atomic
// across processes on any POSIX filesystem). There are no attribute sidecars.
//
// Directories are created on demand and never removed: removing an empty
// parent would race with a concurrent write into it.
type fileBucket struct {
	root string
}

var (
	_ Bucket      = (*fileBucket)(nil)
	_ LocalPather = (*fileBucket)(nil)
)

func openFile(root string) (*fileBucket, error) {
	if root == "" {
		return nil, errors.New("file bucket: empty root path")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("file bucket %s: %w", root, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("file bucket %s: %w", abs, err)
	}
	return &fileBucket{root: abs}, nil
}

func (b *fileBucket) path(key string) (string, error) {
	if err := ValidateKey(key); err != nil {
		return "", err
	}
	return filepath.Join(b.root, filepath.FromSlash(key)), nil
}

// LocalPath implements LocalPather.
func (b *fileBucket) LocalPath(key string) (string, bool) {
	p, err := b.path(key)
	return p, err == nil
}

// fileErr classifies an OS error from a read. It also turns the errors the OS gives for a key that names a directory, or
// passes through a file, into ErrNotFound: in object-store terms the object
// simply does not exist.
func fileErr(err error) error {
	if errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.ENOTDIR) {
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	return classify(err)
}

func (b *fileBucket) Get(ctx context.Context, key string) ([]byte, error) {
	p, err := b.path(key)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", key, fileErr(err))
	}
	return data, nil
}

func (b *fileBucket) NewRangeReader(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	p, err := b.path(key)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	if offset < 0 {
		return nil, fmt.Errorf("read %s: negative offset %d", key, offset)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", key, fileErr(err))
	}
	fi, err := f.Stat()
	if err == nil && fi.IsDir() {
		err = fmt.Errorf("%w: %s is a directory", ErrNotFound, key)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	var r io.Reader = f
	if offset > 0 || length >= 0 {
		if length < 0 {
			length = max(fi.Size()-offset, 0)
		}
		r = io.NewSectionReader(f, offset, length)
	}
	return struct {
		io.Reader
		io.Closer
	}{r, f}, nil
}

func (b *fileBucket) Put(ctx context.Context, key string, data []byte) error {
	w, err := b.newWriter(ctx, key)
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	if _, err := w.f.Write(data); err != nil {
		w.abort()
		return fmt.Errorf("put %s: %w", key, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	return nil
}

func (b *fileBucket) NewWriter(ctx context.Context, key string) (io.WriteCloser, error) {
	w, err := b.newWriter(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", key, err)
	}
	// A file system without O_DIRECT (tmpfs before Linux 6.6, some FUSE)
	// refuses it here: the writes then take the page cache as always.
	if on, _ := ctx.Value(directWritesKey{}).(bool); on && setDirect(w.f, true) == nil {
		w.direct = newDirectWriter(w.f)
	}
	return w, nil
}

func (b *fileBucket) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	w, err := b.newWriter(ctx, key)
	if err != nil {
		return fmt.Errorf("put-if-absent %s: %w", key, err)
	}
	w.exclusive = true
	if _, err := w.f.Write(data); err != nil {
		w.abort()
		return fmt.Errorf("put-if-absent %s: %w", key, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("put-if-absent %s: %w", key, err)
	}
	return nil
}

// fileWriter writes a temporary file next to its destination and publishes it
// on Close.
type fileWriter struct {
	ctx       context.Context
	f         *os.File
	final     string
	exclusive bool // publish with link(2): fail if final exists
	done      bool
	direct    *directWriter // under DirectWrites: the writes, buffered and in a goroutine
}

// BuffersWrites reports whether the writer buffers its writes itself
// (under DirectWrites).
func (w *fileWriter) BuffersWrites() bool { return w.direct != nil }

func (b *fileBucket) newWriter(ctx context.Context, key string) (*fileWriter, error) {
	final, err := b.path(key)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	dir := filepath.Dir(final)
	f, err := createTemp(dir)
	// A concurrent Delete may remove the directory again between mkdirAll
	// and createTemp (it prunes directories it leaves empty), so the pair is
	// retried; each round that loses makes progress for the deleter, which
	// stops at the first non-empty parent.
	for range 8 {
		if !errors.Is(err, fs.ErrNotExist) {
			break
		}
		if err = b.mkdirAll(dir); err == nil {
			f, err = createTemp(dir)
		}
	}
	if err != nil {
		return nil, err
	}
	return &fileWriter{ctx: ctx, f: f, final: final}, nil
}

// mkdirAll creates dir and any missing parents below the root, fsyncing each
// parent whose entries it changed so that a crash cannot lose a directory
// holding a durably written object.
func (b *fileBucket) mkdirAll(dir string) error {
	rel, err := filepath.Rel(b.root, dir)
	if err != nil || rel == "." {
		return err
	}
	cur := b.root
	for seg := range strings.SplitSeq(rel, string(filepath.Separator)) {
		parent := cur
		cur = filepath.Join(cur, seg)
		err := os.Mkdir(cur, 0o755)
		if errors.Is(err, fs.ErrExist) {
			continue // exists (as a directory or not: the next step tells)
		}
		if err != nil {
			return err
		}
		if err := syncDir(parent); err != nil {
			return err
		}
	}
	return nil
}

// createTemp creates a temporary file in dir. It does not use os.CreateTemp
// so that the name is exactly tmpPrefix plus random hex, which List relies on.
func createTemp(dir string) (*os.File, error) {
	for range 10 {
		var rnd [12]byte
		_, _ = rand.Read(rnd[:])
		name := filepath.Join(dir, tmpPrefix+hex.EncodeToString(rnd[:]))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return f, err
	}
	return nil, fmt.Errorf("create temporary file in %s: too many collisions", dir)
}

func (w *fileWriter) Write(p []byte) (int, error) {
	if w.done {
		return 0, errors.New("write after close")
	}
	if err := w.ctx.Err(); err != nil {
		return 0, err
	}
	if w.direct != nil {
		return w.direct.Write(p)
	}
	return w.f.Write(p)
}

// ReadFrom appends r to the file. os.File's ReadFrom copies in the
// kernel (copy_file_range(2) on Linux) when r is an *os.File or an
// io.LimitedReader of one, as the page copy of a compaction hands it, and
// falls back to reading and writing otherwise. The context is checked
// once, before the copy.
func (w *fileWriter) ReadFrom(r io.Reader) (int64, error) {
	if w.done {
		return 0, errors.New("write after close")
	}
	if err := w.ctx.Err(); err != nil {
		return 0, err
	}
	if d := w.direct; d != nil {
		// The kernel's copy goes through the page cache: what is buffered
		// is written first, and the file's offset set to its end.
		if err := d.flush(); err != nil {
			return 0, err
		}
		if err := d.leaveDirect(); err != nil {
			return 0, err
		}
		if _, err := w.f.Seek(d.pos, io.SeekStart); err != nil {
			return 0, err
		}
		n, err := w.f.ReadFrom(r)
		d.pos += n
		return n, err
	}
	return w.f.ReadFrom(r)
}

// abort removes the temporary file. It is idempotent.
func (w *fileWriter) abort() {
	if w.done {
		return
	}
	w.done = true
	if w.direct != nil {
		_ = w.direct.stop(false)
	}
	w.f.Close()
	os.Remove(w.f.Name())
}

// Close publishes the object: fsync the data (fdatasync: the data and its
// size, not its timestamps), then rename (or link, for an
// exclusive write) the temporary file onto its final name, then fsync the
// directory so the new name survives a crash. The temporary file is always
// removed. A canceled context abandons the write.
func (w *fileWriter) Close() error {
	if w.done {
		return errors.New("close: already closed")
	}
	tmp := w.f.Name()
	defer w.abort()
	if err := w.ctx.Err(); err != nil {
		return err
	}
	if w.direct != nil {
		if err := w.direct.stop(true); err != nil {
			return err
		}
	}
	if err := syncData(w.f); err != nil {
		return err
	}
	if err := w.f.Close(); err != nil {
		return err
	}
	var err error
	if w.exclusive {
		err = os.Link(tmp, w.final)
	} else {
		err = os.Rename(tmp, w.final)
	}
	if err != nil {
		// A directory holding longer keys ("a/b") occupies the name: that
		// is a key-layout conflict, not a lost race.
		if fi, serr := os.Lstat(w.final); serr == nil && fi.IsDir() {
			return fmt.Errorf("a directory of longer keys occupies %s: %w", w.final, err)
		}
		return classify(err)
	}
	if ds, ok := w.ctx.Value(dirSyncsKey{}).(*DirSyncs); ok && !w.exclusive {
		ds.add(filepath.Dir(w.final))
		return nil
	}
	return syncDir(filepath.Dir(w.final))
}

type dirSyncsKey struct{}

// DirSyncs are the directory fsyncs that file-bucket writes under a
// DeferDirSyncs context left for later.
type DirSyncs struct {
	mu   sync.Mutex
	dirs map[string]bool
}

// DeferDirSyncs returns a context under which a file bucket's streamed
// writes and Puts (not PutIfAbsent) fsync their data and publish it under
// its name as always, but leave the fsync of the directory, which makes
// the name survive a crash, to ds.Sync: a batch of new objects in one
// directory (a compaction's data files) then costs one directory fsync
// instead of one per object. Until Sync returns nil the new names may
// not be durable, so nothing may refer to them (a commit naming them)
// before. Other buckets ignore it.
func DeferDirSyncs(ctx context.Context) (context.Context, *DirSyncs) {
	ds := &DirSyncs{dirs: map[string]bool{}}
	return context.WithValue(ctx, dirSyncsKey{}, ds), ds
}

func (ds *DirSyncs) add(dir string) {
	ds.mu.Lock()
	ds.dirs[dir] = true
	ds.mu.Unlock()
}

// Sync fsyncs every directory a deferred write published into, once each.
func (ds *DirSyncs) Sync() error {
	ds.mu.Lock()
	dirs := make([]string, 0, len(ds.dirs))
	for d := range ds.dirs {
		dirs = append(dirs, d)
	}
	ds.mu.Unlock()
	slices.Sort(dirs)
	for _, d := range dirs {
		if err := syncDir(d); err != nil {
			return fmt.Errorf("sync directory %s: %w", d, err)
		}
		ds.mu.Lock()
		delete(ds.dirs, d)
		ds.mu.Unlock()
	}
	return nil
}

// syncDir fsyncs a directory (a variable so tests can count the calls).
var syncDir = func(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

func (b *fileBucket) Attributes(ctx context.Context, key string) (Attrs, error) {
	p, err := b.path(key)
	if err != nil {
		return Attrs{}, fmt.Errorf("attributes %s: %w", key, err)
	}
	if err := ctx.Err(); err != nil {
		return Attrs{}, fmt.Errorf("attributes %s: %w", key, err)
	}
	fi, err := os.Stat(p)
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%w: not a regular file", ErrNotFound)
	}
	if err != nil {
		return Attrs{}, fmt.Errorf("attributes %s: %w", key, fileErr(err))
	}
	return Attrs{Key: key, Size: fi.Size(), ModTime: fi.ModTime()}, nil
}

// List walks the tree depth-first. Within a directory, entries are ordered by
// name, with a directory compared as name+"/": every key below directory "a"
// starts with "a/", so this order makes the walk visit keys in exactly the
// lexical order of their full slash-separated keys (e.g. "a-b" before "a/c",
// since '-' < '/').
func (b *fileBucket) List(ctx context.Context, prefix string, fn func(Attrs) error) error {
	if err := validatePrefix(prefix); err != nil {
		return fmt.Errorf("list %s: %w", prefix, err)
	}
	// Start at the deepest directory the prefix names in full.
	startRel := ""
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		startRel = prefix[:i]
	}
	err := b.walk(ctx, startRel, prefix, fn)
	var cbErr callbackError
	if errors.As(err, &cbErr) {
		return cbErr.err // fn's own error, returned as is
	}
	if err != nil {
		return fmt.Errorf("list %s: %w", prefix, err)
	}
	return nil
}

// callbackError carries an error returned by a List callback up the walk.
type callbackError struct{ err error }

func (e callbackError) Error() string { return e.err.Error() }

// listOrderKey returns the name by which List orders a directory entry, a
// directory's with "/" after it (so that "v/0/" sorts before "v/001"), and
// false for the temporary file of a write in progress, which is no object.
func listOrderKey(e fs.DirEntry) (string, bool) {
	name := e.Name()
	if strings.HasPrefix(name, tmpPrefix) {
		return "", false
	}
	if e.IsDir() {
		return name + "/", true
	}
	return name, true
}

func (b *fileBucket) walk(ctx context.Context, rel, prefix string, fn func(Attrs) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	entries, err := os.ReadDir(filepath.Join(b.root, filepath.FromSlash(rel)))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil // nothing under this prefix
		}
		return err
	}
	type entry struct {
		sortKey string
		e       fs.DirEntry
	}
	sorted := make([]entry, 0, len(entries))
	for _, e := range entries {
		if k, ok := listOrderKey(e); ok {
			sorted = append(sorted, entry{k, e})
		}
	}
	slices.SortFunc(sorted, func(a, b entry) int { return strings.Compare(a.sortKey, b.sortKey) })

	for _, s := range sorted {
		key := s.e.Name()
		if rel != "" {
			key = rel + "/" + key
		}
		if s.e.IsDir() {
			// Descend only if the directory can hold keys with the prefix.
			d := key + "/"
			if strings.HasPrefix(d, prefix) || strings.HasPrefix(prefix, d) {
				if err := b.walk(ctx, key, prefix, fn); err != nil {
					return err
				}
			}
			continue
		}
		if !strings.HasPrefix(key, prefix) || !s.e.Type().IsRegular() {
			continue
		}
		fi, err := s.e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted since ReadDir
		}
		if err != nil {
			return err
		}
		if err := fn(Attrs{Key: key, Size: fi.Size(), ModTime: fi.ModTime()}); err != nil {
			return callbackError{err}
		}
	}
	return nil
}

func (b *fileBucket) Delete(ctx context.Context, key string) error {
	p, err := b.path(key)
	if err != nil {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	fi, err := os.Lstat(p)
	if err == nil && fi.IsDir() {
		err = fmt.Errorf("%w: %s is a directory", ErrNotFound, key)
	}
	if err == nil {
		err = os.Remove(p)
	}
	if err != nil {
		return fmt.Errorf("delete %s: %w", key, fileErr(err))
	}
	b.pruneEmptyDirs(filepath.Dir(p))
	return nil
}

// pruneEmptyDirs removes dir and then each parent below the root while it
// is empty, so that trim and cleanup leave no empty folders behind (a
// trimmed generation would leave seven). rmdir(2) removes only an empty
// directory, so a folder a writer has just put a file (or its temporary
// file) in stays; a writer that loses the race recreates the folder
// (newWriter retries, as Lance's local object store does). A failure here
// is not the delete's: the object is gone either way.
func (b *fileBucket) pruneEmptyDirs(dir string) {
	for {
		rel, err := filepath.Rel(b.root, dir)
		if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return
		}
		if os.Remove(dir) != nil {
			return
		}
		dir = filepath.Dir(dir)
	}
}

func (b *fileBucket) Close() error { return nil }
