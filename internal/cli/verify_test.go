package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/compactord/compactord/internal/format/file"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

// newest returns the path of the one file under dir matching pattern
// (the first in name order: under _versions/ that is the newest manifest).
func firstMatch(t *testing.T, dir, pattern string) string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil || len(m) == 0 {
		t.Fatalf("no %s under %s", pattern, dir)
	}
	return m[0]
}

func flipByte(t *testing.T, path string, fromEnd int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-fromEnd] ^= 0xff
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestLanceVerifyCorruption damages one object of a real table at a time:
// verify must exit non-zero with one line on stderr naming the object, and
// leave every file as it found it. inspect, where it reads the object,
// fails the same way.
func TestLanceVerifyCorruption(t *testing.T) {
	cases := []struct {
		name, table string
		damage      func(t *testing.T, dir string) string // returns the object's key
		inspectToo  bool
		deepOnly    bool // the file keeps its size: only --deep decodes it
	}{
		{"manifest truncated", "indexed", func(t *testing.T, dir string) string {
			p := firstMatch(t, dir, "_versions/*.manifest")
			if err := os.Truncate(p, 100); err != nil {
				t.Fatal(err)
			}
			return "_versions/" + filepath.Base(p)
		}, true, false},
		{"manifest footer byte flipped", "plain", func(t *testing.T, dir string) string {
			p := firstMatch(t, dir, "_versions/*.manifest")
			flipByte(t, p, 16) // the manifest offset's low byte
			return "_versions/" + filepath.Base(p)
		}, true, false},
		{"older manifest magic flipped", "plain", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "_versions", "18446744073709551614.manifest") // version 1
			flipByte(t, p, 1)
			return "_versions/" + filepath.Base(p)
		}, false, false},
		{"shard manifest garbage", "memwal_1", func(t *testing.T, dir string) string {
			p := firstMatch(t, dir, "_mem_wal/*/manifest/1010*.binpb") // version 5, the newest
			if err := os.WriteFile(p, []byte{0xff, 0xff, 0xff}, 0o644); err != nil {
				t.Fatal(err)
			}
			rel, _ := filepath.Rel(dir, p)
			return filepath.ToSlash(rel)
		}, true, false},
		{"transaction file garbage", "deletes_arrow", func(t *testing.T, dir string) string {
			p := firstMatch(t, dir, "_transactions/4-*.txn") // made the latest version
			if err := os.WriteFile(p, []byte{0x0a, 0xff}, 0o644); err != nil {
				t.Fatal(err)
			}
			return "_transactions/" + filepath.Base(p)
		}, false, false},
		{"data file deleted", "plain", func(t *testing.T, dir string) string {
			p := firstMatch(t, dir, "data/*.lance")
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			return "data/" + filepath.Base(p)
		}, false, false},
		{"index file deleted", "indexed", func(t *testing.T, dir string) string {
			p := firstMatch(t, dir, "_indices/*/bitmap_page_lookup.lance")
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			rel, _ := filepath.Rel(dir, filepath.Dir(p))
			return filepath.ToSlash(rel) + "/"
		}, false, false},
		{"deletion file deleted", "deletes_bin", func(t *testing.T, dir string) string {
			p := firstMatch(t, dir, "_deletions/*.bin")
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			return "_deletions/" + filepath.Base(p)
		}, false, false},
		{"data file magic flipped", "plain", func(t *testing.T, dir string) string {
			p := firstMatch(t, dir, "data/*.lance")
			flipByte(t, p, 1)
			return "data/" + filepath.Base(p)
		}, false, true},
		{"btree file magic flipped", "indexed", func(t *testing.T, dir string) string {
			p := firstMatch(t, dir, "_indices/*/page_data.lance")
			flipByte(t, p, 2)
			rel, _ := filepath.Rel(dir, p)
			return filepath.ToSlash(rel)
		}, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := lancedb.CorpusDir(t, tc.table)
			if r := run(t, "", "verify", dir); r.code != 0 {
				t.Fatalf("intact table: exit %d: %s%s", r.code, r.stdout, r.stderr)
			}
			obj := tc.damage(t, dir)
			before := snapshot(t, dir)
			cmds := [][]string{{"verify", dir}, {"verify", "file://" + dir, "--deep"}}
			if tc.deepOnly {
				if r := run(t, "", "verify", dir); r.code != 0 {
					t.Errorf("plain verify read a same-size file: exit %d: %s", r.code, r.stderr)
				}
				cmds = cmds[1:]
			}
			if tc.inspectToo {
				cmds = append(cmds, []string{"inspect", dir})
			}
			for _, args := range cmds {
				r := run(t, "", args...)
				if r.code == 0 {
					t.Errorf("%v: exit 0 on a damaged table; stdout %s", args, r.stdout)
				}
				lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
				if len(lines) != 1 || !strings.Contains(lines[0], obj) {
					t.Errorf("%v: stderr %q: want one line naming %s", args, r.stderr, obj)
				}
			}
			if after := snapshot(t, dir); strings.Join(after, "\n") != strings.Join(before, "\n") {
				t.Errorf("files changed:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
}

// TestLanceInspectCLI: inspect takes a plain path or a file:// URL to a
// *.lance directory and prints the Lance document, as it does for a table
// `table create` made.
func TestLanceInspectCLI(t *testing.T) {
	dir := lancedb.CorpusDir(t, "memwal_1")
	for _, u := range []string{dir, "file://" + dir} {
		doc := mustRun(t, "", "inspect", u)
		if doc["version"] != float64(4) || doc["writer"] != "lance/12.0.0" || doc["mem_wal"] == nil {
			t.Errorf("inspect %s: %v", u, doc)
		}
	}
	doc := mustRun(t, "", "inspect", dir, "--version", "2")
	if doc["version"] != float64(2) || doc["operation"] != "create_index" {
		t.Errorf("inspect --version 2: %v", doc)
	}
	if r := run(t, "", "inspect", dir, "--version", "9"); r.code == 0 || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("--version 9: exit %d stderr %q", r.code, r.stderr)
	}
	// A table `table create` made (compactord's own writer) inspects and
	// verifies the same way.
	own := newTable(t)
	if doc := mustRun(t, "", "inspect", own); doc["version"] != float64(1) || doc["data_format"] != "lance/2.2" {
		t.Errorf("inspect of a table compactord created: %v", doc)
	}
	if r := run(t, "", "verify", own); r.code != 0 {
		t.Errorf("verify of a table compactord created: exit %d: %s", r.code, r.stderr)
	}
}

// overwriteMiddle writes a fixed pattern over 8 KB in the middle of the
// file at path (its size unchanged) and names the page holding the middle.
func overwriteMiddle(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lf, err := file.Open(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	mid := uint64(len(b) / 2)
	page := ""
	for c, cm := range lf.Columns {
		for i, p := range cm.GetPages() {
			for k, o := range p.GetBufferOffsets() {
				if mid >= o && mid < o+p.GetBufferSizes()[k] {
					page = fmt.Sprintf("column %d (%s) page %d", c, lf.Schema.Fields[c].Name, i)
				}
			}
		}
	}
	if page == "" {
		t.Fatalf("%s: the middle is in no page", path)
	}
	for i := mid - 4096; i < mid+4096; i++ {
		b[i] = byte(i*37 + 11)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return page
}

// TestVerifyDeepNamesDamagedPage: on a table LanceDB wrote (two fragments
// of 20,000 rows, a btree and a bitmap index), 8 KB overwritten in the
// middle of a data file or an index file (sizes unchanged) pass a plain
// verify but make verify --deep exit non-zero with one line naming the
// file, the column and the page; LanceDB fails to read the damaged data
// file too.
func TestVerifyDeepNamesDamagedPage(t *testing.T) {
	lancedb.Require(t)
	for _, pattern := range []string{"data/*.lance", "_indices/*/page_data.lance", "_indices/*/bitmap_page_lookup.lance"} {
		t.Run(pattern, func(t *testing.T) {
			f := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
			f.Dir = filepath.Join(f.URI, "t.lance")
			f.Run(t, lancedb.Create(lancedb.BasicSchema, lancedb.BasicRows(0, 20000)), lancedb.Add(lancedb.BasicRows(20000, 40000)),
				lancedb.CreateIndex("id", "btree", "id_idx"), lancedb.CreateIndex("cat", "bitmap", "cat_idx"))
			if r := run(t, "", "verify", f.Dir, "--deep"); r.code != 0 {
				t.Fatalf("intact table: exit %d: %s%s", r.code, r.stdout, r.stderr)
			}
			p := firstMatch(t, f.Dir, pattern)
			rel, _ := filepath.Rel(f.Dir, p)
			key := filepath.ToSlash(rel)
			page := overwriteMiddle(t, p)
			if r := run(t, "", "verify", f.Dir); r.code != 0 {
				t.Errorf("plain verify read a same-size file: exit %d: %s", r.code, r.stderr)
			}
			r := run(t, "", "verify", f.Dir, "--deep")
			lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
			if r.code == 0 || len(lines) != 1 || !strings.Contains(lines[0], key+":") || !strings.Contains(lines[0], page) {
				t.Errorf("exit %d, stderr %q: want one line naming %s and %s", r.code, r.stderr, key, page)
			}
			if pattern == "data/*.lance" {
				f.Run(t, lancedb.ReadRows(lancedb.ReadOpts{}).ExpectError())
			}
		})
	}
}
