package fts

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// WriteFSTMap encodes keys (ascending, distinct) with their values as an
// fst crate map (version 3, type 0) that the fst crate's reader, and so
// LanceDB, loads. It writes the keys' trie without sharing suffixes (the
// crate's builder also merges equal subtrees; the format does not require
// it), every node in the any-transitions form, each value as its key's
// final output.
func WriteFSTMap(keys [][]byte, vals []uint64) ([]byte, error) {
	if len(keys) != len(vals) {
		return nil, fmt.Errorf("fst: %d keys, %d values", len(keys), len(vals))
	}
	type node struct {
		final  bool
		out    uint64
		inputs []byte
		kids   []*node
	}
	root := &node{}
	for i, k := range keys {
		if i > 0 && bytes.Compare(keys[i-1], k) >= 0 {
			return nil, fmt.Errorf("fst: keys not ascending and distinct at %d", i)
		}
		n := root
		for _, c := range k {
			if l := len(n.inputs); l > 0 && n.inputs[l-1] == c {
				n = n.kids[l-1]
				continue
			}
			m := &node{}
			n.inputs = append(n.inputs, c)
			n.kids = append(n.kids, m)
			n = m
		}
		n.final, n.out = true, vals[i]
	}
	buf := binary.LittleEndian.AppendUint64(nil, 3)
	buf = binary.LittleEndian.AppendUint64(buf, 0)
	packSize := func(v uint64) int {
		n := 1
		for v >= 1<<(8*n) && n < 8 {
			n++
		}
		return n
	}
	pack := func(v uint64, n int) {
		for i := 0; i < n; i++ {
			buf = append(buf, byte(v>>(8*i)))
		}
	}
	var compile func(n *node) uint64
	compile = func(n *node) uint64 {
		addrs := make([]uint64, len(n.kids))
		for i, k := range n.kids {
			addrs[i] = compile(k)
		}
		if len(n.kids) == 0 && n.final && n.out == 0 {
			return 0 // the empty final node
		}
		start := uint64(len(buf))
		delta := func(a uint64) uint64 {
			if a == 0 {
				return 0
			}
			return start - a
		}
		tsize := 0
		for _, a := range addrs {
			tsize = max(tsize, packSize(delta(a)))
		}
		// Layout, front to back (the reader walks it back from the state
		// byte): final output and the transitions' outputs (all zero)
		// when there is a final output, address deltas, inputs, the
		// input index past 32 transitions, pack sizes, the count when
		// the state byte cannot hold it, the state byte.
		nt := len(n.kids)
		osize := 0
		if n.final && n.out != 0 {
			osize = packSize(n.out)
			pack(n.out, osize)
			for range nt {
				pack(0, osize)
			}
		}
		for i := nt - 1; i >= 0; i-- {
			pack(delta(addrs[i]), tsize)
		}
		for i := nt - 1; i >= 0; i-- {
			buf = append(buf, n.inputs[i])
		}
		if nt > fstTransIndexThreshold {
			idx := bytes.Repeat([]byte{255}, 256)
			for i, c := range n.inputs {
				idx[c] = byte(i)
			}
			buf = append(buf, idx...)
		}
		buf = append(buf, byte(tsize<<4|osize))
		state := byte(0)
		if n.final {
			state |= 0x40
		}
		if nt >= 1 && nt <= 63 {
			state |= byte(nt)
		} else {
			// A count byte of 1 stands for 256 (1 always fits the state).
			buf = append(buf, byte(nt%256+nt/256))
		}
		buf = append(buf, state)
		return uint64(len(buf) - 1)
	}
	rootAddr := compile(root)
	buf = binary.LittleEndian.AppendUint64(buf, uint64(len(keys)))
	buf = binary.LittleEndian.AppendUint64(buf, rootAddr)
	return binary.LittleEndian.AppendUint32(buf, crc32.Checksum(buf, crc32.MakeTable(crc32.Castagnoli))), nil
}
