package index

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/compactord/compactord/internal/testing/lancedb"
)

// TestCrowdedIndexes: an index is crowded past the threshold by its
// segments (a btree of delta segments) or, full-text, by its partitions;
// one Rebuild would refuse (a stemmed full-text index) is skipped with
// the reason; 0 lists nothing.
func TestCrowdedIndexes(t *testing.T) {
	lancedb.Require(t)
	f := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
	f.Dir = filepath.Join(f.URI, "t.lance")
	schema := []lancedb.Column{{Name: "id", Type: "int64"}, {Name: "doc", Type: "utf8", Nullable: true}, {Name: "s", Type: "utf8", Nullable: true}}
	rows := func(lo, hi int64) []lancedb.Row {
		var out []lancedb.Row
		for i := lo; i < hi; i++ {
			out = append(out, lancedb.Row{"id": i, "doc": "word w" + string(rune('a'+i%26)), "s": "running dogs"})
		}
		return out
	}
	opts := map[string]any{"baseTokenizer": "whitespace", "stem": false, "removeStopWords": false, "asciiFolding": false}
	f.Run(t, lancedb.Create(schema, rows(0, 50)), lancedb.CreateIndex("id", "btree", "id_idx"),
		lancedb.CreateVectorIndex("doc", "fts", "doc_idx", opts), lancedb.CreateIndex("s", "fts", "s_idx"))
	h := openHandle(t, f.Dir)
	// Two appends, each caught up by delta segments / partitions (never
	// rebuilt): id_idx 3 segments, doc_idx 3 partitions; s_idx (stemmed)
	// is left to LanceDB and keeps 1 partition.
	for i := int64(1); i <= 2; i++ {
		f.Run(t, lancedb.Add(rows(50*i, 50*i+50)))
		if _, err := CatchUp(t.Context(), h, Options{MaxSegments: -1}); err != nil {
			t.Fatal(err)
		}
	}
	read := mustRead(t, h)
	names := func(cs []Crowded) string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Name+":"+c.Kind+":"+string(rune('0'+c.Pieces)))
		}
		return strings.Join(out, ",")
	}
	for _, c := range []struct {
		over int
		want string
	}{{0, ""}, {1, "doc_idx:inverted:3,id_idx:btree:3"}, {2, "doc_idx:inverted:3,id_idx:btree:3"}, {3, ""}} {
		got, skipped, err := CrowdedIndexes(t.Context(), h.Bucket, read, nil, c.over)
		if err != nil {
			t.Fatal(err)
		}
		if names(got) != c.want {
			t.Errorf("over %d: crowded %q, want %q", c.over, names(got), c.want)
		}
		if c.over == 0 && len(skipped) != 0 {
			t.Errorf("over 0 skipped %+v", skipped)
		}
	}
	if got, skipped, err := CrowdedIndexes(t.Context(), h.Bucket, read, []string{"s_idx"}, 1); err != nil || len(got) != 0 || len(skipped) != 0 {
		t.Fatalf("s_idx has 1 partition: crowded %+v, skipped %+v (%v)", got, skipped, err)
	}

	// LanceDB's optimize() gives the stemmed index a second partition:
	// crowded past 1, but Rebuild would refuse it.
	g := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
	g.Dir = filepath.Join(g.URI, "t.lance")
	g.Run(t, lancedb.Create(schema, rows(0, 50)), lancedb.CreateIndex("s", "fts", "s_idx"), lancedb.Add(rows(50, 100)), lancedb.Optimize(lancedb.OptimizeOpts{}))
	gh := openHandle(t, g.Dir)
	got, skipped, err := CrowdedIndexes(t.Context(), gh.Bucket, mustRead(t, gh), nil, 1)
	if err != nil || len(got) != 0 || len(skipped) != 1 || skipped[0].Name != "s_idx" || !strings.Contains(skipped[0].Reason, "2 partitions") || !strings.Contains(skipped[0].Reason, "stem") {
		t.Fatalf("stemmed s_idx: crowded %+v, skipped %+v (%v); want it skipped naming 2 partitions and stem", got, skipped, err)
	}
}
