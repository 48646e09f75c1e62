package file

import (
	"slices"
	"sync/atomic"
)

// fsstBuilds counts the symbol tables built, so tests can tell pages whose
// compressed values were kept from pages compressed again.
var fsstBuilds atomic.Int64

// The FSST encoder: a symbol table built on a sample of the values (a few
// rounds of compressing the sample with the current table, counting the
// symbols it emits and the pairs of consecutive symbols, and keeping the
// candidates of highest gain = count × length), then greedy longest-match
// compression of every value, byte 255 escaping a byte no symbol covers.

const (
	fsstMaxSymbols = 255
	fsstHashBits   = 12
	// fsstMinInput and fsstMinMaxLen are when LanceDB considers FSST for a
	// page: at least 32 KiB of value bytes and a value of 5 bytes or more.
	fsstMinInput  = 32 << 10
	fsstMinMaxLen = 5
	fsstSampleMax = 32 << 10
	fsstRounds    = 5
	// Codes 256+b stand for an escaped byte b while counting.
	fsstPseudo = 256
)

var fsstMask = [9]uint64{0, 0xff, 0xffff, 0xffffff, 0xffffffff, 0xffffffffff, 0xffffffffffff, 0xffffffffffffff, ^uint64(0)}

type fsstHashEntry struct {
	sym  uint64
	code uint16
	len  uint8
}

// fsstEncoder is a symbol table with the lookups greedy matching needs:
// symbols of 3+ bytes in a hash table on their first 3 bytes (one per
// slot), and the best code of at most 2 bytes for every byte pair.
type fsstEncoder struct {
	ns   int
	sym  [fsstMaxSymbols]uint64
	slen [fsstMaxSymbols]uint8
	hash [1 << fsstHashBits]fsstHashEntry
	// short and single: code | length<<12, the code fsstPseudo+b for an
	// escaped byte.
	short  [1 << 16]uint16
	single [256]uint16
}

func fsstHash(w uint64) uint32 {
	return uint32((w&0xffffff)*0x9E3779B1) >> (32 - fsstHashBits)
}

func (e *fsstEncoder) reset() {
	e.ns = 0
	e.hash = [1 << fsstHashBits]fsstHashEntry{}
	for b := range e.single {
		e.single[b] = uint16(fsstPseudo+b) | 1<<12
	}
	for p := range e.short {
		e.short[p] = e.single[p&0xff]
	}
}

// add puts a symbol in the table unless it is full, already there or its
// hash slot is taken; it reports whether it did.
func (e *fsstEncoder) add(sym uint64, l int) bool {
	if e.ns >= fsstMaxSymbols || l < 1 || l > 8 {
		return false
	}
	sym &= fsstMask[l]
	code := uint16(e.ns)
	switch l {
	case 1:
		if e.single[byte(sym)]&0x1ff < fsstPseudo {
			return false
		}
		e.single[byte(sym)] = code | 1<<12
		// Pairs starting with this byte that have no 2-byte symbol.
		for b := 0; b < 256; b++ {
			p := uint16(sym) | uint16(b)<<8
			if e.short[p]>>12 != 2 {
				e.short[p] = code | 1<<12
			}
		}
	case 2:
		if e.short[uint16(sym)]>>12 == 2 {
			return false
		}
		e.short[uint16(sym)] = code | 2<<12
	default:
		h := &e.hash[fsstHash(sym)]
		if h.len != 0 {
			return false
		}
		*h = fsstHashEntry{sym: sym, code: code, len: uint8(l)}
	}
	e.sym[e.ns], e.slen[e.ns] = sym, uint8(l)
	e.ns++
	return true
}

// match returns the code (fsstPseudo+b for an escape) and length of the
// longest symbol at the start of w, the next (up to) 8 bytes of a value of
// which rem remain.
func (e *fsstEncoder) match(w uint64, rem int) (uint16, int) {
	if rem >= 3 {
		h := &e.hash[fsstHash(w)]
		if l := int(h.len); l != 0 && l <= rem && (w^h.sym)&fsstMask[l] == 0 {
			return h.code, l
		}
	}
	var x uint16
	if rem >= 2 {
		x = e.short[uint16(w)]
	} else {
		x = e.single[byte(w)]
	}
	return x & 0x1ff, int(x >> 12)
}

// load reads up to 8 bytes of data at i (zero past the end).
func load(data []byte, i int) uint64 {
	if i+8 <= len(data) {
		return le.Uint64(data[i : i+8])
	}
	var w uint64
	for k := 0; i+k < len(data); k++ {
		w |= uint64(data[i+k]) << (8 * k)
	}
	return w
}

// symOf is the symbol of a code, escapes included.
func (e *fsstEncoder) symOf(c uint16) (uint64, int) {
	if c >= fsstPseudo {
		return uint64(c - fsstPseudo), 1
	}
	return e.sym[c], int(e.slen[c])
}

type fsstCand struct {
	sym  uint64
	len  uint8
	gain uint64
}

// fsstCounts are build's counters, kept between builds: the pair counts
// are 1 MiB, of which a sample touches a few thousand entries, so only
// those are visited and cleared.
type fsstCounts struct {
	count1  [512]uint32
	count2  []uint32
	touched []int32 // indices of count2 that are not 0
	best    fsstEncoder
	gains   map[[2]uint64]uint64
	cands   []fsstCand
}

// buildCounts is build with its counters in k (nil: fresh ones).
func (e *fsstEncoder) buildCounts(sample [][]byte, k *fsstCounts) {
	if k == nil {
		k = &fsstCounts{}
	}
	if k.count2 == nil {
		k.count2 = make([]uint32, 512*512)
		k.gains = make(map[[2]uint64]uint64)
	}
	count1, count2 := k.count1[:], k.count2
	best := &k.best // round 0 sets it
	bestSize := -1
	gains := k.gains
	for round := 0; round <= fsstRounds; round++ {
		clear(count1)
		for _, p := range k.touched {
			count2[p] = 0
		}
		touched := k.touched[:0]
		size := 0
		for _, s := range sample {
			prev := -1
			for i := 0; i < len(s); {
				c, l := e.match(load(s, i), len(s)-i)
				i += l
				if c >= fsstPseudo {
					size += 2
				} else {
					size++
				}
				count1[c]++
				if prev >= 0 {
					p := prev*512 + int(c)
					if count2[p] == 0 {
						touched = append(touched, int32(p))
					}
					count2[p]++
				}
				prev = int(c)
			}
		}
		k.touched = touched
		if bestSize < 0 || size < bestSize {
			bestSize = size
			*best = *e
		}
		if round == fsstRounds {
			break
		}
		clear(gains)
		minCount := uint32(1 + round)
		for c, n := range count1 {
			if n < minCount || (c < fsstPseudo && c >= e.ns) {
				continue
			}
			s, l := e.symOf(uint16(c))
			g := uint64(n) * uint64(l)
			if l == 1 {
				g *= 8
			}
			gains[[2]uint64{s, uint64(l)}] += g
		}
		for _, p32 := range touched {
			p := int(p32)
			n := count2[p]
			if n < minCount {
				continue
			}
			s1, l1 := e.symOf(uint16(p / 512))
			if l1 >= 8 {
				continue
			}
			s2, l2 := e.symOf(uint16(p % 512))
			l := min(8, l1+l2)
			s := (s1 | s2<<(8*l1)) & fsstMask[l]
			gains[[2]uint64{s, uint64(l)}] += uint64(n) * uint64(l)
		}
		cands := k.cands[:0]
		for key, g := range gains {
			cands = append(cands, fsstCand{sym: key[0], len: uint8(key[1]), gain: g})
		}
		k.cands = cands
		slices.SortFunc(cands, func(a, b fsstCand) int {
			switch {
			case a.gain != b.gain:
				if a.gain > b.gain {
					return -1
				}
				return 1
			case a.len != b.len:
				return int(b.len) - int(a.len)
			case a.sym < b.sym:
				return -1
			case a.sym > b.sym:
				return 1
			}
			return 0
		})
		e.reset()
		for _, c := range cands {
			if e.ns >= fsstMaxSymbols {
				break
			}
			e.add(c.sym, int(c.len))
		}
	}
	*e = *best
}

// compressAll compresses every value of v, setting offs (n+1 entries).
// The output grows by whole values (at most 2 bytes per input byte), so
// the inner loop writes by index without appends.
func (e *fsstEncoder) compressAll(v *block, offs []int64, data []byte) []byte {
	total := v.offsets[v.n] - v.offsets[0]
	if int64(cap(data)) < total+64 {
		data = make([]byte, 0, total+64)
	}
	data = data[:0]
	src := v.data
	for i := 0; i < v.n; i++ {
		lo, hi := int(v.offsets[i]), int(v.offsets[i+1])
		if need := 2 * (hi - lo); cap(data)-len(data) < need {
			nd := make([]byte, len(data), 2*cap(data)+need)
			copy(nd, data)
			data = nd
		}
		buf := data[len(data):cap(data)]
		k := 0
		for j := lo; j < hi; {
			rem := hi - j
			var w uint64
			if j+8 <= len(src) {
				w = le.Uint64(src[j : j+8])
			} else {
				w = load(src, j)
			}
			if rem >= 3 {
				h := &e.hash[fsstHash(w)]
				if l := int(h.len); l != 0 && l <= rem && (w^h.sym)&fsstMask[l] == 0 {
					buf[k] = byte(h.code)
					k++
					j += l
					continue
				}
			}
			var x uint16
			if rem >= 2 {
				x = e.short[uint16(w)]
			} else {
				x = e.single[byte(w)]
			}
			if c := x & 0x1ff; c >= fsstPseudo {
				buf[k] = fsstEscape
				buf[k+1] = byte(w)
				k += 2
			} else {
				buf[k] = byte(c)
				k++
			}
			j += int(x >> 12)
		}
		data = data[:len(data)+k]
		offs[i+1] = int64(len(data))
	}
	return data
}

// table is the serialized symbol table (fsstTableBytes, compression on).
func (e *fsstEncoder) table() []byte {
	b := make([]byte, fsstTableBytes)
	le.PutUint64(b, uint64(fsstMagic)<<32|1<<24|uint64(e.ns))
	for i := 0; i < e.ns; i++ {
		le.PutUint64(b[8+8*i:], e.sym[i])
		b[8+8*e.ns+i] = e.slen[i]
	}
	return b
}

// fsstSample picks about fsstSampleMax bytes of values (whole values, or
// 512-byte pieces of long ones) spread over the block.
func fsstSample(v *block) [][]byte {
	total := v.offsets[v.n] - v.offsets[0]
	var out [][]byte
	if total <= fsstSampleMax {
		for i := 0; i < v.n; i++ {
			if s := v.data[v.offsets[i]:v.offsets[i+1]]; len(s) > 0 {
				out = append(out, s)
			}
		}
		return out
	}
	seed := uint64(0x9E3779B97F4A7C15)
	got := 0
	for tries := 0; got < fsstSampleMax/2 && tries < 4*v.n+64; tries++ {
		seed = seed*6364136223846793005 + 1442695040888963407
		i := int((seed >> 33) % uint64(v.n))
		s := v.data[v.offsets[i]:v.offsets[i+1]]
		if len(s) > 512 {
			o := int((seed >> 13) % uint64(len(s)-512))
			s = s[o : o+512]
		}
		if len(s) > 0 {
			out = append(out, s)
			got += len(s)
		}
	}
	return out
}

// fsstBlock FSST-compresses a variable-width block: the compressed values
// (offsets from 0) and the serialized symbol table, or ok false when FSST
// does not pay (LanceDB's thresholds, or no smaller than the values);
// force (the field asks for fsst) skips the thresholds.
//
// The compressed block's buffers are sc's (nil: fresh ones), valid until
// sc's next page.
func fsstBlock(v *block, force bool, sc *encScratch) (out *block, table []byte, ok bool) {
	if !v.isVar || v.n == 0 {
		return nil, nil, false
	}
	total := v.offsets[v.n] - v.offsets[0]
	if !force {
		if total < fsstMinInput {
			return nil, nil, false
		}
		maxLen := int64(0)
		for i := 0; i < v.n; i++ {
			maxLen = max(maxLen, v.offsets[i+1]-v.offsets[i])
		}
		if maxLen < fsstMinMaxLen {
			return nil, nil, false
		}
	}
	if sc == nil {
		sc = &encScratch{}
	}
	if sc.fsstEnc == nil {
		sc.fsstEnc = &fsstEncoder{}
	}
	// A table per page: one built on the column's previous page was tried
	// and compressed the next page of the benchmark's strings markedly
	// worse (0.70 against 0.50 of the raw bytes), as LanceDB also builds
	// one per page.
	e := sc.fsstEnc
	e.reset()
	fsstBuilds.Add(1)
	e.buildCounts(fsstSample(v), &sc.fsstCounts)
	if cap(sc.fsstOffs) < v.n+1 {
		sc.fsstOffs = make([]int64, v.n+1, v.n+1+v.n/4)
	}
	out = &block{n: v.n, isVar: true, offsets: sc.fsstOffs[:v.n+1]}
	out.offsets[0] = 0
	data := e.compressAll(v, out.offsets, sc.fsst)
	sc.fsst = data
	out.data = data
	if !force && int64(len(data))+fsstTableBytes >= total {
		return nil, nil, false
	}
	return out, e.table(), true
}
