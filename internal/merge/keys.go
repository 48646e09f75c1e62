package merge

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"runtime"
	"sync"

	"github.com/RoaringBitmap/roaring/v2"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/format/file"
	"github.com/compactord/compactord/internal/progress"
	"github.com/compactord/compactord/internal/storage"
)

// keyColumn is a decoded primary-key column: integers (int32 widened to
// int64; timestamps are their int64 count of the column's unit) or bytes
// (strings and binaries). The primary key types LanceDB accepts are int32,
// int64, strings and binaries; compactord's table create also makes
// timestamp keys.
type keyColumn struct {
	a   *file.Array
	i64 []int64
	i32 []int32
}

func newKeyColumn(a *file.Array, t file.DataType) (keyColumn, error) {
	switch t.Kind {
	case file.KindInt64, file.KindTimestamp:
		return keyColumn{a: a, i64: a.Int64s()}, nil
	case file.KindInt32:
		return keyColumn{a: a, i32: a.Int32s()}, nil
	case file.KindUtf8, file.KindLargeUtf8, file.KindBinary, file.KindLargeBinary, file.KindFixedSizeBinary:
		return keyColumn{a: a}, nil
	}
	return keyColumn{}, fmt.Errorf("primary key of type %s is not supported", t)
}

func (c *keyColumn) isInt() bool { return c.i64 != nil || c.i32 != nil }

func (c *keyColumn) int(i int) int64 {
	if c.i64 != nil {
		return c.i64[i]
	}
	return int64(c.i32[i])
}

// keyTable holds the newest write of every key of a job's generations, in
// the order the keys were first written. Integer keys live in a map keyed
// by int64 (no per-row string), byte keys in one keyed by string.
//
// In front of the maps is a one-hash bit filter of 16 bits per key: the
// base scan probes every base row, most of which no generation wrote, and
// a probe of the filter (a few MiB, cache-resident) is much cheaper than
// a miss in a map of a million keys.
type keyTable struct {
	ints   map[int64]int32 // key → index into ws
	strs   map[string]int32
	ws     []winner
	filter []uint64
	shift  uint // 64 - log2(len(filter)*64)
	seed   maphash.Seed
}

// newKeyTable sizes the table for n keys.
func newKeyTable(n int) *keyTable {
	bits := uint(6)
	for 1<<bits < 16*n {
		bits++
	}
	return &keyTable{ints: make(map[int64]int32, n), strs: map[string]int32{}, ws: make([]winner, 0, n),
		filter: make([]uint64, 1<<(bits-6)), shift: 64 - bits, seed: maphash.MakeSeed()}
}

// slot is the filter bit of a key hash.
func (k *keyTable) slot(h uint64) (word int, bit uint64) {
	i := h >> k.shift
	return int(i >> 6), 1 << (i & 63)
}

func (k *keyTable) hash(c *keyColumn, i int) uint64 {
	if c.isInt() {
		return uint64(c.int(i)) * 0x9e3779b97f4a7c15
	}
	return maphash.Bytes(k.seed, c.a.Bytes(i))
}

// put records w as the newest write of row i's key.
func (k *keyTable) put(c *keyColumn, i int, w winner) {
	word, bit := k.slot(k.hash(c, i))
	k.filter[word] |= bit
	if c.isInt() {
		v := c.int(i)
		if j, ok := k.ints[v]; ok {
			k.ws[j] = w
			return
		}
		k.ints[v] = int32(len(k.ws))
	} else {
		b := c.a.Bytes(i)
		if j, ok := k.strs[string(b)]; ok {
			k.ws[j] = w
			return
		}
		k.strs[string(b)] = int32(len(k.ws))
	}
	k.ws = append(k.ws, w)
}

// has reports whether row i's key was written.
func (k *keyTable) has(c *keyColumn, i int) bool {
	if word, bit := k.slot(k.hash(c, i)); k.filter[word]&bit == 0 {
		return false
	}
	if c.isInt() {
		_, ok := k.ints[c.int(i)]
		return ok
	}
	_, ok := k.strs[string(c.a.Bytes(i))]
	return ok
}

func (k *keyTable) len() int { return len(k.ws) }

// baseScan is one base fragment's scan: the live rows whose key a
// generation wrote, and the fragment's deletion vector as read.
type baseScan struct {
	frag    *pb.DataFragment
	deleted *roaring.Bitmap
	hits    *roaring.Bitmap
}

// scanWindow is the rows of key column the base scan decodes at a time:
// 8 MiB of int64 keys per worker, however large the fragment.
const scanWindow = 1 << 20

// scanBase finds the live base rows whose key is in keys, by streaming
// every fragment's key column, GOMAXPROCS fragments at a time. The result
// is in fragment order.
func scanBase(ctx context.Context, b storage.Bucket, frags []*pb.DataFragment, pk *pb.Field, keys *keyTable) ([]baseScan, error) {
	out := make([]baseScan, len(frags))
	if keys.len() == 0 {
		for i, f := range frags {
			out[i] = baseScan{frag: f, deleted: roaring.New(), hits: roaring.New()}
		}
		progress.From(ctx).Add(baseRows(frags), 0) // nothing to look up: done
		return out, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan int)
	errs := make([]error, len(frags))
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(frags)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				out[i], errs[i] = scanFragment(ctx, b, frags[i], pk, keys)
				if errs[i] != nil {
					cancel()
				}
			}
		}()
	}
	for i := range frags {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, ctx.Err()
}

// appendClash reads the key column of fragments an append landed after
// the merge's read and names the first that holds a key the merge writes
// (tombstones included: the merge's order against the append is unknown,
// so any shared key plans the merge again). "" when none does.
func appendClash(ctx context.Context, b storage.Bucket, frags []*pb.DataFragment, pk *pb.Field, keys *keyTable) (string, error) {
	// A conflict check, not the merge's work: it reports no progress.
	ctx = progress.With(ctx, nil)
	for _, f := range frags {
		sc, err := scanFragment(ctx, b, f, pk, keys)
		if err != nil {
			return "", err
		}
		if n := sc.hits.GetCardinality(); n > 0 {
			return fmt.Sprintf("a concurrent write landed %d rows of keys the merge writes", n), nil
		}
	}
	return "", nil
}

// baseRows is the physical rows of frags: what scanBase reads of their key
// column.
func baseRows(frags []*pb.DataFragment) int64 {
	var n int64
	for _, f := range frags {
		n += int64(f.GetPhysicalRows())
	}
	return n
}

func scanFragment(ctx context.Context, b storage.Bucket, f *pb.DataFragment, pk *pb.Field, keys *keyTable) (baseScan, error) {
	sc := baseScan{frag: f, hits: roaring.New()}
	dv, err := deleted(ctx, b, "", f)
	if err != nil {
		return sc, err
	}
	sc.deleted = dv
	lf, name, done, err := openFragment(ctx, b, "", f)
	if err != nil {
		return sc, err
	}
	defer done()
	hasDeletes := !dv.IsEmpty()
	fields := []string{pk.GetName()}
	rep := progress.From(ctx)
	for row := uint64(0); row < lf.NumRows(); row += scanWindow {
		if ctx.Err() != nil {
			return sc, ctx.Err()
		}
		batch, err := lf.ReadRange(fields, row, min(row+scanWindow, lf.NumRows()))
		if err != nil {
			return sc, fmt.Errorf("merge: fragment %d: %w", f.GetId(), named(name, err))
		}
		rep.Add(int64(batch.NumRows), 0)
		kc, err := newKeyColumn(batch.Columns[0], batch.Fields[0].Type)
		if err != nil {
			return sc, fmt.Errorf("merge: fragment %d: %s: %w", f.GetId(), name, err)
		}
		base := uint32(row)
		nulls := kc.a.Valid != nil
		for i := 0; i < batch.NumRows; i++ {
			if nulls && !kc.a.IsValid(i) {
				if hasDeletes && dv.Contains(base+uint32(i)) {
					continue
				}
				return sc, fmt.Errorf("merge: fragment %d: row %d has a null primary key", f.GetId(), base+uint32(i))
			}
			if keys.has(&kc, i) && !(hasDeletes && dv.Contains(base+uint32(i))) {
				sc.hits.Add(base + uint32(i))
			}
		}
	}
	return sc, nil
}
