package table

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

// TestAppendWithLanceDB: on a table compactord created (every file
// version) and LanceDB added to, compactord appends 20 000 rows (several
// pages) in a file of the table's version, with the DataFile shape LanceDB
// gives its own; LanceDB and scan read them as written.
func TestAppendWithLanceDB(t *testing.T) {
	lancedb.Require(t)
	dir := t.TempDir()
	fields := createFields(t)
	for _, fv := range FileVersions {
		t.Run(fv, func(t *testing.T) {
			name := "t" + strings.ReplaceAll(fv, ".", "")
			tdir := filepath.Join(dir, name+".lance")
			b := open(t, tdir)
			mf, err := Create(t.Context(), b, fields, fv, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if got := mf.Manifest.GetDataFormat().GetVersion(); got != fv {
				t.Fatalf("data format %s", got)
			}
			add := lanceAdd()
			res := lancedb.MustRun(t, lancedb.Program{URI: dir, Table: name, Steps: []lancedb.Step{
				lancedb.Schema(), lancedb.Add(add), lancedb.ReadRows(lancedb.ReadOpts{})}})
			if n, _ := res.Rows(2); len(n) != 100 {
				t.Fatalf("LanceDB reads %d rows of its add, want 100", len(n))
			}

			h := handle(t, b, commit.DefaultConfig())
			input := jsonRows(0, 20_000)
			cres, rows, err := h.AppendJSON(t.Context(), bytes.NewReader(input))
			if err != nil {
				t.Fatal(err)
			}
			if rows != 20_000 || cres.Version != 3 {
				t.Fatalf("appended %d rows as version %d", rows, cres.Version)
			}
			df := cres.Manifest.Manifest.GetFragments()[1].GetFiles()[0]
			if got := fmt.Sprintf("%d.%d", df.GetFileMajorVersion(), df.GetFileMinorVersion()); got != fv {
				t.Errorf("data file version %s, table %s", got, fv)
			}
			head, _, _ := meta.ReadLatest(t.Context(), b)
			theirs := head.Manifest.GetFragments()[0].GetFiles()[0]
			if !slices.Equal(df.GetFields(), theirs.GetFields()) || !slices.Equal(df.GetColumnIndices(), theirs.GetColumnIndices()) {
				t.Errorf("data file fields %v columns %v, LanceDB's %v %v", df.GetFields(), df.GetColumnIndices(), theirs.GetFields(), theirs.GetColumnIndices())
			}
			if st, err := os.Stat(filepath.Join(tdir, "data", df.GetPath())); err != nil || uint64(st.Size()) != df.GetFileSizeBytes() {
				t.Errorf("data file %s: %v, size %d in the manifest", df.GetPath(), err, df.GetFileSizeBytes())
			}

			res = lancedb.MustRun(t, lancedb.Program{URI: dir, Table: name, Steps: []lancedb.Step{
				lancedb.ReadRows(lancedb.ReadOpts{Where: "id < 100000"}), lancedb.CountRows("")}})
			got := lanceLines(t, res, 0)
			want := sortedByID(strings.Split(strings.TrimSpace(string(input)), "\n"))
			ours := sortedByID(scanLines(t, tdir))
			if n, _ := res.Count(1); n != 20_100 {
				t.Errorf("LanceDB counts %d rows, want 20100", n)
			}
			if len(ours) != 20_100 {
				t.Errorf("scan reads %d rows, want 20100", len(ours))
			}
			if len(got) != len(want) {
				t.Fatalf("LanceDB reads %d of our rows, want %d", len(got), len(want))
			}
			norm := func(s string) string {
				var m map[string]any
				d := json.NewDecoder(strings.NewReader(s))
				d.UseNumber()
				_ = d.Decode(&m)
				for _, c := range createCols {
					if _, ok := m[c.Name]; !ok {
						m[c.Name] = nil
					}
				}
				out, _ := json.Marshal(m)
				return string(out)
			}
			for i := range got {
				if norm(got[i]) != norm(want[i]) {
					t.Fatalf("row %d: LanceDB reads\n %s\nwe wrote\n %s", i, got[i], want[i])
				}
				if norm(ours[i]) != norm(want[i]) {
					t.Fatalf("row %d: scan reads\n %s\nwe wrote\n %s", i, ours[i], want[i])
				}
			}
		})
	}
}

// TestAppendMalformed: a bad line fails the append with its line number;
// nothing is committed and no data file is left behind.
func TestAppendMalformed(t *testing.T) {
	dir := t.TempDir()
	b := open(t, dir)
	if _, err := Create(t.Context(), b, createFields(t), "", time.Now()); err != nil {
		t.Fatal(err)
	}
	h := handle(t, b, commit.DefaultConfig())
	for _, tc := range []struct{ in, want string }{
		{"{\"id\":1}\n{\"id\":2,}\n", "line 2: "},
		{"{\"id\":1}\n\n{\"id\":null}\n", "line 3: column \"id\": null in a non-nullable field"},
		{"{\"id\":1.5}\n", "line 1: column \"id\""},
		{"{\"id\":1,\"nope\":2}\n", "line 1: unknown column \"nope\""},
		{"{\"id\":9223372036854775808}\n", "line 1: column \"id\""},
		{"[1]\n", "line 1: not a JSON object"},
		{"{\"id\":1,\"raw\":\"***\"}\n", "line 1: column \"raw\""},
		{"", "no rows"},
	} {
		_, _, err := h.AppendJSON(t.Context(), strings.NewReader(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("input %q: error %v, want one line with %q", tc.in, err, tc.want)
		}
	}
	if v, _, _ := meta.Latest(t.Context(), b); v != 1 {
		t.Errorf("version %d after failed appends, want 1", v)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "data")); len(ents) != 0 {
		t.Errorf("%d data files left behind", len(ents))
	}
}

// TestAppendLongAndOddLines: lines longer than the input reader's buffer,
// CRLF endings, blank lines and a last line without a newline are read
// whole, each once, with the right line numbers.
func TestAppendLongAndOddLines(t *testing.T) {
	dir := t.TempDir()
	b := open(t, dir)
	if _, err := Create(t.Context(), b, createFields(t), "", time.Now()); err != nil {
		t.Fatal(err)
	}
	h := handle(t, b, commit.DefaultConfig())
	long := strings.Repeat("x", 200_000)
	in := `{"id":1,"cat":"` + long + `"}` + "\n \t\r\n" + `{"id":2,"cat":"b"}` + "\r\n" + `{"id":3,"cat":"` + long + `y"}` + "\n" + `{"id":4}`
	if _, n, err := h.AppendJSON(t.Context(), strings.NewReader(in)); err != nil || n != 4 {
		t.Fatalf("appended %d rows: %v", n, err)
	}
	rows := scanLines(t, dir)
	if len(rows) != 4 {
		t.Fatalf("scan reads %d rows, want 4", len(rows))
	}
	for i, want := range []string{`"cat":"` + long + `"`, `"cat":"b"`, `"cat":"` + long + `y"`, `"cat":null`} {
		if !strings.Contains(rows[i], fmt.Sprintf(`"id":%d`, i+1)) || !strings.Contains(rows[i], want) {
			t.Errorf("row %d: %.100s", i, rows[i])
		}
	}
	_, _, err := h.AppendJSON(t.Context(), strings.NewReader(`{"id":1,"cat":"`+long+`"}`+"\n\n"+`{"id":2,"cat":"`+long+`"`))
	if err == nil || !strings.HasPrefix(err.Error(), "line 3: not a JSON object") {
		t.Errorf("a long bad last line: %.200v", err)
	}
}

// TestAppendAcrossLanceDBCleanup: LanceDB's cleanup (optimize with every
// version but the newest old) runs between compactord's appends. Each
// append lands on the head the cleanup left (the version after the newest
// listed), also when the hint names a version the cleanup removed, a
// version below the head that is still there, or is gone; LanceDB then
// reads every row both writers added.
func TestAppendAcrossLanceDBCleanup(t *testing.T) {
	lancedb.Require(t)
	dir := t.TempDir()
	name := "cleaned"
	b := open(t, filepath.Join(dir, name+".lance"))
	if _, err := Create(t.Context(), b, createFields(t), "", time.Now()); err != nil {
		t.Fatal(err)
	}
	h := handle(t, b, commit.DefaultConfig())
	listedHead := func() (uint64, []uint64) {
		vs, _, err := meta.ListVersions(t.Context(), b)
		if err != nil {
			t.Fatal(err)
		}
		return vs[len(vs)-1], vs
	}
	total := int64(0)
	for round, stale := range []string{"current", "cleaned", "retained", "absent"} {
		lo := int64(round) * 1000
		lancedb.MustRun(t, lancedb.Program{URI: dir, Table: name, Steps: []lancedb.Step{
			lancedb.Add(lanceAdd()), lancedb.Add(lanceAdd()), lancedb.Optimize(lancedb.OptimizeOpts{CleanupNow: true}),
			lancedb.Add(lanceAdd())}})
		total += 300
		head, vs := listedHead()
		if len(vs) > 3 {
			t.Fatalf("round %d: LanceDB's cleanup kept versions %v", round, vs)
		}
		switch stale {
		case "cleaned":
			// A hint naming a version the cleanup removed.
			if err := meta.WriteHint(t.Context(), b, vs[0]-1); err != nil {
				t.Fatal(err)
			}
		case "retained":
			if err := meta.WriteHint(t.Context(), b, vs[0]); err != nil {
				t.Fatal(err)
			}
		case "absent":
			if err := b.Delete(t.Context(), meta.HintKey); err != nil {
				t.Fatal(err)
			}
		}
		if v, _, err := meta.Latest(t.Context(), b); err != nil || v != head {
			t.Fatalf("round %d (%s hint): Latest = %d, %v; the listing's head is %d", round, stale, v, err, head)
		}
		cres, n, err := h.AppendJSON(t.Context(), bytes.NewReader(jsonRows(lo, lo+500)))
		if err != nil {
			t.Fatal(err)
		}
		total += int64(n)
		if cres.Version != head+1 {
			t.Fatalf("round %d (%s hint): appended as version %d, the head was %d", round, stale, cres.Version, head)
		}
		if got, _ := listedHead(); got != cres.Version {
			t.Fatalf("round %d: the newest listed version is %d, ours %d", round, got, cres.Version)
		}
	}
	res := lancedb.MustRun(t, lancedb.Program{URI: dir, Table: name, Steps: []lancedb.Step{lancedb.CountRows("")}})
	if n, err := res.Count(0); err != nil || n != total {
		t.Errorf("LanceDB counts %d rows (%v), both writers added %d", n, err, total)
	}
}
