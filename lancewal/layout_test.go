package lancewal

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/compactord/compactord/gen/lancepb"

	"github.com/compactord/compactord/internal/format/arrowipc"
	"github.com/compactord/compactord/internal/format/file"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

// gen1Rows are the rows LanceDB wrote into the corpus memwal_1's first
// generation (MemWALSteps, g = 1).
func gen1Rows() []Row {
	var out []Row
	for _, id := range []int64{0, 1, 2, 3, 4, 100, 101, 102, 103, 104} {
		out = append(out, Row{"id": id, "s": fmt.Sprintf("g1-%d", id), "cat": int32(id % 4), "f": float64(id) / 2})
	}
	return out
}

func corpusShardDir(t *testing.T) string {
	t.Helper()
	g, _ := filepath.Glob(filepath.Join(lancedb.CorpusRoot(), "memwal_1/_mem_wal/*"))
	if len(g) != 1 {
		t.Fatalf("corpus memwal_1 shards: %v", g)
	}
	return g[0]
}

// TestWALEntryMatchesLanceDB: the Go writer's WAL entry for the rows of
// LanceDB's first entry decodes to the same schema (names, types,
// nullability, field and schema metadata), compression and values.
func TestWALEntryMatchesLanceDB(t *testing.T) {
	theirs, err := os.ReadFile(filepath.Join(corpusShardDir(t), "wal", memwal.BitName(1)+".arrow"))
	if err != nil {
		t.Fatal(err)
	}
	tbl, _ := corpusTable(t, "memwal_1")
	st, err := tbl.state(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	b, err := newMemtable(st).build(gen1Rows(), false)
	if err != nil {
		t.Fatal(err)
	}
	ours, err := b.walEntry(1)
	if err != nil {
		t.Fatal(err)
	}
	ts, err := arrowipc.ReadStream(theirs, nil)
	if err != nil {
		t.Fatal(err)
	}
	os_, err := arrowipc.ReadStream(ours, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprintf("%+v", os_.Schema), fmt.Sprintf("%+v", ts.Schema); got != want {
		t.Errorf("schema\n got %s\nwant %s", got, want)
	}
	if len(os_.Batches) != 1 || len(ts.Batches) != 1 {
		t.Fatalf("batches: ours %d, LanceDB's %d", len(os_.Batches), len(ts.Batches))
	}
	for i := range ts.Schema.Fields {
		for r := 0; r < ts.Batches[0].Len; r++ {
			a, _ := arrowValue(ts.Batches[0].Columns[i], r)
			o, _ := arrowValue(os_.Batches[0].Columns[i], r)
			if fmt.Sprint(a) != fmt.Sprint(o) {
				t.Errorf("column %s row %d: ours %v, LanceDB's %v", ts.Schema.Fields[i].Name, r, o, a)
			}
		}
	}
}

var randomName = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[01]{24}[0-9a-f]{26}\.lance|[0-9a-f]{8}_gen_`)

func layout(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if strings.HasPrefix(rel, "_transactions/") {
			return nil // LanceDB's flush leaves an unreferenced .txn behind
		}
		out = append(out, randomName.ReplaceAllString(rel, "*"))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// TestGenerationMatchesLanceDB: the Go writer's flush of LanceDB's first
// generation's rows lays out the same files (data, maintained index copy,
// _pk_index, bloom filter, manifest and hint), with the same schema
// (_tombstone as field 4), fragment, index registration, data, pk index
// and bloom filter bytes as LanceDB's, and its shard manifest entry has
// the same rows and key bytes.
func TestGenerationMatchesLanceDB(t *testing.T) {
	ctx := t.Context()
	theirs := filepath.Join(corpusShardDir(t), "1d26cf02_gen_1")
	dir := lancedb.CorpusDir(t, "memwal_1")
	tbl, err := OpenTable(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Close()
	w := mustWriter(t, tbl, int64(0))
	if err := w.Upsert(ctx, gen1Rows()); err != nil {
		t.Fatal(err)
	}
	g, err := w.Flush(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ours := filepath.Join(dir, memwal.GenerationDir(w.Shard(), g.Path))
	if got, want := layout(t, ours), layout(t, theirs); !slices.Equal(got, want) {
		t.Errorf("files\n got %v\nwant %v", got, want)
	}
	if !bytes.Equal(mustRead(t, filepath.Join(ours, "bloom_filter.bin")), mustRead(t, filepath.Join(theirs, "bloom_filter.bin"))) {
		t.Error("bloom_filter.bin differs")
	}
	for _, name := range []string{"_pk_index/page_data.lance", "_pk_index/page_lookup.lance"} {
		if got, want := dumpLance(t, mustRead(t, filepath.Join(ours, name))), dumpLance(t, mustRead(t, filepath.Join(theirs, name))); got != want {
			t.Errorf("%s\n got %s\nwant %s", name, got, want)
		}
	}
	om, err := meta.DecodeManifestFile(mustRead(t, filepath.Join(ours, meta.ManifestKey(meta.NamingV2, 1))))
	if err != nil {
		t.Fatal(err)
	}
	tm, err := meta.DecodeManifestFile(mustRead(t, filepath.Join(theirs, meta.ManifestKey(meta.NamingV2, 1))))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(om.Manifest.GetFields(), tm.Manifest.GetFields(), func(a, b *pb.Field) bool { return proto.Equal(a, b) }) {
		t.Errorf("fields\n got %v\nwant %v", om.Manifest.GetFields(), tm.Manifest.GetFields())
	}
	of, tf := om.Manifest.GetFragments(), tm.Manifest.GetFragments()
	if len(of) != 1 || len(tf) != 1 || of[0].GetPhysicalRows() != tf[0].GetPhysicalRows() || fmt.Sprint(of[0].GetFiles()[0].GetFields()) != fmt.Sprint(tf[0].GetFiles()[0].GetFields()) {
		t.Errorf("fragments\n got %v\nwant %v", of, tf)
	}
	if len(om.Indices) != 1 || len(tm.Indices) != 1 {
		t.Fatalf("registered indices: ours %d, LanceDB's %d", len(om.Indices), len(tm.Indices))
	}
	oi, ti := om.Indices[0], tm.Indices[0]
	if oi.GetName() != ti.GetName() || fmt.Sprint(oi.GetFields()) != fmt.Sprint(ti.GetFields()) || oi.GetDatasetVersion() != ti.GetDatasetVersion() ||
		!bytes.Equal(oi.GetFragmentBitmap(), ti.GetFragmentBitmap()) || oi.GetIndexDetails().GetTypeUrl() != ti.GetIndexDetails().GetTypeUrl() {
		t.Errorf("maintained index\n got %v\nwant %v", oi, ti)
	}
	od, _ := filepath.Glob(filepath.Join(ours, "data", "*.lance"))
	td, _ := filepath.Glob(filepath.Join(theirs, "data", "*.lance"))
	if len(od) != 1 || len(td) != 1 {
		t.Fatalf("data files: ours %v, LanceDB's %v", od, td)
	}
	if got, want := dumpLance(t, mustRead(t, od[0])), dumpLance(t, mustRead(t, td[0])); got != want {
		t.Errorf("data\n got %s\nwant %s", got, want)
	}
	ss, err := memwal.ReadShard(ctx, tbl.b, w.Shard())
	if err != nil {
		t.Fatal(err)
	}
	sst := ss.Manifest.GetSstables()[len(ss.Manifest.GetSstables())-1]
	if sst.GetPhysicalRows() != 10 || sst.GetPrimaryKeyBytes() != 80 {
		t.Errorf("shard manifest entry %v, LanceDB's has 10 rows and 80 key bytes", sst)
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// dumpLance is a Lance file's version, schema and values as text.
func dumpLance(t *testing.T, data []byte) string {
	t.Helper()
	f, err := file.Open(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	out := []string{f.Version().String(), fmt.Sprint(f.Desc.GetSchema())}
	b, err := f.ReadAll(nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range b.Columns {
		var vals []string
		for r := 0; r < c.Len; r++ {
			switch {
			case !c.IsValid(r):
				vals = append(vals, "null")
			case c.Offsets != nil:
				vals = append(vals, string(c.Bytes(r)))
			case c.Type.Kind == file.KindBool:
				vals = append(vals, fmt.Sprint(c.Bool(r)))
			default:
				w := c.Type.ByteWidth()
				vals = append(vals, fmt.Sprintf("%x", c.Values[r*w:(r+1)*w]))
			}
		}
		out = append(out, fmt.Sprintf("%s: %v", b.Fields[i].Name, vals))
	}
	return strings.Join(out, "\n")
}
