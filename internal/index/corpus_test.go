package index

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/format/file"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

func openBucket(t testing.TB, dir string) storage.Bucket {
	t.Helper()
	b, err := storage.Open(context.Background(), "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func readerOf(t testing.TB, p string) Reader {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return Reader{R: bytes.NewReader(data), Size: int64(len(data))}
}

func memReader(b []byte) Reader { return Reader{R: bytes.NewReader(b), Size: int64(len(b))} }

// segmentFiles reads a segment's files from a table directory.
func segmentDir(dir string, ix *pb.IndexMetadata) string {
	return filepath.Join(dir, "_indices", meta.UUIDString(ix.GetUuid()))
}

// loadEntries decodes any segment into entries in btree order.
func loadEntries(t testing.TB, dir string, ix *pb.IndexMetadata) *Entries {
	t.Helper()
	d := segmentDir(dir, ix)
	switch meta.IndexKind(ix) {
	case KindBTree:
		bt, err := ReadBTree(readerOf(t, filepath.Join(d, BTreeDataFile)), readerOf(t, filepath.Join(d, BTreeLookupFile)))
		if err != nil {
			t.Fatal(err)
		}
		return bt.Entries
	case KindBitmap:
		bm, err := ReadBitmap(readerOf(t, filepath.Join(d, BitmapLookupFile)))
		if err != nil {
			t.Fatal(err)
		}
		e, err := bm.Entries(nil)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	t.Fatalf("segment of kind %s", meta.IndexKind(ix))
	return nil
}

func fieldByID(m *pb.Manifest, id int32) *pb.Field {
	for _, f := range m.GetFields() {
		if f.GetId() == id {
			return f
		}
	}
	return nil
}

func descFields(t testing.TB, r Reader) (*file.File, []*pb.Field) {
	t.Helper()
	f, err := file.Open(r.R, r.Size)
	if err != nil {
		t.Fatal(err)
	}
	return f, f.Desc.GetSchema().GetFields()
}

// TestCorpusSegments: LanceDB's btree and bitmap segments of the corpus
// decode to exactly the rows their fragments hold at the segment's
// dataset_version, and the segments compactord writes over the same rows
// decode equal, with the same schema (names, types, nullability,
// encodings, ids), schema metadata, page lookup and file version.
func TestCorpusSegments(t *testing.T) {
	for _, name := range []string{"indexed", "memwal_1", "memwal_4", "compacted"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(lancedb.CorpusRoot(), name)
			b := openBucket(t, dir)
			mf, _, err := meta.ReadLatest(t.Context(), b)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, ix := range mf.Indices {
				if meta.IsSystemIndex(ix) {
					continue
				}
				n++
				kind := meta.IndexKind(ix)
				frags, _, err := meta.FragmentBitmap(ix)
				if err != nil {
					t.Fatal(err)
				}
				at, err := meta.ReadVersion(t.Context(), b, meta.NamingV2, ix.GetDatasetVersion())
				if err != nil {
					t.Fatal(err)
				}
				tf := fieldByID(at.Manifest, ix.GetFields()[0])
				// At the latest version: a remapped segment (compacted) keeps its
				// dataset_version while naming the rewritten fragments.
				got, err := Collect(t.Context(), b, mf.Manifest.GetVersion(), tf, frags)
				if err != nil {
					t.Fatal(err)
				}
				theirs := loadEntries(t, dir, ix)
				if ok, d := got.Sorted().Equal(theirs); !ok {
					t.Fatalf("%s (%s): table rows vs LanceDB's segment: %s", ix.GetName(), kind, d)
				}
				// Write ours and compare file by file.
				out := t.TempDir()
				ob := openBucket(t, out)
				w, err := WriteSegment(t.Context(), ob, kind, tf, got)
				if err != nil {
					t.Fatal(err)
				}
				like := &pb.IndexMetadata{Uuid: w.UUID, Name: ix.GetName(), Fields: ix.GetFields(), IndexDetails: ix.GetIndexDetails()}
				mine := loadEntries(t, out, like)
				if ok, d := mine.Equal(theirs); !ok {
					t.Fatalf("%s: our segment vs LanceDB's: %s", ix.GetName(), d)
				}
				var paths []string
				for _, f := range ix.GetFiles() {
					paths = append(paths, f.GetPath())
				}
				var ours []string
				for _, f := range w.Files {
					ours = append(ours, f.GetPath())
				}
				if !equalStrings(paths, ours) {
					t.Errorf("%s: files %v, LanceDB's %v", ix.GetName(), ours, paths)
				}
				for _, p := range paths {
					tfile, tfields := descFields(t, readerOf(t, filepath.Join(segmentDir(dir, ix), p)))
					ofile, ofields := descFields(t, readerOf(t, filepath.Join(segmentDir(out, like), p)))
					if tfile.Version() != ofile.Version() {
						t.Errorf("%s/%s: version %s, LanceDB's %s", ix.GetName(), p, ofile.Version(), tfile.Version())
					}
					if len(tfields) != len(ofields) {
						t.Fatalf("%s/%s: %d fields, LanceDB's %d", ix.GetName(), p, len(ofields), len(tfields))
					}
					for i := range tfields {
						if !proto.Equal(tfields[i], ofields[i]) {
							t.Errorf("%s/%s: field %d = %v, LanceDB's %v", ix.GetName(), p, i, ofields[i], tfields[i])
						}
					}
					tm, om := tfile.Desc.GetSchema().GetMetadata(), ofile.Desc.GetSchema().GetMetadata()
					if len(tm) != len(om) {
						t.Errorf("%s/%s: schema metadata %q, LanceDB's %q", ix.GetName(), p, om, tm)
					}
					for k, v := range tm {
						if !bytes.Equal(om[k], v) {
							t.Errorf("%s/%s: schema metadata %s = %q, LanceDB's %q", ix.GetName(), p, k, om[k], v)
						}
					}
					tb, err := tfile.ReadAll(nil)
					if err != nil {
						t.Fatal(err)
					}
					obt, err := ofile.ReadAll(nil)
					if err != nil {
						t.Fatal(err)
					}
					if p == BTreeLookupFile {
						// Row for row (bitmap keys are in hash order in
						// LanceDB's file: compared per key below).
						for c := range tb.Columns {
							if !bytes.Equal(tb.Columns[c].Values, obt.Columns[c].Values) {
								t.Errorf("%s/%s: column %d = %x, LanceDB's %x", ix.GetName(), p, c, obt.Columns[c].Values, tb.Columns[c].Values)
							}
						}
					}
				}
				if kind == KindBitmap {
					// Per key, our serialized RowAddrTreeMap is byte-identical.
					theirsBM, _ := ReadBitmap(readerOf(t, filepath.Join(segmentDir(dir, ix), BitmapLookupFile)))
					oursBM, _ := ReadBitmap(readerOf(t, filepath.Join(segmentDir(out, like), BitmapLookupFile)))
					want := map[string][]byte{}
					for i, m := range theirsBM.Maps {
						k, _ := valueKey(theirsBM.Keys, i)
						want[k], _ = m.MarshalBinary()
					}
					f, _ := file.Open(readerOf(t, filepath.Join(segmentDir(dir, ix), BitmapLookupFile)).R, readerOf(t, filepath.Join(segmentDir(dir, ix), BitmapLookupFile)).Size)
					raw, _ := f.ReadAll(nil)
					for i := range theirsBM.Maps {
						k, _ := valueKey(theirsBM.Keys, i)
						if !bytes.Equal(want[k], raw.Columns[1].Bytes(i)) {
							t.Errorf("key %d: re-encoded map %x, LanceDB's %x", i, want[k], raw.Columns[1].Bytes(i))
						}
					}
					for i, m := range oursBM.Maps {
						k, _ := valueKey(oursBM.Keys, i)
						got, _ := m.MarshalBinary()
						if !bytes.Equal(got, want[k]) {
							t.Errorf("key %d: our map %x, LanceDB's %x", i, got, want[k])
						}
					}
				}
			}
			if n == 0 {
				t.Fatal("no index in the corpus table")
			}
		})
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

type metaLike struct {
	like *pb.IndexMetadata
	w    *Written
}

func (m metaLike) ix() *pb.IndexMetadata {
	return &pb.IndexMetadata{Uuid: m.w.UUID, Name: m.like.GetName(), Fields: m.like.GetFields(), IndexDetails: m.like.GetIndexDetails()}
}

func readBTreeDir(t testing.TB, d string) *BTree {
	t.Helper()
	bt, err := ReadBTree(readerOf(t, filepath.Join(d, BTreeDataFile)), readerOf(t, filepath.Join(d, BTreeLookupFile)))
	if err != nil {
		t.Fatal(err)
	}
	return bt
}

func sameValue(a, b *file.Array) bool {
	if a.IsValid(0) != b.IsValid(0) {
		return false
	}
	return !a.IsValid(0) || compareValues(a, 0, b, 0) == 0
}
