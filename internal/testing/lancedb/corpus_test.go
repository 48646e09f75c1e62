package lancedb

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rebuild testdata/corpus with LanceDB (go test ./internal/testing/lancedb -run TestCorpus -update)")

// corpusTables are the corpus tables and the steps that build them.
var corpusTables = map[string]func() ([]Step, map[int64]string){
	"plain":         PlainSteps,
	"deletes_arrow": DeletesSteps,
	"deletes_bin": func() ([]Step, map[int64]string) {
		rows := BasicRows(0, 6000)
		return []Step{Create(BasicSchema, rows), Delete("id < 5000")}, model{}.put(rows).del(idRange(0, 5000)...)
	},
	"indexed": IndexedSteps,
	"tagged":  TaggedSteps,
	"memwal_1": func() ([]Step, map[int64]string) {
		return MemWALSteps(1, 2)
	},
	"memwal_4": func() ([]Step, map[int64]string) {
		return MemWALSteps(4, 2)
	},
	"compacted": func() ([]Step, map[int64]string) {
		steps, want := DeletesSteps()
		return append(steps, CreateIndex("id", "btree", "id_idx"), Optimize(OptimizeOpts{})), want
	},
}

// corpusFiles are files each corpus table must hold (a glob below the
// table directory, at least one match).
var corpusFiles = map[string][]string{
	"plain":         {"_versions/*.manifest", "_transactions/*.txn", "data/*.lance"},
	"deletes_arrow": {"_deletions/*.arrow"},
	"deletes_bin":   {"_deletions/*.bin"},
	"indexed":       {"_indices/*/page_lookup.lance", "_indices/*/bitmap_page_lookup.lance"},
	"tagged":        {"_refs/tags/v1.json", "_refs/tags/v2.json"},
	"memwal_1":      {"_mem_wal/*/manifest/*.binpb", "_mem_wal/*/manifest/version_hint.json", "_mem_wal/*/wal/*.arrow", "_mem_wal/*/*_gen_2/_pk_index/page_data.lance", "_mem_wal/*/*_gen_1/bloom_filter.bin"},
	"memwal_4":      {"_mem_wal/*/*_gen_1/_versions/*.manifest"},
	"compacted":     {"_indices/*/page_data.lance"},
}

func TestCorpus(t *testing.T) {
	if *update {
		updateCorpus(t)
	}
	names, err := CorpusNames()
	if err != nil {
		t.Fatalf("corpus: %v (build it with -update)", err)
	}
	if len(names) != len(corpusTables) {
		t.Errorf("corpus tables %v, want %d", names, len(corpusTables))
	}
	var total int64
	for _, name := range names {
		dir := CorpusDir(t, name)
		for _, g := range append([]string{"_versions/*.manifest"}, corpusFiles[name]...) {
			if m, _ := filepath.Glob(filepath.Join(dir, g)); len(m) == 0 {
				t.Errorf("%s: no %s", name, g)
			}
		}
		_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
			if err == nil && fi.Mode().IsRegular() {
				total += fi.Size()
			}
			return nil
		})
	}
	if total > 2<<20 {
		t.Errorf("corpus is %d bytes, over 2 MiB", total)
	}
}

// TestCorpusReadsBack: LanceDB reads each corpus copy as what built it.
func TestCorpusReadsBack(t *testing.T) {
	Require(t)
	for name, steps := range corpusTables {
		_, want := steps()
		dir := CorpusDir(t, name)
		res := MustRun(t, Program{URI: filepath.Dir(dir), Table: name, Steps: []Step{ReadRows(ReadOpts{})}})
		rows, err := res.Rows(0)
		if err != nil {
			t.Fatal(err)
		}
		got, err := RowsByID(rows)
		if err != nil {
			t.Fatal(err)
		}
		if d := DiffByID(got, want); d != "" {
			t.Errorf("%s reads differently:\n%s", name, d)
		}
	}
}

func updateCorpus(t *testing.T) {
	Require(t)
	root := CorpusRoot()
	for name, steps := range corpusTables {
		s, _ := steps()
		dir := t.TempDir()
		MustRun(t, Program{URI: dir, Table: name, Steps: s})
		dst := filepath.Join(root, name)
		if err := os.RemoveAll(dst); err != nil {
			t.Fatal(err)
		}
		if err := copyTree(filepath.Join(dir, name+".lance"), dst); err != nil {
			t.Fatal(err)
		}
		t.Logf("corpus %s: %s", name, strings.Join(OpNames(s), ","))
	}
}
