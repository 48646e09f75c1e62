package vector

import (
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
)

// buildGraph builds an HNSW graph over v's n nodes: levels drawn with
// probability 1/m per level above 0 (at most maxLevel), level 0 keeping
// up to 2m neighbours and the others m, chosen by the usual heuristic
// (a candidate is kept when it is nearer the node than every neighbour
// kept before it), each search keeping efc candidates. With wide set, a
// new node takes up to the level's limit (2m on level 0) of the
// candidates the heuristic keeps, as lance's IVF_HNSW builder does, and
// a list (the new node's, or one pruned after a back link) is filled
// from the candidates it passed over only up to m, as LanceDB's level-0
// lists show (20 to 40 entries at m 20, 32 on average). Filling every
// list to 2m left most lists full, so that the back-link cutoff below
// refused most later links: at 30 000 clustered 128-d rows LanceDB's
// search through such a rebuilt graph recalled 0.918 at ef 10 and 0.940
// at ef 20 and 40 against its own graph's 0.954 and 0.958, and 0.954 and
// 0.960 with the fill to m (TestRebuiltGraphSearchesAsLanceDBs). Without
// wide, m on every level, filled to the level's limit, which is what
// gave LanceDB's LSM search over a MemWAL generation's copy LanceDB's own
// ids and distances.
//
// A new node's back link to a neighbour whose list is full is made only
// when the node is nearer than the list's last entry, as lance's builder
// does (its cutoff: the last of the ranked list once it holds the
// level's limit); otherwise the neighbour keeps its list and no pruning
// runs. Pruning an overfull list was most of the build's distance
// computations.
//
// Nodes are inserted in batches (one node at a time while the graph is
// small, then up to batchMax, never more than a 64th of the graph so far),
// to use every core on one partition's graph and still be deterministic:
// each node of a batch searches the graph as it was before the batch (in
// parallel, read only), then the batch's lists are set and the back links
// applied, each neighbour's list by one worker in node order. The graph
// depends on n, m, efc, maxLevel and seed only, not on GOMAXPROCS. A node
// does not see the other nodes of its batch while it searches, at most
// 1/64 of the graph; later nodes link to it as to any other.
//
// Each list lives in a slab with room for one entry past the level's
// limit, so that adding a back link and pruning happen in place.
func buildGraph(v *vectors, n, m, efc, maxLevel int, seed uint64, wide bool) *graph {
	const batchMax = 64
	// dists[l][node][i] is the distance of node to its i-th neighbour on
	// level l, kept beside the lists so that pruning an overfull list
	// does not compute them again (distances are symmetric bit for bit:
	// each kernel squares or multiplies the same pairs).
	g := &graph{levels: make([][][]uint32, maxLevel+1), dists: make([][][]float32, maxLevel+1)}
	if n == 0 {
		return g
	}
	limit := func(l int) int {
		if l == 0 {
			return 2 * m
		}
		return m
	}
	rng := rand.New(rand.NewPCG(seed, uint64(n)))
	ml := 1 / math.Log(float64(max(m, 2)))
	lvls := make([]int, n)
	for q := range lvls {
		lvls[q] = min(maxLevel, int(-math.Log(1-rng.Float64())*ml))
	}
	// Only the levels some node reached get a list per node: at m 20 a
	// level holds a 20th of the one below, so the top levels of maxLevel
	// 7 stay empty, and their n list headers were 4.8 MiB a level at
	// 100 000 nodes.
	for l := range slices.Max(lvls) + 1 {
		g.levels[l] = make([][]uint32, n)
		g.dists[l] = make([][]float32, n)
	}
	// Level 0's lists: one slab each for ids and distances, node i's room
	// at [i*w, (i+1)*w).
	w0 := limit(0) + 1
	slabIDs, slabDists := make([]uint32, n*w0), make([]float32, n*w0)
	// setList makes node's list on level l nbrs, with room to grow.
	setList := func(l int, node uint32, nbrs []cand) {
		var ids []uint32
		var ds []float32
		if l == 0 {
			o := int(node) * w0
			ids, ds = slabIDs[o:o:o+w0], slabDists[o:o:o+w0]
		} else {
			ids, ds = make([]uint32, 0, limit(l)+1), make([]float32, 0, limit(l)+1)
		}
		for _, c := range nbrs {
			ids, ds = append(ids, c.id), append(ds, c.d)
		}
		g.levels[l][node], g.dists[l][node] = ids, ds
	}
	for l := 0; l <= lvls[0]; l++ {
		setList(l, 0, nil)
	}
	g.entry, g.top = 0, lvls[0]
	workers := runtime.GOMAXPROCS(0)
	sc := make([]*scratch, workers)
	for w := range sc {
		sc[w] = newScratch(n)
	}
	// chosen[i][l] are batch node i's neighbours on level l.
	chosen := make([][][]cand, batchMax)
	type link struct {
		l     int
		nb, q uint32
		d     float32
	}
	// links[w] are the back links to the neighbours worker w owns.
	links := make([][]link, workers)
	for q := 1; q < n; {
		end := min(n, q+max(1, min(batchMax, q/64)))
		// Search: each node of the batch against the graph as it was.
		search := func(w, i int) {
			s := sc[w]
			node := uint32(i)
			lvl := lvls[i]
			ep := cand{g.entry, v.d(node, g.entry)}
			for l := g.top; l > lvl; l-- {
				ep = greedy(v, g.levels[l], node, ep)
			}
			res := chosen[i-q]
			if need := min(lvl, g.top) + 1; cap(res) < need {
				res = append(res[:cap(res)], make([][]cand, need-cap(res))...)
			} else {
				res = res[:need]
			}
			eps := []cand{ep}
			for l := min(lvl, g.top); l >= 0; l-- {
				found := s.searchLayer(v, g.levels[l], node, eps, efc)
				take := m
				if wide && l == 0 {
					take = 2 * m
				}
				fill := take
				if wide {
					fill = m
				}
				kept := s.selectNeighborsFill(v, found, take, fill)
				res[l] = append(res[l][:0], kept...)
				eps = found
			}
			chosen[i-q] = res
		}
		parallel(workers, q, end, search)
		// Set the batch's own lists, then gather the back links in node
		// order, each to the worker that owns the neighbour.
		for w := range links {
			links[w] = links[w][:0]
		}
		for i := q; i < end; i++ {
			for l := len(chosen[i-q]); l <= lvls[i]; l++ {
				setList(l, uint32(i), nil)
			}
			for l, nbrs := range chosen[i-q] {
				setList(l, uint32(i), nbrs)
				for _, nb := range nbrs {
					o := int(nb.id) % workers
					links[o] = append(links[o], link{l, nb.id, uint32(i), nb.d})
				}
			}
		}
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				s := sc[w]
				for _, k := range links[w] {
					lim := limit(k.l)
					lst, ds := g.levels[k.l][k.nb], g.dists[k.l][k.nb]
					if len(lst) >= lim && !(k.d < ds[len(ds)-1]) {
						continue
					}
					lst, ds = append(lst, k.q), append(ds, k.d)
					if len(lst) > lim {
						cs := s.pruneBuffer[:0]
						for i, x := range lst {
							cs = append(cs, cand{x, ds[i]})
						}
						sortCands(cs)
						s.pruneBuffer = cs
						fill := lim
						if wide {
							fill = m
						}
						kept := s.selectNeighborsFill(v, cs, lim, fill)
						lst, ds = lst[:len(kept)], ds[:len(kept)]
						for i, c := range kept {
							lst[i], ds[i] = c.id, c.d
						}
					}
					g.levels[k.l][k.nb], g.dists[k.l][k.nb] = lst, ds
				}
			})
		}
		wg.Wait()
		for i := q; i < end; i++ {
			if lvls[i] > g.top {
				g.entry, g.top = uint32(i), lvls[i]
			}
		}
		q = end
	}
	return g
}

// parallel runs f(worker, i) for every i in [lo, hi) on up to workers
// goroutines, each taking the next index left: a worker slowed down (the
// machine shared, a node with a longer search) leaves the rest to the
// others. Which worker runs an index does not change what f computes.
func parallel(workers, lo, hi int, f func(w, i int)) {
	if hi-lo == 1 || workers == 1 {
		for i := lo; i < hi; i++ {
			f(0, i)
		}
		return
	}
	var next atomic.Int64
	next.Store(int64(lo))
	var wg sync.WaitGroup
	for w := range min(workers, hi-lo) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= hi {
					return
				}
				f(w, i)
			}
		})
	}
	wg.Wait()
}
