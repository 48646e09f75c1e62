package file

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/testing/lancedb"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// writeTable makes dir/name.lance a one-fragment Lance dataset whose only
// data file is data (written by this package), so LanceDB can read it.
func writeTable(t testing.TB, dir, name string, fields []*lancepb.Field, data []byte, v Version, dfFields, dfCols []int32, rows uint64) {
	t.Helper()
	root := filepath.Join(dir, name+".lance")
	if err := os.MkdirAll(filepath.Join(root, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	fname := fmt.Sprintf("%s-go.lance", strings.ReplaceAll(name, ".", "_"))
	if err := os.WriteFile(filepath.Join(root, "data", fname), data, 0o644); err != nil {
		t.Fatal(err)
	}
	major, minor := uint32(v.Major), uint32(v.Minor)
	m := &lancepb.Manifest{
		Fields: fields,
		Fragments: []*lancepb.DataFragment{{Id: 0, PhysicalRows: rows, Files: []*lancepb.DataFile{{
			Path: fname, Fields: dfFields, ColumnIndices: dfCols,
			FileMajorVersion: major, FileMinorVersion: minor, FileSizeBytes: uint64(len(data))}}}},
		Version:       1,
		Timestamp:     timestamppb.New(time.Now()),
		MaxFragmentId: proto.Uint32(0),
		WriterVersion: &lancepb.Manifest_WriterVersion{Library: "lance", Version: "12.0.0"},
		DataFormat:    &lancepb.Manifest_DataStorageFormat{FileFormat: "lance", Version: v.String()},
	}
	raw, err := meta.EncodeManifestFile(&meta.ManifestFile{Manifest: m})
	if err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(root, filepath.FromSlash(meta.ManifestKey(meta.NamingV2, 1)))
	if err := os.MkdirAll(filepath.Dir(key), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

type lancedbCase struct {
	name   string
	oracle string // LanceDB's read of the data written, or "" to use want
	want   *oracle
}

// lancedbRead has LanceDB read the tables of dir and compares each with
// its oracle.
func lancedbRead(t *testing.T, dir string, cases []lancedbCase) {
	in := lancedb.Require(t)
	out := t.TempDir()
	args := []string{filepath.Join("testdata", "gen.mjs"), "read", dir, out}
	for _, c := range cases {
		args = append(args, c.name)
	}
	cmd := exec.Command(in.Node, args...)
	cmd.Env = append(cmd.Environ(), "LANCEDB_NODE_MODULES="+in.NodeModules, "RUST_LOG=error", "LANCEDB_LOG=error")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gen.mjs read: %v\n%s", err, b)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if e, err := os.ReadFile(filepath.Join(out, c.name+".err")); err == nil {
				t.Fatalf("LanceDB: %s", e)
			}
			got := loadOracle(t, filepath.Join(out, c.name+".json"))
			want := c.want
			if want == nil {
				want = loadOracle(t, c.oracle)
			}
			if got.Rows != want.Rows {
				t.Fatalf("LanceDB read %d rows, want %d", got.Rows, want.Rows)
			}
			for col, wj := range want.Columns {
				var w, g []any
				if err := json.Unmarshal(wj, &w); err != nil {
					t.Fatal(err)
				}
				gj, ok := got.Columns[col]
				if !ok {
					t.Errorf("%s: missing from LanceDB's read", col)
					continue
				}
				if err := json.Unmarshal(gj, &g); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(g, w) {
					t.Errorf("%s: LanceDB read %s", col, firstDiff(g, w))
				}
			}
		})
	}
}

// TestLanceDBReadsWrites rewrites every corpus file with this package (at
// its version; 2.1+ files at both 2.1 and 2.2; default and 4 KiB pages,
// so every column is multi-page) and has LanceDB 0.39 read each back: the
// values must equal LanceDB's read of the original.
func TestLanceDBReadsWrites(t *testing.T) {
	lancedb.Require(t)
	dir := t.TempDir()
	var cases []lancedbCase
	for _, p := range oracleFiles(t, "testdata") {
		src := openFile(t, p[0])
		versions := rewriteVersions(src)
		for _, v := range versions {
			for _, pb := range []int{0, 4096} {
				name := fmt.Sprintf("%s_w%d%d", strings.TrimSuffix(filepath.Base(p[0]), ".lance"), v.Major, v.Minor)
				if pb > 0 {
					name += "_pages"
				}
				data, w := rewriteW(t, src, v, pb)
				f, c := w.DataFileFields()
				writeTable(t, dir, name, src.Desc.GetSchema().GetFields(), data, v, f, c, src.NumRows())
				cases = append(cases, lancedbCase{name: name, oracle: p[1]})
			}
		}
	}
	lancedbRead(t, dir, cases)
}

// rewriteW is rewrite that also returns the writer.
func rewriteW(t testing.TB, f *File, v Version, pageBytes int) ([]byte, *Writer) {
	t.Helper()
	b, err := f.ReadAll(nil)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, err := NewWriter(&buf, f.Desc.GetSchema().GetFields(), WriterOptions{Version: v, PageBytes: pageBytes})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), w
}

var _ = gzip.NewReader
var _ io.Reader
