package fts

import (
	"bytes"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

// appendText is row id's text in the catch-up fixture: nil (a null) when
// id % 10 = 3, empty when id % 10 = 4, else ftsDoc plus a 39-byte token
// (kept) and a 40-byte one (dropped by max_token_length 40).
func appendText(id int64) any {
	switch id % 10 {
	case 3:
		return nil
	case 4:
		return ""
	}
	return ftsDoc(id) + " " + strings.Repeat("x", 39) + " " + strings.Repeat("y", 40)
}

// TestAppendMatchesLanceDB: for a whitespace, lower-case, unstemmed index
// over 300 rows, the partition Append builds over 100 appended rows is
// the one LanceDB's optimize() added: same docs (null and empty texts
// left out), token ids, postings and posting bytes after the block score,
// impacts, and block scores a few ulps above LanceDB's; metadata.lance
// lists both partitions.
func TestAppendMatchesLanceDB(t *testing.T) {
	lancedb.Require(t)
	dir := t.TempDir()
	f := &lancedb.Fixture{URI: dir, Table: "t", Dir: filepath.Join(dir, "t.lance")}
	rows := func(lo, hi int64) []lancedb.Row {
		var out []lancedb.Row
		for i := lo; i < hi; i++ {
			out = append(out, lancedb.Row{"id": i, "doc": appendText(i)})
		}
		return out
	}
	opts := map[string]any{"baseTokenizer": "whitespace", "stem": false, "removeStopWords": false, "asciiFolding": false}
	f.Run(t, lancedb.Create([]lancedb.Column{{Name: "id", Type: "int64"}, {Name: "doc", Type: "utf8", Nullable: true}}, rows(0, 300)),
		lancedb.CreateVectorIndex("doc", "fts", "doc_idx", opts), lancedb.Add(rows(300, 400)))
	before := t.TempDir()
	copyTree(t, segmentDir(t, f.Dir), before)
	out := f.Run(t, lancedb.Optimize(lancedb.OptimizeOpts{}), lancedb.ListIndices())
	ixs, err := out.Indices(1)
	if err != nil || len(ixs) != 1 {
		t.Fatalf("indexes after optimize: %v %v", ixs, err)
	}
	theirs, err := ReadSegment(dirOpener(filepath.Join(f.Dir, "_indices", ixs[0].IndexUUID)))
	if err != nil {
		t.Fatal(err)
	}
	var docs []Doc
	for i := int64(300); i < 400; i++ {
		if s, ok := appendText(i).(string); ok {
			docs = append(docs, Doc{RowID: meta.RowAddr(1, uint32(i-300)), Text: s})
		}
	}
	files, copies, n, err := Append(dirOpener(before), docs)
	if err != nil {
		t.Fatal(err)
	}
	if n != 80 || !slices.Equal(copies, []string{TokensFile(0), DocsFile(0), InvertFile(0)}) {
		t.Fatalf("indexed %d docs, copies %v", n, copies)
	}
	for _, c := range copies {
		b, err := readFile(filepath.Join(before, c))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, NamedFile{c, b})
	}
	ours, err := ReadSegment(memOpener(files))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ours.Meta.Partitions, theirs.Meta.Partitions) || len(ours.Partitions) != 2 {
		t.Fatalf("partitions %v, LanceDB's %v", ours.Meta.Partitions, theirs.Meta.Partitions)
	}
	samePartition(t, ours.Partitions[1], theirs.Partitions[1])
}

// samePartition compares a partition built here with LanceDB's: docs,
// token ids, postings, impacts and posting bytes after the block score
// (scores a few ulps above).
func samePartition(t *testing.T, op, tp *Partition) {
	t.Helper()
	if !slices.Equal(op.RowIDs, tp.RowIDs) || !slices.Equal(op.NumTokens, tp.NumTokens) || op.TotalTokens != tp.TotalTokens || op.TotalLength != tp.TotalLength {
		t.Fatalf("docs: %d, total %d; LanceDB's %d, total %d", len(op.RowIDs), op.TotalTokens, len(tp.RowIDs), tp.TotalTokens)
	}
	if len(op.Tokens) != len(tp.Tokens) {
		t.Fatalf("%d tokens, LanceDB's %d", len(op.Tokens), len(tp.Tokens))
	}
	for tok, id := range tp.Tokens {
		if oid, ok := op.Tokens[tok]; !ok || oid != id {
			t.Fatalf("%q: id %d (%v), LanceDB's %d", tok, oid, ok, id)
		}
		a, err := op.Decode(id, false)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := tp.Decode(id, false)
		if !slices.Equal(a.Docs, b.Docs) || !slices.Equal(a.Freqs, b.Freqs) {
			t.Fatalf("%q: postings differ", tok)
		}
		for i := range a.BlockScores {
			d := int64(math.Float32bits(a.BlockScores[i])) - int64(math.Float32bits(b.BlockScores[i]))
			if d < 1 || d > 5 || !bytes.Equal(op.Postings[id][i][4:], tp.Postings[id][i][4:]) {
				t.Fatalf("%q block %d: score %v, LanceDB's %v, or the bytes after it differ", tok, i, a.BlockScores[i], b.BlockScores[i])
			}
		}
		if !slices.EqualFunc(op.Impacts[id], tp.Impacts[id], bytes.Equal) {
			t.Fatalf("%q: impacts differ", tok)
		}
	}
}

// TestRebuildMatchesLanceDB: Rebuild over every live row of a table whose
// whitespace index has two partitions and deleted rows equals the one
// partition a fresh LanceDB index over the same rows has.
func TestRebuildMatchesLanceDB(t *testing.T) {
	lancedb.Require(t)
	dir := t.TempDir()
	f := &lancedb.Fixture{URI: dir, Table: "t", Dir: filepath.Join(dir, "t.lance")}
	rows := func(lo, hi int64) []lancedb.Row {
		var out []lancedb.Row
		for i := lo; i < hi; i++ {
			out = append(out, lancedb.Row{"id": i, "doc": appendText(i)})
		}
		return out
	}
	opts := map[string]any{"baseTokenizer": "whitespace", "stem": false, "removeStopWords": false, "asciiFolding": false}
	f.Run(t, lancedb.Create([]lancedb.Column{{Name: "id", Type: "int64"}, {Name: "doc", Type: "utf8", Nullable: true}}, rows(0, 300)),
		lancedb.CreateVectorIndex("doc", "fts", "doc_idx", opts), lancedb.Add(rows(300, 400)), lancedb.Optimize(lancedb.OptimizeOpts{}))
	cur, err := f.Run(t, lancedb.ListIndices()).Indices(0)
	if err != nil || len(cur) != 1 {
		t.Fatalf("indexes: %v %v", cur, err)
	}
	old := t.TempDir()
	copyTree(t, filepath.Join(f.Dir, "_indices", cur[0].IndexUUID), old)
	if s, err := ReadSegment(dirOpener(old)); err != nil || len(s.Partitions) != 2 {
		t.Fatalf("the optimized index: %v partitions (%v), want 2", len(s.Partitions), err)
	}
	out := f.Run(t, lancedb.CreateVectorIndex("doc", "fts", "doc_idx", opts), lancedb.ListIndices())
	ixs, err := out.Indices(1)
	if err != nil || len(ixs) != 1 {
		t.Fatalf("indexes: %v %v", ixs, err)
	}
	theirs, err := ReadSegment(dirOpener(filepath.Join(f.Dir, "_indices", ixs[0].IndexUUID)))
	if err != nil {
		t.Fatal(err)
	}
	var docs []Doc
	for i := int64(0); i < 400; i++ {
		if s, ok := appendText(i).(string); ok {
			docs = append(docs, Doc{RowID: meta.RowAddr(uint32(i/300), uint32(i%300)), Text: s})
		}
	}
	files, n, err := Rebuild(dirOpener(old), docs)
	if err != nil {
		t.Fatal(err)
	}
	ours, err := ReadSegment(memOpener(files))
	if err != nil {
		t.Fatal(err)
	}
	if n != 320 || !slices.Equal(ours.Meta.Partitions, []uint64{0}) || !slices.Equal(theirs.Meta.Partitions, []uint64{0}) {
		t.Fatalf("%d docs, partitions %v; LanceDB's %v", n, ours.Meta.Partitions, theirs.Meta.Partitions)
	}
	samePartition(t, ours.Partitions[0], theirs.Partitions[0])
}
