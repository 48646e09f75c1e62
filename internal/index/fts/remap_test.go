package fts

import (
	"bytes"
	"io"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

func memOpener(files []NamedFile) Opener {
	return func(name string) (io.ReaderAt, int64, error) {
		for _, f := range files {
			if f.Name == name {
				return bytes.NewReader(f.Data), int64(len(f.Data)), nil
			}
		}
		return nil, 0, io.ErrUnexpectedEOF
	}
}

// TestRemapMatchesLanceDB: ftsFixture with id % 7 = 0 deleted, remapped
// here through the row map of a compaction of both fragments into one,
// equals the segment LanceDB's optimize() wrote for that compaction: the
// same docs and token counts, the same tokens and token ids (tokens
// without docs dropped), postings, posting-block and impact bytes (block
// scores within a few ulps, never below), total_tokens.
func TestRemapMatchesLanceDB(t *testing.T) {
	lancedb.Require(t)
	f := ftsFixture(t)
	f.Run(t, lancedb.Delete("id % 7 = 0"))
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
	tp := theirs.Partitions[0]
	if len(tp.RowIDs) == 0 {
		t.Fatal("LanceDB's remapped segment has no docs")
	}
	newFrag := uint32(tp.RowIDs[0] >> 32)
	// Compaction keeps the live rows in order: fragment 0's, then 1's.
	next := uint32(0)
	remap := func(a uint64) (uint64, bool) {
		id := int64(a>>32)*600 + int64(uint32(a))
		if id%7 == 0 {
			return 0, false
		}
		// Addresses come in ascending order within the remap of docs.
		na := meta.RowAddr(newFrag, next)
		next++
		return na, true
	}
	files, st, err := Remap(dirOpener(before), remap)
	if err != nil {
		t.Fatal(err)
	}
	if st.Docs != 1000 || st.Dropped != 143 || st.Kept != 857 {
		t.Fatalf("stats %+v", st)
	}
	// RemapEach holds a partition's stored bytes before reading it and
	// gives them back once its files are put: the same files.
	var held []int64
	open := 0
	var each []NamedFile
	next = 0 // remap numbers the docs as it is called
	if _, err := RemapEach(dirOpener(before), remap, func(n int64) (func(), error) {
		held = append(held, n)
		open++
		return func() { open-- }, nil
	}, func(f NamedFile) error {
		if f.Name != MetadataFile && open != 1 {
			t.Errorf("%s put while %d partitions held", f.Name, open)
		}
		each = append(each, f)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(held) != 1 || held[0] <= 0 || open != 0 || len(each) != len(files) {
		t.Fatalf("held %v (%d not given back), %d files; want one partition's bytes once, %d files", held, open, len(each), len(files))
	}
	// (Byte for byte only in size: a file's schema metadata is a map,
	// encoded in no fixed order.)
	for i := range files {
		if each[i].Name != files[i].Name || len(each[i].Data) != len(files[i].Data) {
			t.Fatalf("file %s (%d bytes) differs from Remap's %s (%d bytes)", each[i].Name, len(each[i].Data), files[i].Name, len(files[i].Data))
		}
	}
	if again, err := ReadSegment(memOpener(each)); err != nil || !slices.Equal(again.Partitions[0].RowIDs, tp.RowIDs) {
		t.Fatalf("RemapEach's segment: %v", err)
	}
	ours, err := ReadSegment(memOpener(files))
	if err != nil {
		t.Fatal(err)
	}
	op := ours.Partitions[0]
	if !slices.Equal(op.RowIDs, tp.RowIDs) || !slices.Equal(op.NumTokens, tp.NumTokens) || op.TotalTokens != tp.TotalTokens {
		t.Fatalf("docs: %d rows, total %d; LanceDB's %d rows, total %d", len(op.RowIDs), op.TotalTokens, len(tp.RowIDs), tp.TotalTokens)
	}
	if len(op.Tokens) != len(tp.Tokens) || len(op.Postings) != len(tp.Postings) || op.TotalLength != tp.TotalLength {
		t.Fatalf("token sets differ: %d tokens of %d bytes; LanceDB's %d of %d bytes", len(op.Tokens), op.TotalLength, len(tp.Tokens), tp.TotalLength)
	}
	for tok, id := range tp.Tokens {
		if op.Tokens[tok] != id {
			t.Fatalf("%q: id %d, LanceDB's %d", tok, op.Tokens[tok], id)
		}
		a, err := op.Decode(id, false)
		if err != nil {
			t.Fatal(err)
		}
		b, err := tp.Decode(id, false)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(a.Docs, b.Docs) || !slices.Equal(a.Freqs, b.Freqs) || op.Lengths[id] != tp.Lengths[id] {
			t.Fatalf("%q: postings differ", tok)
		}
		for i := range a.BlockScores {
			d := int64(math.Float32bits(a.BlockScores[i])) - int64(math.Float32bits(b.BlockScores[i]))
			if d < 1 || d > 5 {
				t.Fatalf("%q block %d: score %v, LanceDB's %v", tok, i, a.BlockScores[i], b.BlockScores[i])
			}
			if !bytes.Equal(op.Postings[id][i][4:], tp.Postings[id][i][4:]) {
				t.Fatalf("%q block %d: bytes after the score differ", tok, i)
			}
		}
		if !slices.EqualFunc(op.Impacts[id], tp.Impacts[id], bytes.Equal) {
			t.Fatalf("%q: impacts %x, LanceDB's %x", tok, op.Impacts[id], tp.Impacts[id])
		}
	}
}

func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	ps, _ := filepath.Glob(filepath.Join(src, "*"))
	for _, p := range ps {
		b, err := readFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := writeFile(filepath.Join(dst, filepath.Base(p)), b); err != nil {
			t.Fatal(err)
		}
	}
}
