package benchsuite

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/merge"
	"github.com/compactord/compactord/internal/table"
	"github.com/compactord/compactord/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

func TestMedianQuantileRatiosRotate(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
	if got := quantile([]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 0.9); got != 9 {
		t.Errorf("p90 = %v, want 9", got)
	}
	s := func(x float64) time.Duration { return time.Duration(x * float64(time.Second)) }
	// Ratios are taken trial by trial, not of medians.
	got := ratios([]time.Duration{s(2), s(9), s(1)}, []time.Duration{s(1), s(3), s(0)})
	if len(got) != 2 || got[0] != 2 || got[1] != 3 {
		t.Errorf("ratios = %v, want [2 3] (a zero denominator is skipped)", got)
	}
	if r := rotate([]int{1, 2, 3}, 4); r[0] != 2 || r[1] != 3 || r[2] != 1 {
		t.Errorf("rotate = %v", r)
	}
}

func TestSplice(t *testing.T) {
	block := BeginMarker + "\nnew\n" + EndMarker
	doc := "# Benchmarks\n\n## Commit loop\n\nkept\n"
	once := Splice(doc, block)
	if !strings.HasPrefix(once, doc) || !strings.HasSuffix(once, block+"\n") {
		t.Fatalf("append:\n%s", once)
	}
	twice := Splice(once+"\n## After\n\nalso kept\n", BeginMarker+"\nnewer\n"+EndMarker)
	if strings.Contains(twice, "\nnew\n") || !strings.Contains(twice, "newer") || !strings.Contains(twice, "also kept") || !strings.HasPrefix(twice, doc) {
		t.Fatalf("replace:\n%s", twice)
	}
	if strings.Count(twice, BeginMarker) != 1 {
		t.Fatalf("markers duplicated:\n%s", twice)
	}
}

func runs(walls ...float64) []Run {
	out := make([]Run, len(walls))
	for i, w := range walls {
		out[i] = Run{Wall: time.Duration(w * float64(time.Second))}
	}
	return out
}

func TestGoals(t *testing.T) {
	res := &Results{
		Compact: &CompactResult{Runs: map[string][]Run{
			stepCP: runs(1, 1, 1), stepCompact: runs(1.5, 3, 1.8), // ratios 0.67, 0.33, 0.56: median 0.56
			stepDuckDel: runs(10, 10, 10), stepCompactDel: runs(9, 11, 12), // 1.11, 0.91, 0.83: median 0.91
		}},
		Commit: []CommitResult{{Backend: "file", PutIfAbsent: []float64{1, 1, 1}, Commit: []float64{1.4, 1.5, 1.6}}},
		Errors: map[string]string{"merge": "boom"},
	}
	got := map[string]string{}
	for _, g := range Goals(res) {
		got[g.What] = g.Status
	}
	for what, want := range map[string]string{
		"compaction without deletions (row-group copy path)": "met",
		"compaction with 10 % of rows deleted":               "**not met**",
		"merge of 1 M upserts into a 10 M-row table":         "not measured",
		"commit latency at 1 committer, file":                "met",
		"idle daemon over 100 tables":                        "not measured",
	} {
		if got[what] != want {
			t.Errorf("%s: %q, want %q (all: %v)", what, got[what], want, got)
		}
	}
	doc := Render(res, DefaultConfig())
	if !strings.HasPrefix(doc, BeginMarker) || !strings.HasSuffix(doc, EndMarker) || !strings.Contains(doc, "- merge: boom") {
		t.Fatalf("render:\n%s", doc)
	}
}

func TestConfigValidate(t *testing.T) {
	c := DefaultConfig()
	c.Work, c.Compactord, c.Self = "w", "c", "s"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c.CompactRows = 1000 // not a multiple of 32 fragments
	c.Only = []string{"nope"}
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "multiple of its fragments") || !strings.Contains(err.Error(), `unknown section "nope"`) {
		t.Fatalf("err = %v", err)
	}
}

// The deleted data set deletes exactly the rows DuckDB's filter drops.
func TestGenCompactDeletesMultiplesOfTen(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir() + "/t"
	info, err := GenCompact(ctx, GenSpec{Dir: dir, Fragments: 3, RowsPerFragment: 25, Parallelism: 2, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if info.Rows != 75 || len(info.Files) != 3 || info.Bytes == 0 {
		t.Fatalf("info %+v", info)
	}
	del, err := DeleteEveryTenth(ctx, dir, 25)
	if err != nil {
		t.Fatal(err)
	}
	if del.Rows != 75-8 { // ids 0, 10, ..., 70
		t.Fatalf("%d live rows, want 67", del.Rows)
	}
	tb, b, err := openTable(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	seen := 0
	if _, err := tb.Scan(ctx, 0, func(r table.Row) error {
		if id := r[0].(int64); id%DeleteModulo == 0 {
			t.Errorf("row %d survived", id)
		}
		seen++
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	if seen != 67 {
		t.Fatalf("scanned %d rows", seen)
	}
	if _, err := DeleteEveryTenth(ctx, dir, 24); err == nil {
		t.Fatal("a wrong fragment size must be refused, not mis-delete")
	}
}

// The merge data set is ready for a merge that updates every upsert.
func TestGenMerge(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir() + "/m"
	info, err := GenMerge(ctx, MergeSpec{Dir: dir, BaseRows: 100, RowsPerFragment: 50, Upserts: 10, Parallelism: 2, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if info.Rows != 100 || info.Upserts != 10 || info.SSTable == "" || len(info.Files) != 2 {
		t.Fatalf("info %+v", info)
	}
	tb, b, err := openTable(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	mg, err := merge.New(merge.Config{}, tb)
	if err != nil {
		t.Fatal(err)
	}
	res, err := mg.Run(ctx, "s0")
	if err != nil || len(res) != 1 || res[0].Updated != 10 || res[0].Inserted != 0 {
		t.Fatalf("merge: %+v %v", res, err)
	}
}

// A partial run keeps the other sections of the previous one, dated.
func TestCarryOver(t *testing.T) {
	prevStart := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)
	prev := &Results{Started: prevStart, Merge: &MergeResult{Upserts: 7}, Idle: &IdleResult{Tables: 3},
		Compact: &CompactResult{Fragments: 1}, Carried: map[string]time.Time{"idle": prevStart.Add(-time.Hour)}}
	cur := &Results{Compact: &CompactResult{Fragments: 2}}
	cur.CarryOver(prev, func(s string) bool { return s == "compact" })
	if cur.Compact.Fragments != 2 || cur.Merge == nil || cur.Idle == nil || cur.RSS != nil {
		t.Fatalf("carried %+v", cur)
	}
	if !cur.Carried["merge"].Equal(prevStart) || !cur.Carried["idle"].Equal(prevStart.Add(-time.Hour)) || len(cur.Carried) != 2 {
		t.Fatalf("dates %v", cur.Carried)
	}
	if doc := Render(cur, DefaultConfig()); !strings.Contains(doc, "carried over from an earlier run: merge (2026-01-02 03:04 UTC), idle (2026-01-02 02:04 UTC)") {
		t.Fatalf("render:\n%s", doc)
	}
}
