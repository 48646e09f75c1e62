package verify

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/compactord/compactord/internal/clock"
	"github.com/compactord/compactord/internal/format/file"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/progress"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

// decodeTable is a LanceDB table of two fragments of 20,000 rows (data
// files of about 350 KB: several pages, the middle well inside one), a
// btree index on id, a bitmap index on cat and a deletion file on each
// fragment. Built once per test binary; tests copy it.
var decodeTable struct {
	once sync.Once
	dir  string
	err  error
}

func decodeTableCopy(t *testing.T) string {
	t.Helper()
	lancedb.Require(t)
	decodeTable.once.Do(func() {
		root, err := os.MkdirTemp("", "verify-decode-")
		if err != nil {
			decodeTable.err = err
			return
		}
		f := &lancedb.Fixture{URI: root, Table: "t", Dir: filepath.Join(root, "t.lance")}
		_, err = lancedb.Run(t, f.Program(lancedb.Create(lancedb.BasicSchema, lancedb.BasicRows(0, 20000)),
			lancedb.Add(lancedb.BasicRows(20000, 40000)), lancedb.CreateIndex("id", "btree", "id_idx"),
			lancedb.CreateIndex("cat", "bitmap", "cat_idx"), lancedb.Delete("id % 7 = 0")))
		decodeTable.dir, decodeTable.err = f.Dir, err
	})
	if decodeTable.err != nil {
		t.Fatal(decodeTable.err)
	}
	dst := filepath.Join(t.TempDir(), "t.lance")
	if err := os.CopyFS(dst, os.DirFS(decodeTable.dir)); err != nil {
		t.Fatal(err)
	}
	return dst
}

func TestMain(m *testing.M) {
	code := m.Run()
	if decodeTable.dir != "" {
		_ = os.RemoveAll(filepath.Dir(decodeTable.dir))
	}
	os.Exit(code)
}

// one returns the single file under dir matching pattern, relative to dir.
func one(t *testing.T, dir, pattern string) string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil || len(m) == 0 {
		t.Fatalf("no %s under %s", pattern, dir)
	}
	rel, _ := filepath.Rel(dir, m[0])
	return filepath.ToSlash(rel)
}

func openLance(t *testing.T, path string) (*file.File, []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := file.Open(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	return f, b
}

// leafName is the name Check gives column c's field.
func leafName(f *file.File, c int) string {
	var name string
	var walk func(fl *file.Field, prefix string)
	walk = func(fl *file.Field, prefix string) {
		if fl.Column == c && len(fl.Children) == 0 {
			name = prefix + fl.Name
		}
		for _, ch := range fl.Children {
			walk(ch, prefix+fl.Name+".")
		}
	}
	for _, fl := range f.Schema.Fields {
		walk(fl, "")
	}
	return name
}

// pageAt names the page holding byte off of the file ("" if none does).
func pageAt(t *testing.T, path string, off uint64) string {
	t.Helper()
	f, _ := openLance(t, path)
	for c, cm := range f.Columns {
		for i, p := range cm.GetPages() {
			for k, o := range p.GetBufferOffsets() {
				if off >= o && off < o+p.GetBufferSizes()[k] {
					return fmt.Sprintf("column %d (%s) page %d", c, leafName(f, c), i)
				}
			}
		}
	}
	return ""
}

// overwrite writes a fixed pattern over n bytes at off, the size unchanged.
func overwrite(t *testing.T, path string, off, n int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if off < 0 || off+n > len(b) {
		t.Fatalf("%s: %d+%d outside %d bytes", path, off, n, len(b))
	}
	for i := off; i < off+n; i++ {
		b[i] = byte(i*37 + 11)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// overwritePage overwrites every buffer of one page of column c and
// names it.
func overwritePage(t *testing.T, path string, c, page int) string {
	t.Helper()
	f, _ := openLance(t, path)
	p := f.Columns[c].GetPages()[page]
	for k, o := range p.GetBufferOffsets() {
		overwrite(t, path, int(o), int(p.GetBufferSizes()[k]))
	}
	return fmt.Sprintf("column %d (%s) page %d", c, leafName(f, c), page)
}

// TestDeepDecodesEveryFile damages one file of a LanceDB table at a time:
// deep verify names the file (and, for a page, the column and page), a
// plain verify (size unchanged) does not look, and LanceDB fails to read
// the damaged data files too. The intact table passes.
func TestDeepDecodesEveryFile(t *testing.T) {
	deep := Options{Deep: true}
	wantOK(t, "intact", run(t, decodeTableCopy(t), deep))
	cases := []struct {
		name, check string
		damage      func(t *testing.T, dir string) (key, msg string)
		lancedb     bool // LanceDB's full scan must fail as well
	}{
		{"data file: 8 KB in the middle", CheckDataFile, func(t *testing.T, dir string) (string, string) {
			key := one(t, dir, "data/*.lance")
			st, _ := os.Stat(filepath.Join(dir, key))
			mid := int(st.Size()) / 2
			page := pageAt(t, filepath.Join(dir, key), uint64(mid))
			overwrite(t, filepath.Join(dir, key), mid-4096, 8192)
			return key, page
		}, true},
		{"data file: trailing magic flipped", CheckDataFile, func(t *testing.T, dir string) (string, string) {
			key := one(t, dir, "data/*.lance")
			st, _ := os.Stat(filepath.Join(dir, key))
			overwrite(t, filepath.Join(dir, key), int(st.Size())-4, 4)
			return key, "no LANC magic"
		}, true},
		{"deletion file", CheckDeletionFile, func(t *testing.T, dir string) (string, string) {
			key := one(t, dir, "_deletions/*.arrow")
			st, _ := os.Stat(filepath.Join(dir, key))
			overwrite(t, filepath.Join(dir, key), int(st.Size())/4, int(st.Size())/2)
			return key, "does not decode"
		}, false},
		{"btree page", CheckIndex, func(t *testing.T, dir string) (string, string) {
			key := one(t, dir, "_indices/*/page_data.lance")
			return key, overwritePage(t, filepath.Join(dir, key), 1, 0)
		}, false},
		{"bitmap page", CheckIndex, func(t *testing.T, dir string) (string, string) {
			key := one(t, dir, "_indices/*/bitmap_page_lookup.lance")
			return key, overwritePage(t, filepath.Join(dir, key), 1, 0)
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := decodeTableCopy(t)
			key, msg := tc.damage(t, dir)
			if msg == "" {
				t.Fatalf("%s: the middle is in no page", key)
			}
			if tc.check != CheckDeletionFile {
				if rep := run(t, dir, Options{}); !rep.OK() {
					t.Errorf("plain verify of a same-size file found %v (it reads no data)", rep.Violations)
				}
			}
			rep := run(t, dir, deep)
			found := false
			for _, v := range rep.Violations {
				if v.Check == tc.check && v.Object == key && strings.Contains(v.Message, msg) {
					found = true
				}
			}
			if !found {
				t.Errorf("no %s violation on %s saying %q; got %v", tc.check, key, msg, rep.Violations)
			}
			if tc.lancedb {
				f := &lancedb.Fixture{URI: filepath.Dir(dir), Table: "t"}
				res := f.Run(t, lancedb.ReadRows(lancedb.ReadOpts{}).ExpectError())
				t.Logf("LanceDB: %s", res.Err(0))
			}
		})
	}
}

// tickClock moves a second at every reading, so that every Add of a
// reporter with a one-second interval logs a line.
type tickClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *tickClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(time.Second)
	return c.now
}

func (c *tickClock) NewTimer(time.Duration) clock.Timer { panic("no timer") }

// readLog is a bucket (never local: every read goes through it) that
// records the whole-object reads and the largest range read per key.
type readLog struct {
	storage.Bucket
	mu     sync.Mutex
	gets   map[string]int
	ranged map[string]int64
}

func (r *readLog) Get(ctx context.Context, key string) ([]byte, error) {
	r.mu.Lock()
	r.gets[key]++
	r.mu.Unlock()
	return r.Bucket.Get(ctx, key)
}

func (r *readLog) NewRangeReader(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	r.mu.Lock()
	if length < 0 {
		r.gets[key]++
	} else {
		r.ranged[key] = max(r.ranged[key], length)
	}
	r.mu.Unlock()
	return r.Bucket.NewRangeReader(ctx, key, offset, length)
}

// TestDeepDecodeStreams: deep verify reads each data and index file in
// ranges no larger than its largest page buffer or its metadata region,
// never whole, so its memory is bounded by a page, not by a file or the
// table; and it reports its progress (bytes of every file decoded) in a
// phase of its own.
func TestDeepDecodeStreams(t *testing.T) {
	dir := decodeTableCopy(t)
	logged := &readLog{Bucket: open(t, dir), gets: map[string]int{}, ranged: map[string]int64{}}
	core, lines := observer.New(zap.InfoLevel)
	rep := progress.New(progress.Options{Clock: &tickClock{now: time.Unix(0, 0)}, Logger: zap.New(core), Interval: time.Second})
	r, err := Run(progress.With(context.Background(), rep), logged, Options{Deep: true})
	if err != nil {
		t.Fatal(err)
	}
	wantOK(t, "intact", r)
	var total int64
	files := 0
	for _, pattern := range []string{"data/*.lance", "_indices/*/*.lance"} {
		m, _ := filepath.Glob(filepath.Join(dir, pattern))
		for _, p := range m {
			key, _ := filepath.Rel(dir, p)
			key = filepath.ToSlash(key)
			f, b := openLance(t, p)
			bound := int64(len(b)) - int64(f.Footer.ColumnMetaStart) // the metadata region
			for _, cm := range f.Columns {
				for _, pg := range cm.GetPages() {
					for _, s := range pg.GetBufferSizes() {
						bound = max(bound, int64(s))
					}
				}
			}
			for _, g := range f.Globals {
				bound = max(bound, int64(g.Size))
			}
			if logged.gets[key] != 0 {
				t.Errorf("%s read whole %d times", key, logged.gets[key])
			}
			if got := logged.ranged[key]; got == 0 || got > bound {
				t.Errorf("%s (%d bytes): largest read %d bytes, its largest page or metadata %d", key, len(b), got, bound)
			}
			t.Logf("%s: %d bytes, largest read %d", key, len(b), logged.ranged[key])
			total += int64(len(b))
			files++
		}
	}
	if files != 5 {
		t.Fatalf("%d data and index files, want 5", files)
	}
	done := false
	for _, e := range lines.FilterMessage("progress done").All() {
		m := e.ContextMap()
		if m["phase"] == "verify decode" {
			done = true
			if m["bytes_done"] != total || m["bytes_total"] != total || m["rows_done"].(int64) <= 0 {
				t.Errorf("final progress %v, want %d bytes of %d", m, total, total)
			}
		}
	}
	if !done || len(lines.FilterMessage("progress").FilterField(zap.String("phase", "verify decode")).All()) == 0 {
		t.Errorf("no progress of phase verify decode: %v", lines.All())
	}
}

// TestDeepDecodesGenerationPages: a page of an unmerged generation's data
// file overwritten (size unchanged) is a violation naming the file, the
// column and the page.
func TestDeepDecodesGenerationPages(t *testing.T) {
	dir := lancedb.CorpusDir(t, "memwal_1")
	key := one(t, dir, "_mem_wal/*/*_gen_2/data/*.lance")
	f, _ := openLance(t, filepath.Join(dir, key))
	col := f.Schema.Field("s").Column
	page := overwritePage(t, filepath.Join(dir, key), col, 0)
	rep := run(t, dir, Options{Deep: true})
	if len(rep.Violations) != 1 || rep.Violations[0].Check != CheckSSTable || rep.Violations[0].Object != key ||
		!strings.Contains(rep.Violations[0].Message, page) {
		t.Errorf("want one %s violation on %s naming %s; got %v", CheckSSTable, key, page, rep.Violations)
	}
}

// TestDeepDecodeVersions: a file of a version compactord does not read is
// a warning, not a violation: a data file whose manifest records a legacy
// (0.0) or unknown version, and an index file whose well-formed footer
// names another version. A data file whose footer contradicts the version
// the manifest records is damaged.
func TestDeepDecodeVersions(t *testing.T) {
	warned := func(t *testing.T, rep *Report, check, key, msg string) {
		t.Helper()
		for _, w := range rep.Warnings {
			if w.Check == check && w.Object == key && strings.Contains(w.Message, msg) {
				return
			}
		}
		t.Errorf("no %s warning on %s saying %q; warnings %v", check, key, msg, rep.Warnings)
	}
	t.Run("data file recorded as legacy", func(t *testing.T) {
		dir := lancedb.CorpusDir(t, "plain")
		var key string
		rewriteLatest(t, dir, func(f *meta.ManifestFile) {
			df := f.Manifest.GetFragments()[2].GetFiles()[0] // only the latest version has fragment 2
			df.FileMajorVersion, df.FileMinorVersion = 0, 0
			key = meta.DataKey(df.GetPath())
		})
		overwrite(t, filepath.Join(dir, key), 0, 16) // not read: its damage is not seen
		rep := run(t, dir, Options{Deep: true, Version: 3})
		if !rep.OK() {
			t.Errorf("violations %v", rep.Violations)
		}
		warned(t, rep, CheckDataFile, key, "records file version 0.0, which compactord does not read")
	})
	t.Run("index file of another version", func(t *testing.T) {
		dir := lancedb.CorpusDir(t, "indexed")
		key := one(t, dir, "_indices/*/page_lookup.lance")
		st, _ := os.Stat(filepath.Join(dir, key))
		b, _ := os.ReadFile(filepath.Join(dir, key))
		b[st.Size()-8], b[st.Size()-6] = 9, 9 // the footer's major and minor
		if err := os.WriteFile(filepath.Join(dir, key), b, 0o644); err != nil {
			t.Fatal(err)
		}
		rep := run(t, dir, Options{Deep: true})
		warned(t, rep, CheckIndex, key, "unsupported file version 9.9")
		for _, v := range rep.Violations {
			if v.Object == key {
				t.Errorf("violation %v", v)
			}
		}
	})
	t.Run("data file footer contradicts the manifest", func(t *testing.T) {
		dir := lancedb.CorpusDir(t, "plain")
		key := one(t, dir, "data/*.lance")
		st, _ := os.Stat(filepath.Join(dir, key))
		b, _ := os.ReadFile(filepath.Join(dir, key))
		b[st.Size()-8], b[st.Size()-6] = 9, 9
		if err := os.WriteFile(filepath.Join(dir, key), b, 0o644); err != nil {
			t.Fatal(err)
		}
		wantCheck(t, run(t, dir, Options{Deep: true}), CheckDataFile, key)
	})
}
