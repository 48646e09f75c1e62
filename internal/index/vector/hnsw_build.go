package vector

import (
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
)

// buildGraph builds an HNSW graph over v's n nodes: levels drawn with
// probability 1/m per level above 0 (at most maxLevel), level 0 keeping
// up to 2m neighbours and the others m, chosen by the usual heuristic
// (a candidate is kept when it is nearer the node than every neighbour
// kept before it), each search keeping efc candidates. With wide set, a
// new node takes up to the level's limit (2m on level 0), as lance's
// IVF_HNSW builder does (with only m, rebuilt index graphs recalled about
// 1% less than LanceDB's at the same ef); without it, m on every level,
// which is what gave LanceDB's LSM search over a MemWAL generation's copy
// LanceDB's own ids and distances.
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
func buildGraph(v *vectors, n, m, efc, maxLevel int, seed uint64, wide bool) *graph {
	const batchMax = 64
	g := &graph{levels: make([][][]uint32, maxLevel+1)}
	// dists[l][node][i] is the distance of node to its i-th neighbour on
	// level l, kept beside the lists so that pruning an overfull list
	// does not compute them again (distances are symmetric bit for bit:
	// each kernel squares or multiplies the same pairs).
	dists := make([][][]float32, maxLevel+1)
	for l := range g.levels {
		g.levels[l] = make([][]uint32, n)
		dists[l] = make([][]float32, n)
	}
	if n == 0 {
		return g
	}
	rng := rand.New(rand.NewPCG(seed, uint64(n)))
	ml := 1 / math.Log(float64(max(m, 2)))
	lvls := make([]int, n)
	for q := range lvls {
		lvls[q] = min(maxLevel, int(-math.Log(1-rng.Float64())*ml))
	}
	for l := 0; l <= lvls[0]; l++ {
		g.levels[l][0] = []uint32{}
	}
	g.entry, g.top = 0, lvls[0]
	workers := runtime.GOMAXPROCS(0)
	visited := make([][]uint32, workers)
	epochs := make([]uint32, workers)
	for w := range visited {
		visited[w] = make([]uint32, n)
	}
	// chosen[i][l] are batch node i's neighbours on level l.
	chosen := make([][][]cand, batchMax)
	type link struct {
		l      int
		nb, q  uint32
		d      float32
		worker int
	}
	var links []link
	for q := 1; q < n; {
		end := min(n, q+max(1, min(batchMax, q/64)))
		// Search: each node of the batch against the graph as it was.
		search := func(w, i int) {
			node := uint32(i)
			lvl := lvls[i]
			ep := cand{g.entry, v.d(node, g.entry)}
			for l := g.top; l > lvl; l-- {
				ep = greedy(v, g.levels[l], node, ep)
			}
			res := chosen[i-q][:0]
			res = append(res, make([][]cand, min(lvl, g.top)+1)...)
			eps := []cand{ep}
			for l := min(lvl, g.top); l >= 0; l-- {
				epochs[w]++
				found := searchLayer(v, g.levels[l], node, eps, efc, visited[w], epochs[w])
				take := m
				if wide && l == 0 {
					take = 2 * m
				}
				res[l] = selectNeighbors(v, found, take)
				eps = found
			}
			chosen[i-q] = res
		}
		parallel(workers, q, end, search)
		// Set the batch's own lists, then gather the back links in node
		// order, each to the worker that owns the neighbour.
		links = links[:0]
		for i := q; i < end; i++ {
			for l := 0; l <= lvls[i]; l++ {
				g.levels[l][i] = []uint32{}
			}
			for l, nbrs := range chosen[i-q] {
				g.levels[l][i] = ids(nbrs)
				dists[l][i] = candDists(nbrs)
				for _, nb := range nbrs {
					links = append(links, link{l, nb.id, uint32(i), nb.d, int(nb.id) % workers})
				}
			}
		}
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for _, k := range links {
					if k.worker != w {
						continue
					}
					limit := m
					if k.l == 0 {
						limit = 2 * m
					}
					lst := append(g.levels[k.l][k.nb], k.q)
					ds := append(dists[k.l][k.nb], k.d)
					if len(lst) > limit {
						cs := make([]cand, len(lst))
						for i, x := range lst {
							cs[i] = cand{x, ds[i]}
						}
						sortCands(cs)
						kept := selectNeighbors(v, cs, limit)
						lst, ds = ids(kept), candDists(kept)
					}
					g.levels[k.l][k.nb], dists[k.l][k.nb] = lst, ds
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
// goroutines, worker w taking every workers-th index from lo+w.
func parallel(workers, lo, hi int, f func(w, i int)) {
	if hi-lo == 1 || workers == 1 {
		for i := lo; i < hi; i++ {
			f(0, i)
		}
		return
	}
	var wg sync.WaitGroup
	for w := range min(workers, hi-lo) {
		wg.Go(func() {
			for i := lo + w; i < hi; i += workers {
				f(w, i)
			}
		})
	}
	wg.Wait()
}
