package fts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

// ftsDoc is row id's text: alpha<id%5> beta<id%7> Running quickly w<id>,
// plus "delta delta the" when id % 4 = 0.
func ftsDoc(id int64) string {
	doc := fmt.Sprintf("alpha%d beta%d Running quickly w%d", id%5, id%7, id)
	if id%4 == 0 {
		doc += " delta delta the"
	}
	return doc
}

// ftsFixture is a LanceDB table of 1000 rows in fragments of 600 and 400
// with LanceDB's default full-text index doc_idx on doc.
func ftsFixture(t *testing.T) *lancedb.Fixture {
	t.Helper()
	dir := t.TempDir()
	f := &lancedb.Fixture{URI: dir, Table: "t", Dir: filepath.Join(dir, "t.lance")}
	var rows []lancedb.Row
	for i := int64(0); i < 1000; i++ {
		rows = append(rows, lancedb.Row{"id": i, "doc": ftsDoc(i)})
	}
	f.Run(t, lancedb.Create([]lancedb.Column{{Name: "id", Type: "int64"}, {Name: "doc", Type: "utf8", Nullable: true}}, rows[:600]),
		lancedb.Add(rows[600:]), lancedb.CreateIndex("doc", "fts", "doc_idx"))
	return f
}

// segmentDir is the directory of the table's only inverted segment.
func segmentDir(t *testing.T, dir string) string {
	t.Helper()
	ps, _ := filepath.Glob(filepath.Join(dir, "_indices", "*", MetadataFile))
	if len(ps) != 1 {
		t.Fatalf("%d inverted segments under %s", len(ps), dir)
	}
	return filepath.Dir(ps[0])
}

func dirOpener(dir string) Opener {
	return func(name string) (io.ReaderAt, int64, error) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, 0, err
		}
		return bytes.NewReader(b), int64(len(b)), nil
	}
}

// TestReadSegmentLanceDB: LanceDB's default full-text segment decodes
// into what the data says: one partition, the docs in row order with
// their token counts, each token's postings (every doc's frequencies sum
// to its token count), stemmed tokens present and the stop word absent;
// and every posting list re-encodes to LanceDB's bytes.
func TestReadSegmentLanceDB(t *testing.T) {
	lancedb.Require(t)
	f := ftsFixture(t)
	s, err := ReadSegment(dirOpener(segmentDir(t, f.Dir)))
	if err != nil {
		t.Fatal(err)
	}
	if s.Meta.FormatVersion != 2 || s.Meta.Fixed32Tail || !slices.Equal(s.Meta.Partitions, []uint64{0}) || s.Meta.Params.BaseTokenizer != "simple" || !s.Meta.Params.Stem {
		t.Fatalf("metadata %+v", s.Meta)
	}
	p := s.Partitions[0]
	if len(p.RowIDs) != 1000 {
		t.Fatalf("%d docs, want 1000", len(p.RowIDs))
	}
	var total uint64
	for i, a := range p.RowIDs {
		if want := meta.RowAddr(uint32(i/600), uint32(i%600)); a != want {
			t.Fatalf("doc %d is row %x, want %x", i, a, want)
		}
		total += uint64(p.NumTokens[i])
	}
	if total != p.TotalTokens {
		t.Fatalf("docs hold %d tokens, total_tokens %d", total, p.TotalTokens)
	}
	sums := make([]uint32, len(p.RowIDs))
	for tok, id := range p.Tokens {
		ps, err := p.Decode(id, false)
		if err != nil {
			t.Fatalf("%q: %v", tok, err)
		}
		for i, d := range ps.Docs {
			sums[d] += ps.Freqs[i]
		}
		enc, err := EncodePostings(ps, false)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.EqualFunc(enc, p.Postings[id], bytes.Equal) {
			t.Fatalf("%q: re-encoded posting blocks differ from LanceDB's", tok)
		}
		var maxScore float32
		for _, b := range ps.BlockScores {
			maxScore = max(maxScore, b)
		}
		if maxScore != p.MaxScores[id] {
			t.Errorf("%q: _max_score %v, block maxima %v", tok, p.MaxScores[id], ps.BlockScores)
		}
	}
	for d, n := range sums {
		if n != p.NumTokens[d] {
			t.Fatalf("doc %d: postings hold %d tokens, _num_tokens %d", d, n, p.NumTokens[d])
		}
	}
	// Stemmed and stop words, and the postings of two tokens.
	for _, absent := range []string{"the", "running", "quickly"} {
		if _, ok := p.Tokens[absent]; ok {
			t.Errorf("token %q is in the index", absent)
		}
	}
	check := func(tok string, want func(id int) (uint32, bool)) {
		id, ok := p.Tokens[tok]
		if !ok {
			t.Fatalf("no token %q", tok)
		}
		ps, _ := p.Decode(id, false)
		var docs, freqs []uint32
		for i := range 1000 {
			if f, ok := want(i); ok {
				docs, freqs = append(docs, uint32(i)), append(freqs, f)
			}
		}
		if !slices.Equal(ps.Docs, docs) || !slices.Equal(ps.Freqs, freqs) {
			t.Errorf("%q: %d postings, want %d", tok, len(ps.Docs), len(docs))
		}
	}
	check("alpha3", func(i int) (uint32, bool) { return 1, i%5 == 3 })
	check("delta", func(i int) (uint32, bool) { return 2, i%4 == 0 })
	check("run", func(i int) (uint32, bool) { return 1, true })
}

// TestReadMetadataRefuses: format parameters compactord does not read
// are refused in one line naming the parameter.
func TestReadMetadataRefuses(t *testing.T) {
	lancedb.Require(t)
	f := ftsFixture(t)
	dir := segmentDir(t, f.Dir)
	raw, err := os.ReadFile(filepath.Join(dir, MetadataFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ from, to, want string }{
		{`"with_position":false`, `"with_position":true `, "with_position"},
		{"varint_delta_v1", "varint_delta_v9", "posting_tail_codec"},
	} {
		// Same-length substitutions keep the file's offsets valid.
		mod := bytes.Replace(raw, []byte(c.from), []byte(c.to), 1)
		if bytes.Equal(mod, raw) {
			t.Fatalf("%q not in metadata.lance", c.from)
		}
		open := func(name string) (io.ReaderAt, int64, error) { return bytes.NewReader(mod), int64(len(mod)), nil }
		_, err := ReadMetadata(open)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line naming %s", c.to, err, c.want)
		}
	}
}

func readFile(p string) ([]byte, error)  { return os.ReadFile(p) }
func writeFile(p string, b []byte) error { return os.WriteFile(p, b, 0o644) }

func jsonUnmarshal(s string, p *Params) error {
	if err := json.Unmarshal([]byte(s), p); err != nil {
		return err
	}
	p.Raw = json.RawMessage(s)
	return nil
}
