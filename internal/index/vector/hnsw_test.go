package vector

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestBuildGraph: a graph over 2000 random 16-d vectors keeps every node
// on level 0, bounds degrees (2m on level 0, m above), links only nodes
// of the same level, has its entry point on the top level, and a search
// with ef 40 from the entry point finds >= 95% of each query's true 10
// nearest neighbours.
func TestBuildGraph(t *testing.T) {
	const n, dim, queries, m = 2000, 16, 100, 20
	r := rand.New(rand.NewPCG(1, 2))
	v := &vectors{dim: dim, data: make([]float32, (n+queries)*dim), dist: distanceFunc("l2")}
	for i := range v.data {
		v.data[i] = float32(r.Float64()*2 - 1)
	}
	g := buildGraph(v, n, m, 100, 7, 42, true)
	for id := range n {
		if g.levels[0][id] == nil {
			t.Fatalf("node %d is not on level 0", id)
		}
	}
	for l, lvl := range g.levels {
		limit := m
		if l == 0 {
			limit = 2 * m
		}
		for id, ns := range lvl {
			if len(ns) > limit {
				t.Fatalf("level %d node %d has %d neighbours, limit %d", l, id, len(ns), limit)
			}
			for _, x := range ns {
				if lvl[x] == nil || int(x) == id {
					t.Fatalf("level %d node %d links %d, which is not on the level (or itself)", l, id, x)
				}
			}
		}
	}
	if g.levels[g.top][g.entry] == nil || (g.top < 7 && slices.ContainsFunc(g.levels[g.top+1], func(ns []uint32) bool { return ns != nil })) {
		t.Fatalf("entry point %d is not on the top level %d", g.entry, g.top)
	}
	hit := 0
	visited := make([]uint32, n)
	for qi := range queries {
		q := uint32(n + qi)
		ep := cand{g.entry, v.d(q, g.entry)}
		for l := g.top; l > 0; l-- {
			ep = greedy(v, g.levels[l], q, ep)
		}
		got := searchLayer(v, g.levels[0], q, []cand{ep}, 40, visited, uint32(qi+1))
		all := make([]cand, n)
		for i := range all {
			all[i] = cand{uint32(i), v.d(q, uint32(i))}
		}
		sortCands(all)
		for _, c := range got[:10] {
			if slices.ContainsFunc(all[:10], func(e cand) bool { return e.id == c.id }) {
				hit++
			}
		}
	}
	if recall := float64(hit) / (10 * queries); recall < 0.95 {
		t.Fatalf("recall@10 %.3f with ef 40, want >= 0.95", recall)
	} else {
		t.Logf("recall@10 %.3f", recall)
	}
}

// synthHNSW is the synthetic PQ index as IVF_HNSW_PQ, with a graph of
// partition 0's three nodes and partition 1's two, and its storage.
func synthHNSW(t *testing.T) (*SubIndex, *Storage) {
	t.Helper()
	_, x := synthPQ(t)
	sb, _ := encodeSynth(t)
	s, err := ReadStorage(bytes.NewReader(sb), int64(len(sb)))
	if err != nil {
		t.Fatal(err)
	}
	x.Type = TypeIVFHNSWPQ
	x.Fields = nil
	x.HNSW = []HNSWMeta{
		{EntryPoint: 0, Params: HNSWParams{MaxLevel: 1, M: 2, EfConstruction: 4}, LevelOffsets: []int{0, 3}},
		{EntryPoint: 1, Params: HNSWParams{MaxLevel: 1, M: 2, EfConstruction: 4}, LevelOffsets: []int{0, 2}},
	}
	x.IVF.Offsets, x.IVF.Lengths = []uint64{0, 3}, []uint32{3, 2}
	x.Columns = hnswColumns([]uint32{0, 1, 2, 0, 1}, [][]uint32{{1, 2}, {0}, {0}, {1}, {0}}, [][]float32{{1, 2}, {1}, {2}, {3}, {3}})
	return x, s
}

// TestRebuildGraphsKeepsUntouched: partitions that lost no rows keep
// their graph rows; a rebuilt partition's level 0 holds every storage row.
func TestRebuildGraphsKeepsUntouched(t *testing.T) {
	x, s := synthHNSW(t)
	ns, _, touched := RemapStorage(s, func(a uint64) (uint64, bool) { return a, a != 3 })
	if !slices.Equal(touched, []bool{true, false}) {
		t.Fatalf("touched %v, want partition 0 only", touched)
	}
	nx, err := RebuildGraphs(x, ns, touched)
	if err != nil {
		t.Fatal(err)
	}
	if got := nx.HNSW[0].LevelOffsets[1] - nx.HNSW[0].LevelOffsets[0]; got != 2 {
		t.Fatalf("partition 0's rebuilt level 0 has %d nodes, its storage 2 rows", got)
	}
	if nx.IVF.GetLengths()[1] != 2 || !slices.Equal(listU32(nx.Columns[1], int(nx.IVF.GetOffsets()[1])), []uint32{1}) {
		t.Fatalf("partition 1's graph changed: %v rows", nx.IVF.GetLengths())
	}
}

// TestBuildGraphIsDeterministic: the same graph (lists, distances, entry
// point) whatever the number of workers, on float vectors and SQ codes.
func TestBuildGraphIsDeterministic(t *testing.T) {
	const n, dim = 1500, 32
	r := rand.New(rand.NewPCG(3, 4))
	data := make([]float32, n*dim)
	codes := make([]byte, n*dim)
	for i := range data {
		data[i] = float32(r.NormFloat64())
		codes[i] = byte(r.IntN(256))
	}
	for _, v := range []*vectors{
		{dim: dim, data: data, dist: distanceFunc("l2")},
		sqVectors(codes, dim, 0, n, -1, 1),
	} {
		var first *graph
		for _, procs := range []int{1, 2, 5} {
			prev := runtime.GOMAXPROCS(procs)
			g := buildGraph(v, n, 8, 40, 7, 9, true)
			runtime.GOMAXPROCS(prev)
			if first == nil {
				first = g
				if g.top == 0 {
					t.Fatal("a graph of one level: the test does not reach the upper levels")
				}
				continue
			}
			if g.entry != first.entry || g.top != first.top {
				t.Fatalf("GOMAXPROCS %d: entry %d on level %d, with one worker %d on %d", procs, g.entry, g.top, first.entry, first.top)
			}
			for l := range g.levels {
				for id := range g.levels[l] {
					if !slices.Equal(g.levels[l][id], first.levels[l][id]) || !slices.Equal(g.dists[l][id], first.dists[l][id]) {
						t.Fatalf("GOMAXPROCS %d: level %d node %d links %v %v, with one worker %v %v", procs, l, id, g.levels[l][id], g.dists[l][id], first.levels[l][id], first.dists[l][id])
					}
				}
			}
		}
	}
}

// readSubIndex without graphs (what a catch-up reads of its base segment)
// gives ReadSubIndex's metadata, partitions and HNSW parameters but no
// graph columns, and still refuses a damaged file in one line.
func TestReadSubIndexWithoutGraphs(t *testing.T) {
	_, x := synthPQ(t)
	x.Type = TypeIVFHNSWPQ
	x.Fields = hnswFields(nil)
	x.HNSW = []HNSWMeta{
		{EntryPoint: 0, Params: HNSWParams{MaxLevel: 1, M: 2, EfConstruction: 4}, LevelOffsets: []int{0, 3}},
		{EntryPoint: 1, Params: HNSWParams{MaxLevel: 1, M: 2, EfConstruction: 4}, LevelOffsets: []int{0, 2}},
	}
	x.IVF.Offsets, x.IVF.Lengths = []uint64{0, 3}, []uint32{3, 2}
	x.Columns = hnswColumns([]uint32{0, 1, 2, 0, 1}, [][]uint32{{1, 2}, {0}, {0}, {1}, {0}}, [][]float32{{1, 2}, {1}, {2}, {3}, {3}})
	var buf bytes.Buffer
	if _, err := WriteSubIndex(&buf, x); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	full, err := ReadSubIndex(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	head, err := readSubIndex(bytes.NewReader(b), int64(len(b)), false)
	if err != nil {
		t.Fatal(err)
	}
	if head.Columns != nil || len(full.Columns) != 3 {
		t.Fatalf("without graphs: %d columns; with: %d", len(head.Columns), len(full.Columns))
	}
	if head.Type != full.Type || head.Distance != full.Distance || !reflect.DeepEqual(head.HNSW, full.HNSW) ||
		!slices.Equal(head.IVF.GetLengths(), full.IVF.GetLengths()) || !reflect.DeepEqual(head.Metadata, full.Metadata) {
		t.Fatalf("without graphs %+v, with %+v", head, full)
	}
	c1, d1 := head.Centroids()
	c2, d2 := full.Centroids()
	if d1 != d2 || !slices.Equal(c1, c2) {
		t.Fatal("centroids differ without the graphs")
	}
	for cut := 0; cut < len(b); cut += 7 {
		if _, err := readSubIndex(bytes.NewReader(b[:cut]), int64(cut), false); err == nil || strings.Contains(err.Error(), "\n") {
			t.Fatalf("cut at %d: %v", cut, err)
		}
	}
}

// TestRemapGraphsRepairsAndKeeps: through the remap's own path (the
// storage remapped in place, graphs repaired, index.idx written a batch
// at a time and read back), a partition that lost a row has a graph over
// its surviving rows only, and one that lost none keeps its rows.
func TestRemapGraphsRepairsAndKeeps(t *testing.T) {
	x, s := synthHNSW(t)
	ns, _, touched, keep := remapStorage(s, func(a uint64) (uint64, bool) { return a, a != 3 }, true)
	if !slices.Equal(touched, []bool{true, false}) {
		t.Fatalf("touched %v, want partition 0 only", touched)
	}
	nx, parts, err := remapGraphs(x, s, ns, keep, touched)
	if err != nil {
		t.Fatal(err)
	}
	if parts[0].fg == nil {
		t.Fatal("partition 0 lost a third of its rows and was rebuilt, not repaired")
	}
	nx.Fields = hnswFields(nil)
	var buf bytes.Buffer
	if _, err := writeGraphParts(&buf, nx, parts); err != nil {
		t.Fatal(err)
	}
	got, err := ReadSubIndex(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if got.IVF.GetLengths()[0] != 2 || got.HNSW[0].LevelOffsets[1] != 2 {
		t.Fatalf("partition 0: %d graph rows, level offsets %v; want level 0 of its 2 surviving rows", got.IVF.GetLengths()[0], got.HNSW[0].LevelOffsets)
	}
	// The two survivors link only each other.
	for r := range 2 {
		for _, y := range listU32(got.Columns[1], r) {
			if y > 1 || int(y) == r {
				t.Fatalf("partition 0 node %d links %d", r, y)
			}
		}
	}
	off := int(got.IVF.GetOffsets()[1])
	if got.IVF.GetLengths()[1] != 2 || !slices.Equal(listU32(got.Columns[1], off), []uint32{1}) || !slices.Equal(listF32(got.Columns[2], off+1), []float32{3}) {
		t.Fatalf("partition 1's graph changed: lengths %v", got.IVF.GetLengths())
	}
}
