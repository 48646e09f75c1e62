package vector

import (
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"

	ipb "github.com/compactord/compactord/gen/lanceindexpb"
	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/format/file"
)

// graphSeed seeds the level assignment, so that a rebuild is
// reproducible. LanceDB draws levels at random too; any seed gives a valid
// graph.
const graphSeed = 0x6c616e6365

// vectors are the nodes of one graph: a partition's rows, as the distance
// the graph is built on sees them. Either codes is set (SQ: row i's u8
// codes at [i*dim, (i+1)*dim), the distance scale·Σ(a−b)² over the codes)
// or data (row i's float32 vector at [i*dim, (i+1)*dim), the distance
// dist).
type vectors struct {
	dim  int
	data []float32
	dist func(a, b []float32) float32
	// codes and scale: see sqVectors.
	codes []byte
	scale float32
}

func (v *vectors) at(i uint32) []float32 { return v.data[int(i)*v.dim : (int(i)+1)*v.dim] }

func (v *vectors) code(i uint32) []byte { return v.codes[int(i)*v.dim : (int(i)+1)*v.dim] }

func (v *vectors) d(a, b uint32) float32 {
	if v.codes != nil {
		return float32(l2U8(v.code(a), v.code(b))) * v.scale
	}
	return v.dist(v.at(a), v.at(b))
}

// sqVectors are the n rows of SQ codes from row off of codes (dim bytes
// each, quantized over bounds [lo, hi]) under the distance LanceDB 0.39
// (lance 12) builds and searches an IVF_HNSW_SQ partition's graph with.
// Lance builds a partition's graph over the partition's quantized storage
// (the IVF builder's build_partition: HNSW index_vectors over the SQ
// storage), each inserted node's distances from a calculator made from the
// node's own row (dist_calculator_from_id: its codes, not the float
// vector); at query time the query is quantized with the same bounds and
// searched the same way. That distance, for l2 and cosine alike (cosine
// vectors are normalized before they are quantized), is the exact integer
// Σ(a−b)² over the two rows' codes (lance-linalg's l2_u8, a u32), as a
// float32 times scale = s·s, s = float32(hi−lo)/255 in float32: the
// _distance LanceDB wrote for every neighbour of its own IVF_HNSW_SQ l2
// and cosine graphs, bit for bit (TestSQGraphDistancesAreLanceDBs).
// The graph search then costs a 768-byte integer kernel per distance
// instead of a 3 KiB float one. (Lance's dot over SQ is 1 − the dot
// product, not this; sqVectors serves l2 and cosine.)
func sqVectors(codes []byte, dim, off, n int, lo, hi float64) *vectors {
	s := float32(hi-lo) / 255
	return &vectors{dim: dim, codes: codes[off*dim : (off+n)*dim], scale: s * s}
}

// distanceFunc is the graph's distance for a distance type: squared L2
// (LanceDB's l2), 1 - cosine similarity, or the negated dot product.
func distanceFunc(distance string) func(a, b []float32) float32 {
	switch distance {
	case "cosine":
		return func(a, b []float32) float32 {
			var d, na, nb float32
			for i := range a {
				d += a[i] * b[i]
				na += a[i] * a[i]
				nb += b[i] * b[i]
			}
			if na == 0 || nb == 0 {
				return 1
			}
			return 1 - d/float32(math.Sqrt(float64(na)*float64(nb)))
		}
	case "dot":
		return func(a, b []float32) float32 {
			var d float32
			for i := range a {
				d += a[i] * b[i]
			}
			return -d
		}
	}
	return l2
}

// partitionVectors are the graph nodes of partition p of s (rows
// [off, off+n)): SQ codes as they are (l2, cosine: sqVectors) or
// dequantized over the bounds (dot), PQ codes through the codebook plus
// the partition's centroid, raw vectors as they are.
func partitionVectors(s *Storage, centroid []float32, off, n int) (*vectors, error) {
	var v *vectors
	switch s.Quantizer {
	case QuantSQ:
		dim := s.SQ.Dim
		codes := s.Columns[0].Children[0].Values
		if s.Distance != "dot" {
			if len(codes) < (off+n)*dim {
				return nil, formatErr("SQ storage of %d bytes holds no rows [%d, %d) of %d bytes", len(codes), off, off+n, dim)
			}
			return sqVectors(codes, dim, off, n, s.SQ.Bounds.Start, s.SQ.Bounds.End), nil
		}
		lo, span := float32(s.SQ.Bounds.Start), float32(s.SQ.Bounds.End-s.SQ.Bounds.Start)
		v = &vectors{dim: dim, data: make([]float32, n*dim)}
		for i := range n * dim {
			v.data[i] = lo + float32(codes[off*dim+i])*span/255
		}
	case QuantPQ:
		dim, m, k, w := s.PQ.Dimension, s.PQ.NumSubVectors, s.PQ.entries(), s.PQ.codeBytes()
		if len(centroid) != dim || len(s.PQ.Codebook) != k*dim {
			return nil, formatErr("PQ of dimension %d with a codebook of %d floats under centroids of %d", dim, len(s.PQ.Codebook), len(centroid))
		}
		sub := dim / m
		codes := s.Columns[0].Children[0].Values
		v = &vectors{dim: dim, data: make([]float32, n*dim)}
		for i := range n {
			row := codes[(off+i)*w : (off+i+1)*w]
			for j := range m {
				c := s.PQ.code(row, j)
				copy(v.data[i*dim+j*sub:i*dim+(j+1)*sub], s.PQ.Codebook[(j*k+c)*sub:(j*k+c+1)*sub])
			}
			for e := range dim {
				v.data[i*dim+e] += centroid[e]
			}
		}
	case QuantFlat:
		a := s.Columns[0]
		dim := a.Type.Size
		v = &vectors{dim: dim, data: make([]float32, n*dim)}
		vals := a.Children[0]
		for i := range n * dim {
			k := off*dim + i
			switch vals.Type.Kind {
			case file.KindFloat16:
				v.data[i] = file.Float16(binary.LittleEndian.Uint16(vals.Values[2*k:]))
			case file.KindFloat64:
				v.data[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(vals.Values[8*k:])))
			default:
				v.data[i] = f32(vals.Values[4*k:])
			}
		}
	default:
		return nil, unsupported("HNSW over %s storage", s.Quantizer)
	}
	v.dist = distanceFunc(s.Distance)
	return v, nil
}

// graph is an HNSW graph over nodes 0..n-1: levels[l][node] the node's
// neighbours on level l (nil when the node is not on it), dists[l][node]
// their distances to the node.
type graph struct {
	levels [][][]uint32
	dists  [][][]float32
	entry  uint32
	top    int
}

type cand struct {
	id uint32
	d  float32
}

// before orders candidates by distance, ties by id: a total order (ids
// are distinct), so every heap pops the same sequence and the build is
// deterministic.
func (a cand) before(b cand) bool { return a.d < b.d || (a.d == b.d && a.id < b.id) }

// candHeap is a binary heap of candidates, the nearest on top (max: the
// farthest on top). Typed, without container/heap's interface boxing,
// which allocated on every push.
type candHeap struct {
	c   []cand
	max bool
}

func (h *candHeap) less(i, j int) bool {
	if h.max {
		return h.c[j].before(h.c[i])
	}
	return h.c[i].before(h.c[j])
}

func (h *candHeap) push(x cand) {
	h.c = append(h.c, x)
	for j := len(h.c) - 1; j > 0; {
		i := (j - 1) / 2
		if !h.less(j, i) {
			break
		}
		h.c[i], h.c[j] = h.c[j], h.c[i]
		j = i
	}
}

func (h *candHeap) pop() cand {
	top := h.c[0]
	n := len(h.c) - 1
	h.c[0] = h.c[n]
	h.c = h.c[:n]
	for i := 0; ; {
		j := 2*i + 1
		if j >= n {
			break
		}
		if j+1 < n && h.less(j+1, j) {
			j++
		}
		if !h.less(j, i) {
			break
		}
		h.c[i], h.c[j] = h.c[j], h.c[i]
		i = j
	}
	return top
}

func sortCands(cs []cand) {
	slices.SortFunc(cs, func(a, b cand) int {
		switch {
		case a.before(b):
			return -1
		case b.before(a):
			return 1
		}
		return 0
	})
}

// scratch is one worker's reusable state for graph searches: the visited
// marks (visited[x] == epoch: seen by the current search), the two heaps,
// two result buffers (a search's entry points are the previous level's
// results) and the neighbour selection's lists. Nothing a search returns
// outlives the second search after it.
type scratch struct {
	visited     []uint32
	epoch       uint32
	cands       candHeap
	found       candHeap
	out         [2][]cand
	flip        int
	kept, rest  []cand
	pruneBuffer []cand
	// rows and sums: one neighbour list's unvisited nodes and their
	// distances over SQ codes.
	rows []uint32
	sums []uint32
}

func newScratch(n int) *scratch {
	return &scratch{visited: make([]uint32, n), found: candHeap{max: true}}
}

// greedy walks level nbrs from ep towards q while a neighbour is nearer.
func greedy(v *vectors, nbrs [][]uint32, q uint32, ep cand) cand {
	for changed := true; changed; {
		changed = false
		for _, x := range nbrs[ep.id] {
			if d := v.d(q, x); d < ep.d {
				ep, changed = cand{x, d}, true
			}
		}
	}
	return ep
}

// searchLayer returns the ef nearest nodes to q found on one level from
// eps, nearest first, in one of sc's result buffers.
func (sc *scratch) searchLayer(v *vectors, nbrs [][]uint32, q uint32, eps []cand, ef int) []cand {
	sc.epoch++
	if sc.epoch == 0 {
		clear(sc.visited)
		sc.epoch = 1
	}
	epoch, visited := sc.epoch, sc.visited
	cands, found := &sc.cands, &sc.found
	cands.c, found.c = cands.c[:0], found.c[:0]
	for _, e := range eps {
		if visited[e.id] == epoch {
			continue
		}
		visited[e.id] = epoch
		cands.push(e)
		found.push(e)
		if len(found.c) > ef {
			found.pop()
		}
	}
	for len(cands.c) > 0 {
		c := cands.pop()
		if len(found.c) >= ef && c.d > found.c[0].d {
			break
		}
		if v.codes != nil {
			// The unvisited neighbours' distances in one kernel call,
			// each next row prefetched; then considered in list order,
			// as one at a time would.
			rows := sc.rows[:0]
			for _, x := range nbrs[c.id] {
				if visited[x] != epoch {
					visited[x] = epoch
					rows = append(rows, x)
				}
			}
			if cap(sc.sums) < len(rows) {
				sc.sums = make([]uint32, 2*len(rows))
			}
			l2U8Many(v.code(q), v.codes, v.dim, rows, sc.sums)
			for k, x := range rows {
				sc.consider(cand{x, float32(sc.sums[k]) * v.scale}, ef)
			}
			sc.rows = rows
			continue
		}
		for _, x := range nbrs[c.id] {
			if visited[x] == epoch {
				continue
			}
			visited[x] = epoch
			sc.consider(cand{x, v.d(q, x)}, ef)
		}
	}
	sc.flip ^= 1
	out := sc.out[sc.flip][:0]
	out = append(out, found.c...)
	// Popping the max-heap fills the buffer from the back: nearest first.
	for i := len(out) - 1; i >= 0; i-- {
		out[i] = found.pop()
	}
	sc.out[sc.flip] = out
	return out
}

// consider adds x to the search's candidates and results when fewer
// than ef were found or it is nearer than the farthest of them.
func (sc *scratch) consider(x cand, ef int) {
	if len(sc.found.c) < ef || x.d < sc.found.c[0].d {
		sc.cands.push(x)
		sc.found.push(x)
		if len(sc.found.c) > ef {
			sc.found.pop()
		}
	}
}

// searchLayer is scratch.searchLayer with the visited marks given.
func searchLayer(v *vectors, nbrs [][]uint32, q uint32, eps []cand, ef int, visited []uint32, epoch uint32) []cand {
	sc := &scratch{visited: visited, epoch: epoch - 1, found: candHeap{max: true}}
	return slices.Clone(sc.searchLayer(v, nbrs, q, eps, ef))
}

// selectNeighbors keeps up to m of the candidates (nearest first): each
// one nearer the node than any kept so far, then the nearest of the rest
// to fill m, as LanceDB's level-0 lists show (a run of ascending
// distances, then another). The result is sc's kept buffer.
func (sc *scratch) selectNeighbors(v *vectors, cs []cand, m int) []cand {
	return sc.selectNeighborsFill(v, cs, m, m)
}

// selectNeighborsFill is selectNeighbors filling only up to fill (<= m)
// from the candidates the heuristic passed over.
func (sc *scratch) selectNeighborsFill(v *vectors, cs []cand, m, fill int) []cand {
	if len(cs) <= fill {
		return cs
	}
	kept, rest := sc.kept[:0], sc.rest[:0]
	for i, c := range cs {
		if len(kept) == m {
			break
		}
		if v.codes != nil && i+1 < len(cs) {
			// The next candidate's row arrives while this one is
			// compared with the kept ones (their rows are in cache).
			prefetchRow(&v.codes[int(cs[i+1].id)*v.dim], v.dim)
		}
		good := true
		for _, k := range kept {
			if v.d(c.id, k.id) < c.d {
				good = false
				break
			}
		}
		if good {
			kept = append(kept, c)
		} else {
			rest = append(rest, c)
		}
	}
	for _, c := range rest {
		if len(kept) >= fill {
			break
		}
		kept = append(kept, c)
	}
	sc.kept, sc.rest = kept, rest
	return kept
}

// graphRows are a partition's rows of index.idx: level 0 (every node, in
// node order), then each upper level's nodes ascending; and the
// partition's lance:hnsw entry.
func graphRows(g *graph, params HNSWParams) (vid []uint32, nbrs [][]uint32, dists [][]float32, hm HNSWMeta) {
	hm = HNSWMeta{EntryPoint: g.entry, Params: params, LevelOffsets: make([]int, len(g.levels))}
	for l, lvl := range g.levels {
		hm.LevelOffsets[l] = len(vid)
		for id, ns := range lvl {
			if ns == nil {
				continue
			}
			vid = append(vid, uint32(id))
			nbrs = append(nbrs, ns)
			dists = append(dists, g.dists[l][id])
		}
	}
	return vid, nbrs, dists, hm
}

// hnswColumns are the index.idx columns of graph rows, each column's
// bytes allocated once at its final size (appending grew them by
// doubling and copied the neighbour ids once more: about four times the
// graph's size at once).
func hnswColumns(vid []uint32, nbrs [][]uint32, dists [][]float32) []*file.Array {
	edges := 0
	for _, ns := range nbrs {
		edges += len(ns)
	}
	idCol := &file.Array{Type: file.DataType{Kind: file.KindUint32}, Len: len(vid), Values: make([]byte, 0, 4*len(vid))}
	for _, x := range vid {
		idCol.Values = binary.LittleEndian.AppendUint32(idCol.Values, x)
	}
	nb := &file.Array{Type: file.DataType{Kind: file.KindList}, Len: len(nbrs), Offsets: make([]int64, 1, len(nbrs)+1)}
	ds := &file.Array{Type: file.DataType{Kind: file.KindList}, Len: len(dists), Offsets: make([]int64, 1, len(dists)+1)}
	flatN, flatD := make([]byte, 0, 4*edges), make([]byte, 0, 4*edges)
	for i := range nbrs {
		for _, x := range nbrs[i] {
			flatN = binary.LittleEndian.AppendUint32(flatN, x)
		}
		for _, d := range dists[i] {
			flatD = binary.LittleEndian.AppendUint32(flatD, math.Float32bits(d))
		}
		nb.Offsets = append(nb.Offsets, int64(len(flatN)/4))
	}
	ds.Offsets = slices.Clone(nb.Offsets)
	nb.Children = []*file.Array{{Type: file.DataType{Kind: file.KindUint32}, Len: len(flatN) / 4, Values: flatN}}
	ds.Children = []*file.Array{{Type: file.DataType{Kind: file.KindFloat32}, Len: len(flatN) / 4, Values: flatD}}
	return []*file.Array{idCol, nb, ds}
}

// RebuildGraphs returns x with the HNSW graph of every partition in
// touched rebuilt over storage s (the other partitions' rows copied), for
// a storage whose rows changed. The parameters are each partition's own.
func RebuildGraphs(x *SubIndex, s *Storage, touched []bool) (*SubIndex, error) {
	out, parts, err := remapGraphs(x, nil, s, nil, touched)
	if err != nil || parts == nil {
		return out, err
	}
	var cols graphCols
	if len(x.Columns) == 3 {
		cols.grow(x.Columns[0].Len, len(x.Columns[1].Children[0].Values)/4)
	}
	for _, gp := range parts {
		_ = gp.emit(&cols, nil)
	}
	out.Columns = cols.columns()
	return out, nil
}

// remapGraphs is RebuildGraphs, except that with keep set (s is the
// remap of storage old that kept old's rows keep, ascending) a touched
// partition that lost at most repairMaxDeleted of its rows has its graph
// repaired (repairGraph) instead of built again; and that it returns
// each partition's graph rows to write (graphPart) beside an index
// without columns (its partitions and lance:hnsw set), for a
// graphStream, rather than assembled. parts is nil for a sub-index
// without graphs (out is then x).
func remapGraphs(x *SubIndex, old, s *Storage, keep []int, touched []bool) (out *SubIndex, parts []graphPart, _ error) {
	if !x.IsHNSW() {
		return x, nil, nil
	}
	if len(touched) != s.Partitions() || len(x.HNSW) != s.Partitions() {
		return nil, nil, fmt.Errorf("%d partitions to rebuild, the index has %d and the storage %d", len(touched), len(x.HNSW), s.Partitions())
	}
	cent, dim := x.Centroids()
	o := *x
	out = &o
	out.Columns = nil
	out.HNSW = make([]HNSWMeta, len(x.HNSW))
	out.IVF = &ipb.IVF{CentroidsTensor: x.IVF.GetCentroidsTensor(), Loss: x.IVF.Loss,
		Offsets: make([]uint64, s.Partitions()), Lengths: make([]uint32, s.Partitions())}
	rows := 0
	for p := range s.Partitions() {
		out.IVF.Offsets[p] = uint64(rows)
		h := x.HNSW[p]
		var gp graphPart
		if !touched[p] {
			off, n := int(x.IVF.GetOffsets()[p]), int(x.IVF.GetLengths()[p])
			gp = graphPart{cols: x.Columns, lo: off, hi: off + n}
			out.HNSW[p] = h
		} else {
			off, n := int(s.IVF.GetOffsets()[p]), int(s.IVF.GetLengths()[p])
			v, err := partitionVectors(s, cent[p*dim:(p+1)*dim], off, n)
			if err != nil {
				return nil, nil, err
			}
			m := max(h.Params.M, 2)
			efc := max(h.Params.EfConstruction, m)
			if newID := keptIDs(old, keep, p, n); newID != nil {
				if gv, ok := newGraphView(x, p); ok && gv.n == len(newID) {
					gp.fg = repairGraph(v, gv, newID, n, m, efc)
				}
			}
			if gp.fg == nil {
				gp.g = buildGraph(v, n, m, efc, h.Params.MaxLevel, graphSeed+uint64(p), true)
			}
			out.HNSW[p] = gp.meta(h.Params)
		}
		parts = append(parts, gp)
		rows += gp.rows()
		out.IVF.Lengths[p] = uint32(rows - int(out.IVF.Offsets[p]))
	}
	return out, parts, nil
}

// graphPart is one partition's graph rows to write: rows [lo, hi) of the
// old graph columns cols as they are, a graph built again (g) or a
// repaired one (fg). Level 0 comes first, every node in node order, then
// each upper level's nodes ascending.
type graphPart struct {
	cols   []*file.Array
	lo, hi int
	g      *graph
	fg     *flatGraph
}

// rows is the number of graph rows the part writes.
func (gp *graphPart) rows() int {
	switch {
	case gp.g != nil:
		n := 0
		for _, lvl := range gp.g.levels {
			for _, ns := range lvl {
				if ns != nil {
					n++
				}
			}
		}
		return n
	case gp.fg != nil:
		n := 0
		for l := range gp.fg.levels {
			n += gp.fg.levels[l].rows()
		}
		return n
	}
	return gp.hi - gp.lo
}

// meta is the lance:hnsw entry of a built or repaired part.
func (gp *graphPart) meta(params HNSWParams) HNSWMeta {
	if gp.fg != nil {
		hm := HNSWMeta{EntryPoint: gp.fg.entry, Params: params, LevelOffsets: make([]int, len(gp.fg.levels))}
		at := 0
		for l := range gp.fg.levels {
			hm.LevelOffsets[l] = at
			at += gp.fg.levels[l].rows()
		}
		return hm
	}
	hm := HNSWMeta{EntryPoint: gp.g.entry, Params: params, LevelOffsets: make([]int, len(gp.g.levels))}
	at := 0
	for l, lvl := range gp.g.levels {
		hm.LevelOffsets[l] = at
		for _, ns := range lvl {
			if ns != nil {
				at++
			}
		}
	}
	return hm
}

// graphBatchRows is the rows of graph columns a graphStream assembles
// before it hands them to the writer.
const graphBatchRows = 16 << 10

// emit appends the part's rows to c, calling flush (when not nil) each
// time c holds graphBatchRows rows.
func (gp *graphPart) emit(c *graphCols, flush func() error) error {
	full := func() error {
		if flush != nil && c.rows() >= graphBatchRows {
			return flush()
		}
		return nil
	}
	switch {
	case gp.g != nil:
		for l, lvl := range gp.g.levels {
			for id, ns := range lvl {
				if ns == nil {
					continue
				}
				c.add(uint32(id), ns, gp.g.dists[l][id])
				if err := full(); err != nil {
					return err
				}
			}
		}
	case gp.fg != nil:
		for l := range gp.fg.levels {
			fl := &gp.fg.levels[l]
			for j := range fl.rows() {
				id := uint32(j)
				if fl.nodes != nil {
					id = fl.nodes[j]
				}
				ids, ds := fl.list(j)
				c.add(id, ids, ds)
				if err := full(); err != nil {
					return err
				}
			}
		}
	default:
		for r := gp.lo; r < gp.hi; {
			end := min(gp.hi, r+graphBatchRows)
			c.copyRows(gp.cols, r, end)
			r = end
			if err := full(); err != nil {
				return err
			}
		}
	}
	return nil
}

// graphStream writes an HNSW index.idx a partition's graph at a time. Its
// schema metadata (lance:hnsw) and IVF buffer are known only once every
// partition is written: the file writer reads both at Close, from the map
// and the slice it was given.
type graphStream struct {
	fw      *file.Writer
	cw      *countingWriter
	md      map[string][]byte
	globals [][]byte
	c       graphCols
}

// newGraphStream starts the index.idx of a sub-index like x (its fields
// and extra global buffers) on w.
func newGraphStream(w io.Writer, x *SubIndex) (*graphStream, error) {
	gs := &graphStream{cw: &countingWriter{w: w}, md: map[string][]byte{}, globals: append([][]byte{nil}, x.Extra...)}
	var err error
	gs.fw, err = file.NewWriter(gs.cw, x.Fields, file.WriterOptions{Version: file.V2_2, Metadata: gs.md, GlobalBuffers: gs.globals})
	if err != nil {
		return nil, err
	}
	return gs, nil
}

// flush hands the rows assembled to the writer.
func (gs *graphStream) flush() error {
	if gs.c.rows() == 0 {
		return nil
	}
	cols := gs.c.columns()
	// Fresh buffers for the next batch: the writer may keep these.
	gs.c = graphCols{}
	return gs.fw.Write(&file.Batch{NumRows: cols[0].Len, Columns: cols})
}

// add writes the next partition's graph rows.
func (gs *graphStream) add(gp *graphPart) error { return gp.emit(&gs.c, gs.flush) }

// close writes the file's end with x's partitions and lance:hnsw (every
// partition added), and returns its size.
func (gs *graphStream) close(x *SubIndex) (int64, error) {
	if err := gs.flush(); err != nil {
		return 0, err
	}
	md, globals, err := x.fileMeta()
	if err != nil {
		return 0, err
	}
	if len(globals) != len(gs.globals) {
		return 0, fmt.Errorf("%s: %d global buffers, the stream was started with %d", IndexFile, len(globals), len(gs.globals))
	}
	maps.Copy(gs.md, md)
	copy(gs.globals, globals)
	if err := gs.fw.Close(); err != nil {
		return 0, err
	}
	return gs.cw.n, nil
}

// keptIDs is partition p's renumbering by a remap of old that kept
// old's rows keep (ascending; n of them in p): the new number of each of
// the partition's old rows, -1 for a dropped one. It is nil when the
// graph is to be built again instead: no remap given, nothing kept, or
// more than repairMaxDeleted of the rows dropped.
func keptIDs(old *Storage, keep []int, p, n int) []int32 {
	if old == nil || n == 0 {
		return nil
	}
	off, was := int(old.IVF.GetOffsets()[p]), int(old.IVF.GetLengths()[p])
	if float64(was-n) > repairMaxDeleted*float64(was) {
		return nil
	}
	newID := make([]int32, was)
	for i := range newID {
		newID[i] = -1
	}
	k, _ := slices.BinarySearch(keep, off)
	next := int32(0)
	for ; k < len(keep) && keep[k] < off+was; k++ {
		newID[keep[k]-off] = next
		next++
	}
	if int(next) != n {
		return nil
	}
	return newID
}

// hnswFields is the schema of an HNSW index.idx's graph columns
// (__vector_id u32, __neighbors list<u32>, _distance list<f32>), the two
// lists with listMeta as their field metadata.
func hnswFields(listMeta map[string][]byte) []*pb.Field {
	return []*pb.Field{
		{Name: "__vector_id", Id: 0, ParentId: -1, LogicalType: "uint32", Nullable: true, Encoding: pb.Encoding_PLAIN},
		{Name: "__neighbors", Id: 1, ParentId: -1, LogicalType: "list", Nullable: true, Encoding: pb.Encoding_PLAIN, Metadata: listMeta},
		{Name: "item", Id: 2, ParentId: 1, LogicalType: "uint32", Nullable: true, Encoding: pb.Encoding_PLAIN},
		{Name: "_distance", Id: 3, ParentId: -1, LogicalType: "list", Nullable: true, Encoding: pb.Encoding_PLAIN, Metadata: listMeta},
		{Name: "item", Id: 4, ParentId: 3, LogicalType: "float", Nullable: true, Encoding: pb.Encoding_PLAIN},
	}
}

// graphCols assembles index.idx's graph columns (__vector_id,
// __neighbors, _distance) row by row, in flat little-endian slabs.
type graphCols struct {
	vid, nbrs, dists []byte
	offs             []int64
}

func (c *graphCols) grow(rows, edges int) {
	c.vid = slices.Grow(c.vid, 4*rows)
	c.offs = slices.Grow(c.offs, rows+1)
	c.nbrs = slices.Grow(c.nbrs, 4*edges)
	c.dists = slices.Grow(c.dists, 4*edges)
}

func (c *graphCols) rows() int { return len(c.vid) / 4 }

func (c *graphCols) add(id uint32, ids []uint32, ds []float32) {
	if len(c.offs) == 0 {
		c.offs = append(c.offs, 0)
	}
	c.vid = binary.LittleEndian.AppendUint32(c.vid, id)
	for k, x := range ids {
		c.nbrs = binary.LittleEndian.AppendUint32(c.nbrs, x)
		c.dists = binary.LittleEndian.AppendUint32(c.dists, math.Float32bits(ds[k]))
	}
	c.offs = append(c.offs, int64(len(c.nbrs)/4))
}

// copyRows appends rows [lo, hi) of the graph columns cs as they are.
func (c *graphCols) copyRows(cs []*file.Array, lo, hi int) {
	if lo == hi {
		return
	}
	if len(c.offs) == 0 {
		c.offs = append(c.offs, 0)
	}
	o := cs[1].Offsets
	shift := int64(len(c.nbrs)/4) - o[lo]
	c.vid = append(c.vid, cs[0].Values[4*lo:4*hi]...)
	c.nbrs = append(c.nbrs, cs[1].Children[0].Values[4*o[lo]:4*o[hi]]...)
	c.dists = append(c.dists, cs[2].Children[0].Values[4*o[lo]:4*o[hi]]...)
	for r := lo + 1; r <= hi; r++ {
		c.offs = append(c.offs, o[r]+shift)
	}
}

// addGraph appends g's rows (level 0, every node in node order, then
// each upper level's nodes ascending) and returns the partition's
// lance:hnsw entry.
func (c *graphCols) addGraph(g *graph, params HNSWParams) HNSWMeta {
	start := c.rows()
	hm := HNSWMeta{EntryPoint: g.entry, Params: params, LevelOffsets: make([]int, len(g.levels))}
	for l, lvl := range g.levels {
		hm.LevelOffsets[l] = c.rows() - start
		for id, ns := range lvl {
			if ns != nil {
				c.add(uint32(id), ns, g.dists[l][id])
			}
		}
	}
	return hm
}

func (c *graphCols) columns() []*file.Array {
	if len(c.offs) == 0 {
		c.offs = append(c.offs, 0)
	}
	n, e := c.rows(), len(c.nbrs)/4
	return []*file.Array{
		{Type: file.DataType{Kind: file.KindUint32}, Len: n, Values: c.vid},
		{Type: file.DataType{Kind: file.KindList}, Len: n, Offsets: c.offs,
			Children: []*file.Array{{Type: file.DataType{Kind: file.KindUint32}, Len: e, Values: c.nbrs}}},
		{Type: file.DataType{Kind: file.KindList}, Len: n, Offsets: slices.Clone(c.offs),
			Children: []*file.Array{{Type: file.DataType{Kind: file.KindFloat32}, Len: e, Values: c.dists}}},
	}
}

func listU32(a *file.Array, r int) []uint32 {
	lo, hi := a.Offsets[r], a.Offsets[r+1]
	out := make([]uint32, hi-lo)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(a.Children[0].Values[4*(int(lo)+i):])
	}
	return out
}

func listF32(a *file.Array, r int) []float32 {
	lo, hi := a.Offsets[r], a.Offsets[r+1]
	out := make([]float32, hi-lo)
	for i := range out {
		out[i] = f32(a.Children[0].Values[4*(int(lo)+i):])
	}
	return out
}
