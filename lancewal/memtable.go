package lancewal

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"

	"github.com/compactord/compactord/internal/format/arrowipc"
	"github.com/compactord/compactord/internal/format/file"
)

// memtable buffers the rows written since the last flush, in WAL order,
// with the bloom filter of their keys.
type memtable struct {
	st      *state
	batches []*rowBatch
	rows    int
	bytes   int
	pkBytes int
	bloom   *bloom
}

func newMemtable(st *state) *memtable { return &memtable{st: st, bloom: newBloom()} }

// rowBatch is one WAL entry's rows: a chunk per table column and the
// tombstone flags.
type rowBatch struct {
	st   *state
	n    int
	cols []*chunk
	tomb []bool
}

func (b *rowBatch) key(i int) any { return b.cols[b.st.pk].value(i) }

func (b *rowBatch) bytes() int {
	n := (len(b.tomb) + 7) / 8
	for _, c := range b.cols {
		n += len(c.fixed) + len(c.varbuf) + (len(c.valid)+7)/8
		if c.offs != nil {
			n += 4 * len(c.offs)
		}
	}
	return n
}

// build checks and converts rows; tombstone rows carry only their key.
func (m *memtable) build(rows []Row, tombstone bool) (*rowBatch, error) {
	st := m.st
	b := &rowBatch{st: st, n: len(rows), tomb: make([]bool, len(rows))}
	pkName := st.cols[st.pk].field.GetName()
	known := make(map[string]bool, len(st.cols))
	for _, c := range st.cols {
		known[c.field.GetName()] = true
		b.cols = append(b.cols, newChunk(c, len(rows)))
	}
	for r, row := range rows {
		for k := range row {
			if !known[k] {
				return nil, fmt.Errorf("lancewal: row %d: no column %q in the table", r, k)
			}
		}
		if row[pkName] == nil {
			return nil, fmt.Errorf("lancewal: row %d: the primary key %q is missing or null", r, pkName)
		}
		b.tomb[r] = tombstone
		for i, c := range st.cols {
			ch := b.cols[i]
			if tombstone && i != st.pk {
				// The read view ignores a tombstone's values; nullable
				// columns hold null, the others a zero.
				ch.addZero(!c.field.GetNullable())
				continue
			}
			if err := ch.add(row[c.field.GetName()]); err != nil {
				return nil, fmt.Errorf("lancewal: row %d: %w", r, err)
			}
			if err := ch.checkFinite(ch.n - 1); err != nil {
				return nil, fmt.Errorf("lancewal: row %d: %w", r, err)
			}
		}
	}
	return b, nil
}

func (m *memtable) add(b *rowBatch) {
	m.batches = append(m.batches, b)
	m.rows += b.n
	m.bytes += b.bytes()
	pk := b.cols[m.st.pk]
	for i := 0; i < b.n; i++ {
		m.bloom.insert(pkHash(pk, i))
		if pk.col.variable() {
			m.pkBytes += int(pk.offs[i+1] - pk.offs[i])
		} else {
			m.pkBytes += max(pk.col.width, 1)
		}
	}
}

// pkHash is the hash LanceDB's memtable feeds the bloom filter: Rust's
// DefaultHasher over the key's is-null flag and then its value as Rust's
// Hash writes it (integers little-endian, str bytes then 0xff, a byte
// slice its length then its bytes). LanceDB hashes only int32, int64,
// utf8 and binary values; for other key types only the flag is hashed.
func pkHash(ch *chunk, i int) uint64 {
	msg := make([]byte, 0, 24)
	if !ch.valid[i] {
		return sipHash13(append(msg, 1))
	}
	msg = append(msg, 0)
	switch ch.col.t.Kind {
	case file.KindInt32:
		msg = append(msg, ch.fixed[4*i:4*i+4]...)
	case file.KindInt64:
		msg = append(msg, ch.fixed[8*i:8*i+8]...)
	case file.KindUtf8:
		msg = append(msg, ch.varbuf[ch.offs[i]:ch.offs[i+1]]...)
		msg = append(msg, 0xff)
	case file.KindBinary:
		v := ch.varbuf[ch.offs[i]:ch.offs[i+1]]
		msg = binary.LittleEndian.AppendUint64(msg, uint64(len(v)))
		msg = append(msg, v...)
	}
	return sipHash13(msg)
}

// walSchema is the Arrow schema of a WAL entry: the table's columns with
// their field metadata (the primary-key position among it), then
// _tombstone, and the writer's epoch in the schema metadata.
func walSchema(st *state, epoch uint64) *arrowipc.Schema {
	s := &arrowipc.Schema{Metadata: arrowipc.Metadata{{Key: "writer_epoch", Value: strconv.FormatUint(epoch, 10)}}}
	for _, c := range st.cols {
		f := arrowipc.Field{Name: c.field.GetName(), Type: c.arrowType(), Nullable: c.field.GetNullable(), Children: c.arrowChildren()}
		for k, v := range c.field.GetMetadata() {
			f.Metadata = append(f.Metadata, arrowipc.KeyValue{Key: k, Value: string(v)})
		}
		s.Fields = append(s.Fields, f)
	}
	s.Fields = append(s.Fields, arrowipc.Field{Name: TombstoneColumn, Type: arrowipc.TBool})
	return s
}

// walEntry encodes the batch as LanceDB writes a WAL entry: an
// uncompressed Arrow IPC stream of one record batch.
func (b *rowBatch) walEntry(epoch uint64) ([]byte, error) {
	batch := &arrowipc.Batch{Len: b.n}
	for _, c := range b.cols {
		if c.col.variable() && len(c.varbuf) > math.MaxInt32 && c.col.t.Kind != file.KindLargeUtf8 && c.col.t.Kind != file.KindLargeBinary {
			return nil, fmt.Errorf("lancewal: column %q holds more than 2 GiB in one write; split the write", c.col.field.GetName())
		}
		batch.Columns = append(batch.Columns, c.arrowArray())
	}
	batch.Columns = append(batch.Columns, arrowipc.BoolArray(b.tomb, nil))
	return arrowipc.WriteStream(walSchema(b.st, epoch), []*arrowipc.Batch{batch}, arrowipc.None)
}

// fromArrow converts a replayed WAL batch (columns matched by name) back
// into a row batch.
func (m *memtable) fromArrow(s *arrowipc.Schema, batch *arrowipc.Batch) (*rowBatch, error) {
	st := m.st
	b := &rowBatch{st: st, n: batch.Len, tomb: make([]bool, batch.Len)}
	tc := batch.Column(s, TombstoneColumn)
	for i := 0; i < batch.Len; i++ {
		b.tomb[i] = tc != nil && tc.IsValid(i) && tc.Bool(i)
	}
	for ci, c := range st.cols {
		a := batch.Column(s, c.field.GetName())
		ch := newChunk(c, batch.Len)
		for i := 0; i < batch.Len; i++ {
			if a == nil || !a.IsValid(i) {
				if ci == st.pk {
					return nil, fmt.Errorf("row %d has no primary key", i)
				}
				ch.addZero(!c.field.GetNullable() && b.tomb[i])
				if !c.field.GetNullable() && !b.tomb[i] {
					return nil, fmt.Errorf("row %d: column %q is null", i, c.field.GetName())
				}
				continue
			}
			v, err := arrowValue(a, i)
			if err != nil {
				return nil, fmt.Errorf("column %q: %w", c.field.GetName(), err)
			}
			if err := ch.add(v); err != nil {
				return nil, err
			}
		}
		b.cols = append(b.cols, ch)
	}
	return b, nil
}

// arrowValue is value i of a as a Go value chunk.add takes.
func arrowValue(a *arrowipc.Array, i int) (any, error) {
	t := a.Type
	switch t.ID {
	case arrowipc.Bool:
		return a.Bool(i), nil
	case arrowipc.FixedSizeList:
		return arrowVector(a, i)
	case arrowipc.Utf8, arrowipc.LargeUtf8, arrowipc.Binary, arrowipc.LargeBinary:
		return append([]byte(nil), a.Bytes(i)...), nil
	case arrowipc.Int, arrowipc.Date, arrowipc.Timestamp:
		w := t.BitWidth
		if t.ID == arrowipc.Timestamp {
			w = 64
		}
		if t.ID == arrowipc.Date {
			if t.BitWidth != 32 {
				return nil, fmt.Errorf("date64 is not supported")
			}
		}
		if (i+1)*w/8 > len(a.Values) {
			return nil, fmt.Errorf("value %d is out of the buffer", i)
		}
		raw := a.Values[i*w/8 : (i+1)*w/8]
		var buf [8]byte
		copy(buf[:], raw)
		u := binary.LittleEndian.Uint64(buf[:])
		if t.ID == arrowipc.Int && !t.Signed {
			return u, nil
		}
		if w < 64 && raw[len(raw)-1]&0x80 != 0 {
			u |= ^uint64(0) << w
		}
		return int64(u), nil
	case arrowipc.Float:
		switch t.BitWidth {
		case 32:
			if 4*(i+1) > len(a.Values) {
				return nil, fmt.Errorf("value %d is out of the buffer", i)
			}
			return math.Float32frombits(binary.LittleEndian.Uint32(a.Values[4*i:])), nil
		case 64:
			if 8*(i+1) > len(a.Values) {
				return nil, fmt.Errorf("value %d is out of the buffer", i)
			}
			return math.Float64frombits(binary.LittleEndian.Uint64(a.Values[8*i:])), nil
		}
	}
	return nil, fmt.Errorf("arrow type %s is not supported", t)
}
