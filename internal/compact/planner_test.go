package compact

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/fri"
	"github.com/compactord/compactord/internal/table"
)

func parseIDs(t *testing.T, s string) []uint32 {
	t.Helper()
	var out []uint32
	if s == "" {
		return out
	}
	for _, p := range strings.Split(s, ",") {
		v, err := strconv.ParseUint(p, 10, 32)
		if err != nil {
			t.Fatalf("bad id %q", p)
		}
		out = append(out, uint32(v))
	}
	return out
}

func kv(t *testing.T, fields []string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			t.Fatalf("want key=value, got %q", f)
		}
		m[k] = v
	}
	return m
}

func u64(t *testing.T, s string, def uint64) uint64 {
	t.Helper()
	if s == "" {
		return def
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("bad number %q", s)
	}
	return v
}

// defineManifest builds a manifest from lines:
//
//	version <n>
//	frag <id> rows=<physical> [deleted=<n>] [bytes=<n>]
//	index <name> frags=<ids>|unknown|corrupt [dv=<n>] [uuid=<u>]
//	fri dv=<n> groups=<old ids>><new ids>|... [removed=<ids>]
func defineManifest(t *testing.T, input string) *pb.Manifest {
	m := &pb.Manifest{Version: 1}
	var fr *pb.FragReuseIndexDetails
	seq := 0
	for _, line := range strings.Split(input, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		switch fields[0] {
		case "version":
			m.Version = u64(t, fields[1], 1)
		case "frag":
			a := kv(t, fields[2:])
			rows := u64(t, a["rows"], 100)
			f := &pb.Fragment{Id: uint32(u64(t, fields[1], 0)), PhysicalRows: rows,
				DataFile: &pb.DataFile{Path: "data/" + fields[1], SizeBytes: u64(t, a["bytes"], rows*10)}}
			if d := u64(t, a["deleted"], 0); d > 0 {
				f.DeletionFile = &pb.DeletionFile{Path: "_deletions/" + fields[1], NumDeleted: d}
			}
			m.Fragments = append(m.Fragments, f)
		case "index":
			a := kv(t, fields[2:])
			seq++
			ix := &pb.IndexMetadata{Name: fields[1], Type: "btree", Uuid: a["uuid"], DatasetVersion: u64(t, a["dv"], 1)}
			if ix.Uuid == "" {
				ix.Uuid = fmt.Sprintf("u%d", seq)
			}
			switch a["frags"] {
			case "unknown":
			case "corrupt":
				ix.FragmentBitmap = []byte{1, 2, 3}
			default:
				b, err := roaring.BitmapOf(parseIDs(t, a["frags"])...).ToBytes()
				if err != nil {
					t.Fatal(err)
				}
				ix.FragmentBitmap = b
			}
			m.Indices = append(m.Indices, ix)
		case "fri":
			a := kv(t, fields[1:])
			v := &pb.FragReuseVersion{DatasetVersion: u64(t, a["dv"], 0)}
			for _, g := range strings.Split(a["groups"], "|") {
				olds, news, _ := strings.Cut(g, ">")
				pg := &pb.FragReuseGroup{}
				for _, id := range parseIDs(t, olds) {
					pg.OldFragments = append(pg.OldFragments, &pb.FragDigest{Id: id})
				}
				for _, id := range parseIDs(t, news) {
					pg.NewFragments = append(pg.NewFragments, &pb.FragDigest{Id: id})
				}
				v.Groups = append(v.Groups, pg)
			}
			rb, _ := roaring.BitmapOf(parseIDs(t, a["removed"])...).ToBytes()
			v.RemovedFragments = rb
			if fr == nil {
				fr = &pb.FragReuseIndexDetails{}
				m.Indices = append(m.Indices, &pb.IndexMetadata{Name: table.FragReuseIndexName, Type: table.FragReuseIndexName,
					Details: &pb.IndexMetadata_FragReuse{FragReuse: fr}})
			}
			fr.Versions = append(fr.Versions, v)
		default:
			t.Fatalf("define: unknown line %q", line)
		}
	}
	return m
}

func TestPlanDataDriven(t *testing.T) {
	var m *pb.Manifest
	runDataDriven(t, "testdata/plan.txt", func(t *testing.T, c *testCase) string {
		switch c.cmd {
		case "define":
			m = defineManifest(t, c.input)
			return fmt.Sprintf("%d fragments, %d indices", len(m.Fragments), len(m.Indices))
		case "plan":
			env := Env{TargetRowsPerFragment: u64(t, c.args["target"], 1000), DeletionThreshold: 0.2,
				MaxBytesPerGroup: u64(t, c.args["max-bytes"], 0), Now: time.Unix(0, 0)}
			if v, ok := c.arg("threshold"); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					t.Fatal(err)
				}
				env.DeletionThreshold = f
			}
			env.InFlight = parseIDs(t, c.args["inflight"])
			env.Only = parseIDs(t, c.args["only"])
			jobs, err := Plan(m, env)
			if err != nil {
				return "error: " + err.Error()
			}
			// Determinism: the same inputs, the fragments listed in reverse
			// order, give the same plan.
			rev := &pb.Manifest{Version: m.Version, Indices: m.Indices}
			for i := len(m.Fragments) - 1; i >= 0; i-- {
				rev.Fragments = append(rev.Fragments, m.Fragments[i])
			}
			again, err := Plan(rev, env)
			if err != nil || fmt.Sprint(again) != fmt.Sprint(jobs) {
				t.Errorf("%s: plan depends on fragment order", c.pos)
			}
			if len(jobs) == 0 {
				return "no jobs"
			}
			segs := m.Indices
			covers, _ := fri.LoadCoverage(segs, table.FragReuse(m).GetVersions())
			var b strings.Builder
			for _, j := range jobs {
				fmt.Fprintf(&b, "job %v live=%d deleted=%d bytes=%d out=%d reason=%s", j.Fragments, j.LiveRows, j.DeletedRows, j.Bytes, j.OutputFragments, j.Reason)
				if len(j.Indices) > 0 {
					fmt.Fprintf(&b, " indices=%v", j.Indices)
				}
				// INVARIANT: no planned group straddles a
				// segment's load-time coverage.
				for _, cov := range covers {
					if fri.StraddlesGroup(cov, j.Fragments) {
						b.WriteString(" STRADDLES")
					}
				}
				b.WriteString("\n")
			}
			return b.String()
		}
		t.Fatalf("%s: unknown command %q", c.pos, c.cmd)
		return ""
	})
}
