package inspect

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

func mustMillis(t *testing.T, ts string) int64 {
	t.Helper()
	tm, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		t.Fatalf("timestamp %q: %v", ts, err)
	}
	return tm.UnixMilli()
}

func corpus(t *testing.T, name string) storage.Bucket {
	t.Helper()
	b, err := storage.Open(context.Background(), "file://"+lancedb.CorpusDir(t, name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func build(t *testing.T, b storage.Bucket, v uint64) *Doc {
	t.Helper()
	d, err := Build(context.Background(), b, v)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

type fragSummary struct{ id, physical, deleted uint64 }

func frags(d *Doc) []fragSummary {
	var out []fragSummary
	for _, f := range d.Fragments {
		out = append(out, fragSummary{f.ID, f.PhysicalRows, f.DeletedRows})
	}
	return out
}

// TestCorpus checks inspect against what the corpus README says LanceDB
// wrote into each table.
func TestCorpus(t *testing.T) {
	t.Run("plain", func(t *testing.T) {
		b := corpus(t, "plain")
		d := build(t, b, 0)
		if d.Version != 3 || d.Rows != 30 || *d.Operation != "append" || *d.ReadVersion != 2 {
			t.Errorf("version %d rows %d op %s read %d", d.Version, d.Rows, *d.Operation, *d.ReadVersion)
		}
		if got := fmt.Sprint(frags(d)); got != "[{0 10 0} {1 10 0} {2 10 0}]" {
			t.Errorf("fragments %s", got)
		}
		if d.Writer != "lance/12.0.0" || d.DataFormat != "lance/2.2" || *d.MaxFragmentID != 2 {
			t.Errorf("writer %q format %q max %d", d.Writer, d.DataFormat, *d.MaxFragmentID)
		}
		if got := fmt.Sprint(d.Schema); got != "[{0 -1 id int64 false} {1 -1 s string true} {2 -1 cat int32 true} {3 -1 f double true}]" {
			t.Errorf("schema %s", got)
		}
		if d.MemWal != nil || d.FragReuse != nil || len(d.Indices) != 0 || len(d.PrimaryKey) != 0 {
			t.Errorf("unexpected extras: %+v", d)
		}
		if v1 := build(t, b, 1); v1.Rows != 10 || *v1.Operation != "overwrite" || len(v1.Fragments) != 1 {
			t.Errorf("version 1: rows %d op %s fragments %d", v1.Rows, *v1.Operation, len(v1.Fragments))
		}
		if _, err := Build(context.Background(), b, 9); !errors.Is(err, ErrNoVersion) {
			t.Errorf("version 9: %v", err)
		}
	})
	t.Run("deletes_arrow", func(t *testing.T) {
		d := build(t, corpus(t, "deletes_arrow"), 0)
		// Fragment 1 lost every row at version 4: Lance drops it.
		if got := fmt.Sprint(frags(d)); got != "[{0 10 1} {2 10 1}]" || d.Rows != 18 || *d.Operation != "delete" {
			t.Errorf("fragments %s rows %d op %s", got, d.Rows, *d.Operation)
		}
		for _, f := range d.Fragments {
			if f.DeletionFile == nil || f.DeletionFile.Type != "arrow" || f.DeletionFile.NumDeletedRows != 1 {
				t.Errorf("fragment %d deletion file %+v", f.ID, f.DeletionFile)
			}
		}
		if d.FeatureFlags.Reader&1 == 0 || d.FeatureFlags.Names[0] != "deletion files" {
			t.Errorf("flags %+v", d.FeatureFlags)
		}
	})
	t.Run("deletes_bin", func(t *testing.T) {
		d := build(t, corpus(t, "deletes_bin"), 0)
		if got := fmt.Sprint(frags(d)); got != "[{0 6000 5000}]" || d.Rows != 1000 || d.Fragments[0].DeletionFile.Type != "bin" {
			t.Errorf("fragments %s rows %d", got, d.Rows)
		}
	})
	t.Run("indexed", func(t *testing.T) {
		d := build(t, corpus(t, "indexed"), 0)
		if d.Rows != 35 || len(d.Indices) != 2 {
			t.Fatalf("rows %d indices %+v", d.Rows, d.Indices)
		}
		got := fmt.Sprintf("%s %s %v %v %v | %s %s %v %v %v",
			d.Indices[0].Name, d.Indices[0].Type, d.Indices[0].Columns, d.Indices[0].FragmentBitmap, d.Indices[0].DatasetVersion,
			d.Indices[1].Name, d.Indices[1].Type, d.Indices[1].Columns, d.Indices[1].FragmentBitmap, d.Indices[1].DatasetVersion)
		if got != "cat_idx bitmap [cat] [0 1 2] 4 | id_idx btree [id] [0 1 2] 3" {
			t.Errorf("indices %s", got)
		}
	})
	t.Run("tagged", func(t *testing.T) {
		d := build(t, corpus(t, "tagged"), 0)
		if got := fmt.Sprintf("%v", d.Tags); len(d.Tags) != 2 || d.Tags[0].Name != "v1" || d.Tags[0].Version != 1 || d.Tags[1].Name != "v2" || d.Tags[1].Version != 2 {
			t.Errorf("tags %s", got)
		}
	})
	for _, tc := range []struct {
		name   string
		shards int
	}{{"memwal_1", 1}, {"memwal_4", 4}} {
		t.Run(tc.name, func(t *testing.T) {
			d := build(t, corpus(t, tc.name), 0)
			mw := d.MemWal
			if d.Version != 4 || mw == nil || mw.IndexUUID == nil || fmt.Sprint(mw.MaintainedIndexes) != "[id_idx]" || fmt.Sprint(d.PrimaryKey) != "[id]" {
				t.Fatalf("version %d pk %v mem_wal %+v", d.Version, d.PrimaryKey, mw)
			}
			if int(mw.NumShards) != tc.shards || len(mw.Shards) == 0 || len(mw.Shards) > tc.shards {
				t.Errorf("num_shards %d, %d shard dirs", mw.NumShards, len(mw.Shards))
			}
			gens := 0
			for _, sh := range mw.Shards {
				gens += len(sh.SSTables)
				if sh.ManifestVersion == 0 || sh.CurrentGeneration != uint64(len(sh.SSTables))+1 || sh.CompactedSSTables != 0 {
					t.Errorf("shard %+v", sh)
				}
				if len(sh.WalEntries) == 0 || sh.ReplayAfterWalEntryPosition != sh.WalEntries[len(sh.WalEntries)-1] {
					t.Errorf("shard %s: wal %v replay after %d (closeLsmWriters flushes everything)", sh.ID, sh.WalEntries, sh.ReplayAfterWalEntryPosition)
				}
			}
			if tc.shards == 1 && (gens != 2 || mw.Shards[0].WriterEpoch != 2 || fmt.Sprint(mw.Shards[0].WalEntries) != "[1 2 3]") {
				t.Errorf("unsharded: %+v", mw.Shards[0])
			}
			if tc.shards == 4 && mw.ShardingSpecs[0].Fields[0].Transform != "bucket" {
				t.Errorf("spec %+v", mw.ShardingSpecs)
			}
		})
	}
	t.Run("compacted", func(t *testing.T) {
		b := corpus(t, "compacted")
		d := build(t, b, 0)
		if d.Version != 8 || *d.Operation != "rewrite" || d.Rows != 18 {
			t.Errorf("version %d op %s rows %d", d.Version, *d.Operation, d.Rows)
		}
		for _, f := range d.Fragments {
			if f.DeletionFile != nil || f.DeletedRows != 0 {
				t.Errorf("compacted fragment %d keeps deletions: %+v", f.ID, f)
			}
		}
		if v7 := build(t, b, 7); *v7.Operation != "reserve_fragments" {
			t.Errorf("version 7 op %s", *v7.Operation)
		}
	})
}

// TestStableJSON: the same bytes give the same document, byte for byte.
func TestStableJSON(t *testing.T) {
	for _, name := range []string{"memwal_4", "indexed", "tagged"} {
		b := corpus(t, name)
		a, _ := json.Marshal(build(t, b, 0))
		c, _ := json.Marshal(build(t, b, 0))
		if !bytes.Equal(a, c) {
			t.Errorf("%s: two runs differ:\n%s\n%s", name, a, c)
		}
		for _, key := range []string{`"fragments":[`, `"indices":[`, `"tags":[`, `"schema":[`, `"read_version":`} {
			if !bytes.Contains(a, []byte(key)) {
				t.Errorf("%s: %s missing from %s", name, key, a)
			}
		}
	}
}
