package cli

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

// withWriterFlag commits (test helper, not product code) a copy of the
// latest version with writer flag bit added, as a newer Lance writer would
// leave it: the rest of the manifest is unchanged.
func withWriterFlag(t *testing.T, dir string, bit uint64) {
	t.Helper()
	ctx := context.Background()
	b, err := storage.Open(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	f, naming, err := meta.ReadLatest(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	m := proto.Clone(f.Manifest).(*pb.Manifest)
	m.Version++
	m.WriterFeatureFlags |= bit
	m.Timestamp = timestamppb.New(time.Now())
	m.TransactionFile = ""
	data, err := meta.EncodeManifestFile(&meta.ManifestFile{Manifest: m, Indices: f.Indices})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.PutIfAbsent(ctx, meta.ManifestKey(naming, m.Version), data); err != nil {
		t.Fatal(err)
	}
}

// TestUnknownWriterFlagStopsEveryChange: a table a newer Lance wrote with a
// writer flag compactord does not implement (1024, the fragment-reuse
// index of Lance 13) may hold files in a layout compactord does not know.
// Every command that deletes or commits exits non-zero in one line naming
// the flag and leaves every file as it was; trim and cleanup delete without
// committing, so the commit loop's check alone does not stop them.
// inspect and verify still read the table.
func TestUnknownWriterFlagStopsEveryChange(t *testing.T) {
	base := newTable(t)
	mustRun(t, "", "table", "append", base, "--rows", "20")
	mustRun(t, "", "index", "create", base, "--name", "id_idx", "--column", "id", "--type", "btree")
	mustRun(t, "", "wal", "configure", base, "--maintain", "id_idx")
	mustRun(t, "", "wal", "write", base, "--rows", "5", "--start", "100", "--flush")
	mustRun(t, "", "table", "append", base, "--rows", "3", "--start", "200")
	mustRun(t, "", "table", "delete", base, "--where", "id < 4")
	withWriterFlag(t, base, 1024)

	for _, args := range [][]string{
		{"merge", "URL"},
		{"compact", "URL"},
		{"cleanup", "URL", "--older-than", "1h", "--retain-versions", "1"},
		{"trim", "URL", "--reader-grace", "0s"},
		{"index", "catchup", "URL"},
		{"index", "remap", "URL"},
		{"index", "rebuild", "URL", "--name", "id_idx"},
		{"index", "create", "URL", "--name", "cat_idx", "--column", "cat", "--type", "bitmap"},
		{"index", "drop", "URL", "--name", "id_idx"},
		{"index", "trim-fri", "URL"},
	} {
		t.Run(strings.Join(args[:2], " "), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "t")
			copyDir(t, base, dir)
			args = append([]string(nil), args...)
			for i, a := range args {
				if a == "URL" {
					args[i] = dir
				}
			}
			before := snapshot(t, dir)
			r := runAt(t, yearOn(), "", args...)
			if r.code == 0 {
				t.Fatalf("exit 0; stdout %q", r.stdout)
			}
			line := strings.TrimSuffix(r.stderr, "\n")
			if strings.Contains(line, "\n") || !strings.Contains(line, "flag 1024") {
				t.Fatalf("stderr %q: want one line naming flag 1024", r.stderr)
			}
			if after := snapshot(t, dir); strings.Join(after, "\n") != strings.Join(before, "\n") {
				t.Fatalf("files changed:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
	// inspect reads it; verify reads every version, finds nothing damaged
	// (exit 0) and warns of the flag: the table is out of compactord's
	// reach, not broken.
	if r := run(t, "", "inspect", base); r.code != 0 || !strings.Contains(r.stdout, "fragment-reuse index") {
		t.Errorf("inspect: exit %d: %s\n%s", r.code, r.stderr, r.stdout)
	}
	if r := run(t, "", "verify", base); r.code != 0 || !strings.Contains(r.stdout+r.stderr, "writer flags carry bits lance 12 does not define: fragment-reuse index (flag 1024)") {
		t.Errorf("verify: exit %d: %s\n%s", r.code, r.stderr, r.stdout)
	}
}

// withIndexVersion commits (test helper) a copy of the latest version whose
// segments of index name carry index_version v, as Lance 14 marks btrees
// that store row addresses.
func withIndexVersion(t *testing.T, dir, name string, v int32) {
	t.Helper()
	ctx := context.Background()
	b, err := storage.Open(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	f, naming, err := meta.ReadLatest(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	m := proto.Clone(f.Manifest).(*pb.Manifest)
	m.Version++
	m.Timestamp = timestamppb.New(time.Now())
	m.TransactionFile = ""
	var ixs []*pb.IndexMetadata
	n := 0
	for _, ix := range f.Indices {
		if ix.GetName() == name {
			ix = proto.Clone(ix).(*pb.IndexMetadata)
			ix.IndexVersion = proto.Int32(v)
			n++
		}
		ixs = append(ixs, ix)
	}
	if n == 0 {
		t.Fatalf("no index %s", name)
	}
	data, err := meta.EncodeManifestFile(&meta.ManifestFile{Manifest: m, Indices: ixs})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.PutIfAbsent(ctx, meta.ManifestKey(naming, m.Version), data); err != nil {
		t.Fatal(err)
	}
}

// TestNewerIndexVersionRefused: a btree whose index_version compactord does
// not implement (Lance 14's row-address btree) is neither caught up (the
// new segment would copy its version over lance 12 content) nor remapped
// by an inline compaction; both exit non-zero naming the version and change
// no file.
func TestNewerIndexVersionRefused(t *testing.T) {
	base := newTable(t)
	mustRun(t, "", "table", "append", base, "--rows", "20")
	mustRun(t, "", "table", "append", base, "--rows", "20", "--start", "20")
	mustRun(t, "", "index", "create", base, "--name", "id_idx", "--column", "id", "--type", "btree")
	mustRun(t, "", "table", "append", base, "--rows", "5", "--start", "100")
	withIndexVersion(t, base, "id_idx", 1)
	refusesNewerVersion(t, base, "index_version 1")
}

// TestNewerFullTextVersionRefused: the same for a full-text index of
// index_version 3 (a newer Lance's list-element documents), which
// compactord would otherwise read as version 2's content and copy its
// version onto the segments it writes.
func TestNewerFullTextVersionRefused(t *testing.T) {
	lancedb.Require(t)
	schema := append(slices.Clone(lancedb.VectorSchema), lancedb.Column{Name: "doc", Type: "utf8", Nullable: true})
	rows := func(lo, hi int64) []lancedb.Row {
		rs := lancedb.VectorRows(lo, hi, "v")
		for _, r := range rs {
			r["doc"] = fmt.Sprintf("alpha%d beta%d", r["id"].(int64)%5, r["id"].(int64)%7)
		}
		return rs
	}
	f := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
	f.Dir = filepath.Join(f.URI, "t.lance")
	f.Run(t, lancedb.Create(schema, rows(0, 100)), lancedb.Add(rows(100, 200)),
		lancedb.CreateVectorIndex("doc", "fts", "doc_idx", nil), lancedb.Add(rows(200, 250)), lancedb.Delete("id % 3 = 0"))
	withIndexVersion(t, f.Dir, "doc_idx", 3)
	refusesNewerVersion(t, f.Dir, "index_version 3")
}

// refusesNewerVersion runs index catchup and an inline compaction on
// copies of base: each must exit non-zero with one line naming version
// and change no file.
func refusesNewerVersion(t *testing.T, base, version string) {
	t.Helper()
	for _, args := range [][]string{
		{"index", "catchup", "URL"},
		{"compact", "URL", "--defer-remap=false"},
	} {
		t.Run(strings.Join(args[:2], " "), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "t")
			copyDir(t, base, dir)
			args = append([]string(nil), args...)
			for i, a := range args {
				if a == "URL" {
					args[i] = dir
				}
			}
			before := snapshot(t, dir)
			r := run(t, "", args...)
			if r.code == 0 {
				t.Fatalf("exit 0; stdout %q", r.stdout)
			}
			line := strings.TrimSuffix(r.stderr, "\n")
			if strings.Contains(line, "\n") || !strings.Contains(line, version) {
				t.Fatalf("stderr %q: want one line naming %s", r.stderr, version)
			}
			if after := snapshot(t, dir); strings.Join(after, "\n") != strings.Join(before, "\n") {
				t.Fatalf("files changed:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
}
