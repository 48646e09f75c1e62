package table

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/scan"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

const createSpec = "id:int64,cat:string,val:float64,ok:bool,raw:bytes,at:timestamp"

var createCols = []lancedb.Column{
	{Name: "id", Type: "int64"},
	{Name: "cat", Type: "utf8", Nullable: true},
	{Name: "val", Type: "float64", Nullable: true},
	{Name: "ok", Type: "bool", Nullable: true},
	{Name: "raw", Type: "binary", Nullable: true},
	{Name: "at", Type: "timestamp[us]", Nullable: true},
}

func createFields(t *testing.T) []*pb.Field {
	t.Helper()
	fields, err := ParseFields(createSpec, []string{"id"})
	if err != nil {
		t.Fatal(err)
	}
	return fields
}

// jsonRows are rows lo..hi-1 as `table append` reads them, with nulls.
func jsonRows(lo, hi int64) []byte {
	var b bytes.Buffer
	for id := lo; id < hi; id++ {
		fmt.Fprintf(&b, `{"id":%d,"cat":"c%d","val":%g,"ok":%t,"raw":"AAE=","at":%d}`+"\n", id, id%5, float64(id)/4, id%2 == 0, 1_700_000_000_000_000+id)
		if id%7 == 0 {
			b.Truncate(b.Len() - 1)
			b.Truncate(bytes.LastIndexByte(b.Bytes(), '\n') + 1)
			fmt.Fprintf(&b, `{"id":%d,"cat":null,"val":null}`+"\n", id)
		}
	}
	return b.Bytes()
}

func scanLines(t *testing.T, dir string) []string {
	t.Helper()
	tb, err := scan.Open(t.Context(), open(t, dir), scan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := tb.Write(t.Context(), &out); err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(out.String()), "\n")
}

// lanceLines are LanceDB's rows in scan's spelling (sorted by id).
func lanceLines(t *testing.T, res *lancedb.Results, i int) []string {
	t.Helper()
	var out struct {
		Rows []map[string]json.RawMessage `json:"rows"`
	}
	if err := json.Unmarshal(res.Steps[i].Result, &out); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, r := range out.Rows {
		var parts []string
		for _, c := range createCols {
			v := r[c.Name]
			if v == nil {
				v = json.RawMessage("null")
			}
			parts = append(parts, fmt.Sprintf("%q:%s", c.Name, v))
		}
		lines = append(lines, "{"+strings.Join(parts, ",")+"}")
	}
	return lines
}

func sortedByID(lines []string) []string {
	out := slices.Clone(lines)
	id := func(s string) int64 {
		var r struct{ ID int64 }
		_ = json.Unmarshal([]byte(s), &r)
		return r.ID
	}
	slices.SortFunc(out, func(a, b string) int { return int(id(a) - id(b)) })
	return out
}

// TestCreateWithLanceDB: compactord creates a table (every file version)
// whose schema is the one LanceDB writes for the same columns with the key
// set; a second create is refused; LanceDB opens it, adds rows and reads
// them, and so does scan.
func TestCreateWithLanceDB(t *testing.T) {
	lancedb.Require(t)
	dir := t.TempDir()
	lancedb.MustRun(t, lancedb.Program{URI: dir, Table: "ref", Steps: []lancedb.Step{
		lancedb.Create(createCols, nil), lancedb.SetPrimaryKey("id")}})
	refHead, _, err := meta.ReadLatest(t.Context(), open(t, filepath.Join(dir, "ref.lance")))
	if err != nil {
		t.Fatal(err)
	}
	fields := createFields(t)
	if len(fields) != len(refHead.Manifest.GetFields()) {
		t.Fatalf("%d fields, LanceDB %d", len(fields), len(refHead.Manifest.GetFields()))
	}
	for i, f := range fields {
		if want := refHead.Manifest.GetFields()[i]; !proto.Equal(f, want) {
			t.Errorf("field %d:\n got  %v\n want %v", i, f, want)
		}
	}
	for _, fv := range FileVersions {
		t.Run(fv, func(t *testing.T) {
			name := "t" + strings.ReplaceAll(fv, ".", "")
			tdir := filepath.Join(dir, name+".lance")
			b := open(t, tdir)
			mf, err := Create(t.Context(), b, fields, fv, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if got := mf.Manifest.GetDataFormat().GetVersion(); got != fv {
				t.Fatalf("data format %s", got)
			}
			if _, err := Create(t.Context(), b, fields, fv, time.Now()); !errors.Is(err, ErrExists) {
				t.Fatalf("second create: %v, want ErrExists", err)
			}
			res := lancedb.MustRun(t, lancedb.Program{URI: dir, Table: name, Steps: []lancedb.Step{
				lancedb.Schema(), lancedb.Add(lanceAdd()), lancedb.ReadRows(lancedb.ReadOpts{}), lancedb.CurrentVersion()}})
			if v, _ := res.Version(3); v != 2 {
				t.Errorf("LanceDB's add made version %d, want 2", v)
			}
			got := lanceLines(t, res, 2)
			ours := sortedByID(scanLines(t, tdir))
			if len(got) != 100 || !slices.Equal(got, ours) {
				t.Errorf("LanceDB reads %d rows, scan %d; first LanceDB %s scan %s", len(got), len(ours), got[0], ours[0])
			}
			head, _, _ := meta.ReadLatest(t.Context(), b)
			if df := head.Manifest.GetFragments()[0].GetFiles()[0]; fmt.Sprintf("%d.%d", df.GetFileMajorVersion(), df.GetFileMinorVersion()) != fv {
				t.Errorf("LanceDB wrote a %d.%d file into a %s table", df.GetFileMajorVersion(), df.GetFileMinorVersion(), fv)
			}
		})
	}
}

// lanceAdd are the rows LanceDB adds (ids 100000-100099).
func lanceAdd() []lancedb.Row {
	var add []lancedb.Row
	for id := int64(100_000); id < 100_100; id++ {
		add = append(add, lancedb.Row{"id": id, "cat": fmt.Sprintf("c%d", id%5), "val": float64(id) / 4, "ok": id%2 == 0, "raw": []byte{0, 1}, "at": time.UnixMicro(1_700_000_000_000_000 + id)})
	}
	return add
}

// A bad schema spec is a one-line error naming what is wrong, never a table.
func TestParseFieldsRejects(t *testing.T) {
	for _, c := range []struct{ spec, pk, want string }{
		{"", "id", "empty schema"},
		{"id", "id", "want name:type"},
		{"id:int128", "id", "unknown type"},
		{"_id:int64", "_id", "not start with '_'"},
		{"id:int64,id:string", "id", "duplicate field"},
		{"id:int64", "", "no primary key"},
		{"id:int64", "key", "not a field"},
		{"id:int64,v:float64", "v", "float64 cannot be a key"},
		{"id:int64", "id,id", "named twice"},
	} {
		_, err := ParseFields(c.spec, strings.Split(c.pk, ","))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseFields(%q, %q) = %v, want %q", c.spec, c.pk, err, c.want)
		}
	}
	fields, err := ParseFields("id:int64, name:string ,at:TIMESTAMP", []string{"id"})
	if err != nil {
		t.Fatal(err)
	}
	if len(fields) != 3 || fields[1].Name != "name" || fields[2].LogicalType != "timestamp:us:-" ||
		!fields[0].UnenforcedPrimaryKey || fields[0].Nullable || !fields[1].Nullable {
		t.Fatalf("fields: %v", fields)
	}
}
