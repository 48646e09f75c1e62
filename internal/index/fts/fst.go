package fts

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrFormat marks a malformed full-text index file.
var ErrFormat = errors.New("malformed lance full-text index")

func formatErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrFormat}, args...)...)
}

// An FST map as the Rust fst crate (version 3 files) writes it: LanceDB
// 0.39 stores a partition's token dictionary (token bytes → token id) in
// one (token_set_format "fst").
//
// Layout: u64 version (1..3), u64 type, the nodes, u64 key count, u64
// root address, and (version 3) a u32 CRC-32C. Nodes are written back to
// front: a node's address is its last byte (the state byte) and its other
// fields lie before it. State byte, top bits:
//
//	11iiiiii  one transition to the node written just before this one,
//	          output 0; input = common input i (i = 0: the byte before)
//	10iiiiii  one transition with a packed output and address delta;
//	          before the state (and input byte if i = 0) a pack-size byte
//	          (high nibble address bytes, low nibble output bytes), then
//	          the address delta, then the output
//	0fnnnnnn  any number of transitions (n = 0: the count is the byte
//	          before; a count byte of 1 means 256), final if f; before
//	          the state: pack sizes, a 256-byte index when there are more
//	          than 32 transitions (version ≥ 2), the inputs, the address
//	          deltas, the outputs and the final output, each list in
//	          reverse transition order
//
// A transition's target is the node's lowest byte address minus the
// delta; address 0 is the empty final node. A key's value is the sum of
// the outputs along its path plus the final node's final output.

// fstCommonInputs are the bytes common input indexes 1..63 stand for.
const fstCommonInputs = "te/oasripcnw.hlm-du012g=:bf3y5&_4v9678k%?xCDASFIBEjPTzRNM+LOqHG"

const fstTransIndexThreshold = 32

type fstNode struct {
	final       bool
	finalOutput uint64
	inputs      []byte
	outputs     []uint64
	addrs       []uint64
}

// fstReader decodes nodes of one FST.
type fstReader struct {
	data    []byte
	version uint64
}

func unpackUint(b []byte, n int) uint64 {
	var v uint64
	for i := 0; i < n; i++ {
		v |= uint64(b[i]) << (8 * i)
	}
	return v
}

// node decodes the node at addr; every offset is checked against the
// data so that a hostile FST gives an error.
func (r *fstReader) node(addr uint64) (*fstNode, error) {
	if addr == 0 {
		return &fstNode{final: true}, nil
	}
	if addr >= uint64(len(r.data)) || addr < 16 {
		return nil, formatErr("fst node address %d outside %d bytes", addr, len(r.data))
	}
	d := r.data
	at := int(addr) // the next unread byte is at-1, reading backwards
	take := func(n int) ([]byte, error) {
		if n < 0 || at-n < 16 {
			return nil, formatErr("fst node at %d runs into the header", addr)
		}
		at -= n
		return d[at : at+n], nil
	}
	state := d[addr]
	n := &fstNode{}
	commonInput := func(idx byte) (byte, error) {
		if idx != 0 {
			return fstCommonInputs[idx-1], nil
		}
		b, err := take(1)
		if err != nil {
			return 0, err
		}
		return b[0], nil
	}
	switch state >> 6 {
	case 0b11:
		in, err := commonInput(state & 0x3f)
		if err != nil {
			return nil, err
		}
		// The target is the node just before this one's lowest byte.
		if at < 17 {
			return nil, formatErr("fst node at %d has no next node", addr)
		}
		n.inputs, n.outputs, n.addrs = []byte{in}, []uint64{0}, []uint64{uint64(at - 1)}
		return n, nil
	case 0b10:
		in, err := commonInput(state & 0x3f)
		if err != nil {
			return nil, err
		}
		ps, err := take(1)
		if err != nil {
			return nil, err
		}
		tsize, osize := int(ps[0]>>4), int(ps[0]&0xf)
		if tsize > 8 || osize > 8 {
			return nil, formatErr("fst node at %d: pack sizes %d/%d", addr, tsize, osize)
		}
		tb, err := take(tsize)
		if err != nil {
			return nil, err
		}
		ob, err := take(osize)
		if err != nil {
			return nil, err
		}
		ta, err := target(uint64(at), unpackUint(tb, tsize), addr)
		if err != nil {
			return nil, err
		}
		n.inputs, n.outputs, n.addrs = []byte{in}, []uint64{unpackUint(ob, osize)}, []uint64{ta}
		return n, nil
	}
	n.final = state&0x40 != 0
	ntrans := int(state & 0x3f)
	if ntrans == 0 {
		b, err := take(1)
		if err != nil {
			return nil, err
		}
		ntrans = int(b[0])
		if ntrans == 1 {
			ntrans = 256
		}
	}
	ps, err := take(1)
	if err != nil {
		return nil, err
	}
	tsize, osize := int(ps[0]>>4), int(ps[0]&0xf)
	if tsize > 8 || osize > 8 {
		return nil, formatErr("fst node at %d: pack sizes %d/%d", addr, tsize, osize)
	}
	if r.version >= 2 && ntrans > fstTransIndexThreshold {
		if _, err := take(256); err != nil {
			return nil, err
		}
	}
	ins, err := take(ntrans)
	if err != nil {
		return nil, err
	}
	tas, err := take(ntrans * tsize)
	if err != nil {
		return nil, err
	}
	var outs, fo []byte
	if osize > 0 {
		if outs, err = take(ntrans * osize); err != nil {
			return nil, err
		}
		if n.final {
			if fo, err = take(osize); err != nil {
				return nil, err
			}
			n.finalOutput = unpackUint(fo, osize)
		}
	}
	end := uint64(at)
	n.inputs = make([]byte, ntrans)
	n.outputs = make([]uint64, ntrans)
	n.addrs = make([]uint64, ntrans)
	// Each list is stored in reverse transition order: transition i's
	// entry is the (i+1)-th from the list's end.
	for i := 0; i < ntrans; i++ {
		n.inputs[i] = ins[ntrans-1-i]
		p := (ntrans - 1 - i) * tsize
		if n.addrs[i], err = target(end, unpackUint(tas[p:], tsize), addr); err != nil {
			return nil, err
		}
		if osize > 0 {
			n.outputs[i] = unpackUint(outs[(ntrans-1-i)*osize:], osize)
		}
	}
	return n, nil
}

// target resolves a transition's address delta from a node whose lowest
// byte is end; the target must lie below the node (FSTs are written
// children first), so walks terminate.
func target(end, delta, addr uint64) (uint64, error) {
	if delta == 0 {
		return 0, nil
	}
	if delta > end {
		return 0, formatErr("fst node at %d: transition delta %d below the data", addr, delta)
	}
	t := end - delta
	if t >= addr {
		return 0, formatErr("fst node at %d: transition to %d does not point backwards", addr, t)
	}
	return t, nil
}

// maxFSTKeyLen bounds a key's length while walking (LanceDB's tokens are
// at most max_token_length bytes; anything much longer is corruption).
const maxFSTKeyLen = 1 << 16

// fstKeysPerByte bounds the keys (and, eightfold, the key bytes) a walk
// may produce per byte of FST: an FST shares prefixes and suffixes, so a
// regular token set (one token per code point, say) holds many more keys
// than bytes, but a footer claiming thousands of keys per byte is hostile.
const fstKeysPerByte = 4096

// ReadFSTMap decodes every (key, value) pair of an fst crate map, in key
// order. It checks the header, the key count and that values and keys
// are well formed; the checksum is not verified.
func ReadFSTMap(data []byte) (keys [][]byte, values []uint64, err error) {
	if len(data) < 36 {
		return nil, nil, formatErr("fst of %d bytes", len(data))
	}
	version := binary.LittleEndian.Uint64(data)
	if version == 0 || version > 3 {
		return nil, nil, formatErr("fst version %d (compactord reads 1 to 3)", version)
	}
	end := len(data)
	if version == 3 {
		end -= 4
	}
	root := binary.LittleEndian.Uint64(data[end-8:])
	count := binary.LittleEndian.Uint64(data[end-16:])
	r := &fstReader{data: data[:end-16], version: version}
	if count > uint64(len(data))*fstKeysPerByte {
		return nil, nil, formatErr("fst claims %d keys in %d bytes", count, len(data))
	}
	keyBytes := uint64(len(data)) * fstKeysPerByte * 8
	if count == 0 {
		return nil, nil, nil
	}
	type frame struct {
		n   *fstNode
		i   int
		out uint64
		key int // key length at this node
	}
	rn, err := r.node(root)
	if err != nil {
		return nil, nil, err
	}
	var key []byte
	stack := []frame{{n: rn}}
	// A hostile FST can share nodes so that a walk never ends in keys:
	// bound the node decodes by what the claimed keys can need.
	budget := (count+1)*256 + uint64(len(data))
	if rn.final {
		keys, values = append(keys, []byte{}), append(values, rn.finalOutput)
	}
	for len(stack) > 0 {
		top := &stack[len(stack)-1]
		if top.i >= len(top.n.inputs) {
			stack = stack[:len(stack)-1]
			continue
		}
		i := top.i
		top.i++
		key = append(key[:top.key], top.n.inputs[i])
		out := top.out + top.n.outputs[i]
		if budget--; budget == 0 {
			return nil, nil, formatErr("fst walk exceeds what %d keys need", count)
		}
		child, err := r.node(top.n.addrs[i])
		if err != nil {
			return nil, nil, err
		}
		if len(key) > maxFSTKeyLen || len(stack) > maxFSTKeyLen {
			return nil, nil, formatErr("fst key longer than %d bytes", maxFSTKeyLen)
		}
		if child.final {
			if uint64(len(keys)) >= count {
				return nil, nil, formatErr("fst holds more than the %d keys it claims", count)
			}
			if uint64(len(key)) > keyBytes {
				return nil, nil, formatErr("fst keys exceed %d bytes", uint64(len(data))*fstKeysPerByte*8)
			}
			keyBytes -= uint64(len(key))
			keys = append(keys, append([]byte(nil), key...))
			values = append(values, out+child.finalOutput)
		}
		stack = append(stack, frame{n: child, out: out, key: len(key)})
	}
	if uint64(len(keys)) != count {
		return nil, nil, formatErr("fst holds %d keys, its footer says %d", len(keys), count)
	}
	return keys, values, nil
}
