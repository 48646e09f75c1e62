package vector

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"

	"google.golang.org/protobuf/proto"

	ipb "github.com/compactord/compactord/gen/lanceindexpb"
	"github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/format/file"
)

// File names of a vector index segment.
const (
	IndexFile   = "index.idx"
	StorageFile = "auxiliary.idx"
)

// Column names of the vector storage.
const (
	colRowID   = "_rowid"
	colFlat    = "flat"
	colPQ      = "__pq_code"
	colSQ      = "__sq_code"
	colRQ      = "_rabit_codes"
	colRQAdd   = "__add_factors"
	colRQScale = "__scale_factors"
	colRQErr   = "__error_factors"
)

// storageColumns are each quantizer's columns after _rowid.
var storageColumns = map[string][]string{
	QuantFlat: {colFlat},
	QuantPQ:   {colPQ},
	QuantSQ:   {colSQ},
	QuantRQ:   {colRQ, colRQAdd, colRQScale, colRQErr},
}

// PQParams are a PQ storage's parameters (storage_metadata).
type PQParams struct {
	CodebookPosition int  `json:"codebook_position"`
	NBits            int  `json:"nbits"`
	NumSubVectors    int  `json:"num_sub_vectors"`
	Dimension        int  `json:"dimension"`
	Transposed       bool `json:"transposed"`
	// Codebook is [2^nbits centroids per sub-vector] as LanceDB stores it:
	// centroid k of sub-vector j at floats (j*2^nbits + k)*(dim/m),
	// decoded to float32 from the tensor's CodebookType.
	Codebook     []float32           `json:"-"`
	CodebookType ipb.Tensor_DataType `json:"-"`
}

// SQParams are an SQ storage's parameters.
type SQParams struct {
	Dim     int `json:"dim"`
	NumBits int `json:"num_bits"`
	Bounds  struct {
		Start float64 `json:"start"`
		End   float64 `json:"end"`
	} `json:"bounds"`
}

// RQParams are an RQ storage's parameters (the ones compactord checks).
type RQParams struct {
	RotationType string `json:"rotation_type"`
	CodeDim      int    `json:"code_dim"`
	NumBits      int    `json:"num_bits"`
	Packed       bool   `json:"packed"`
	// FastRotationSigns are the fast rotation's sign bytes (JSON numbers).
	FastRotationSigns []int  `json:"fast_rotation_signs"`
	QueryEstimator    string `json:"query_estimator"`
}

// Storage is a decoded auxiliary.idx: the rows of every partition, in
// partition order, with their row addresses and codes.
type Storage struct {
	Quantizer string
	Distance  string
	// Fields and Metadata are the file's schema as read, written back
	// unchanged so that every key LanceDB wrote survives.
	Fields   []*lancepb.Field
	Metadata map[string][]byte
	// IVF holds the partitions' offsets and lengths (no centroids).
	IVF *ipb.IVF
	// Extra are global buffers 2.. (the PQ codebook), kept verbatim.
	Extra [][]byte
	// RowIDs are the rows' addresses (fragment<<32 | offset).
	RowIDs []uint64
	// Columns are the quantizer's columns, one row per vector (PQ codes
	// de-transposed: row i holds vector i's m codes).
	Columns []*file.Array
	PQ      *PQParams
	SQ      *SQParams
	RQ      *RQParams
}

// Partitions is the number of IVF partitions.
func (s *Storage) Partitions() int { return len(s.IVF.GetLengths()) }

// storageMeta is the one JSON object of storage_metadata.
func storageMeta(md map[string][]byte) ([]byte, error) {
	raw, ok := md["storage_metadata"]
	if !ok {
		return nil, formatErr("%s has no storage_metadata", StorageFile)
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil || len(list) != 1 {
		return nil, formatErr("%s: storage_metadata is not a list of one JSON string", StorageFile)
	}
	return []byte(list[0]), nil
}

// ReadStorage decodes an auxiliary.idx of size bytes.
func ReadStorage(r io.ReaderAt, size int64) (*Storage, error) {
	s, f, err := openStorage(r, size)
	if err != nil {
		return nil, err
	}
	b, err := f.ReadAll(nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", StorageFile, err)
	}
	if err := s.setRows(b); err != nil {
		return nil, err
	}
	return s, nil
}

// readStorageHead is ReadStorage without the rows: Columns hold the
// quantizer's columns' types and no rows, RowIDs is empty.
func readStorageHead(r io.ReaderAt, size int64) (*Storage, error) {
	s, f, err := openStorage(r, size)
	if err != nil {
		return nil, err
	}
	var empty func(fl *file.Field) *file.Array
	empty = func(fl *file.Field) *file.Array {
		a := &file.Array{Type: fl.Type, Name: fl.Name}
		for _, c := range fl.Children {
			a.Children = append(a.Children, empty(c))
		}
		return a
	}
	for _, fl := range f.Schema.Fields[1:] {
		s.Columns = append(s.Columns, empty(fl))
	}
	return s, nil
}

// openStorage reads an auxiliary.idx's schema, IVF partitions, global
// buffers and quantizer parameters, but none of its rows (setRows).
func openStorage(r io.ReaderAt, size int64) (*Storage, *file.File, error) {
	f, err := file.Open(r, size)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", StorageFile, err)
	}
	s := &Storage{Fields: f.Desc.GetSchema().GetFields(), Metadata: f.Desc.GetSchema().GetMetadata()}
	if string(s.Metadata["lance:ivf"]) != "1" {
		return nil, nil, unsupported("%s: lance:ivf %q (compactord reads \"1\")", StorageFile, s.Metadata["lance:ivf"])
	}
	s.Distance = string(s.Metadata["distance_type"])
	if _, ok := distanceTypes[s.Distance]; !ok {
		return nil, nil, unsupported("%s: distance type %q", StorageFile, s.Distance)
	}
	fs := f.Schema.Fields
	if len(fs) < 2 || fs[0].Name != colRowID || fs[0].Type.Kind != file.KindUint64 {
		return nil, nil, formatErr("%s: first column is not %s: uint64", StorageFile, colRowID)
	}
	var names []string
	for _, fl := range fs[1:] {
		names = append(names, fl.Name)
	}
	for q, cols := range storageColumns {
		if slices.Equal(cols, names) {
			s.Quantizer = q
		}
	}
	if s.Quantizer == "" {
		return nil, nil, unsupported("%s: storage columns %v", StorageFile, names)
	}
	if len(f.Globals) < 2 {
		return nil, nil, formatErr("%s has no IVF global buffer", StorageFile)
	}
	gb, err := f.GlobalBuffer(1)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", StorageFile, err)
	}
	if s.IVF, err = decodeIVF(gb, false); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", StorageFile, err)
	}
	if err := checkPartitions(s.IVF, f.NumRows(), StorageFile); err != nil {
		return nil, nil, err
	}
	for i := 2; i < len(f.Globals); i++ {
		b, err := f.GlobalBuffer(i)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", StorageFile, err)
		}
		s.Extra = append(s.Extra, b)
	}
	sm, err := storageMeta(s.Metadata)
	if err != nil {
		return nil, nil, err
	}
	switch s.Quantizer {
	case QuantSQ:
		s.SQ = &SQParams{}
		if err := json.Unmarshal(sm, s.SQ); err != nil {
			return nil, nil, formatErr("%s: SQ metadata: %v", StorageFile, err)
		}
		if s.SQ.NumBits != 8 {
			return nil, nil, unsupported("%s: SQ with %d bits", StorageFile, s.SQ.NumBits)
		}
	case QuantRQ:
		s.RQ = &RQParams{}
		if err := json.Unmarshal(sm, s.RQ); err != nil {
			return nil, nil, formatErr("%s: RQ metadata: %v", StorageFile, err)
		}
		if s.RQ.NumBits != 1 || s.RQ.RotationType != "fast" {
			return nil, nil, unsupported("%s: RQ with %d bits and %q rotation", StorageFile, s.RQ.NumBits, s.RQ.RotationType)
		}
	case QuantPQ:
		if err := s.readPQ(sm); err != nil {
			return nil, nil, err
		}
	}
	return s, f, nil
}

// setRows sets s's row ids and columns to b's, the rows of s.IVF's
// partitions (the whole file, or a part of it that s.IVF describes),
// checked against the quantizer, PQ codes de-transposed.
func (s *Storage) setRows(b *file.Batch) error {
	n := b.NumRows
	if uint64(n) != sumLengths(s.IVF) {
		return formatErr("%s: %d rows for partitions of %d", StorageFile, n, sumLengths(s.IVF))
	}
	for i, c := range b.Columns {
		if c == nil || c.Len != n || c.NullCount() != 0 {
			return formatErr("%s: column %s does not hold %d non-null rows", StorageFile, append([]string{colRowID}, storageColumns[s.Quantizer]...)[i], n)
		}
	}
	ids := b.Columns[0]
	if len(ids.Values) < 8*n {
		return formatErr("%s: column %s holds %d bytes for %d rows", StorageFile, colRowID, len(ids.Values), n)
	}
	s.RowIDs = make([]uint64, n)
	for i := range s.RowIDs {
		s.RowIDs[i] = binary.LittleEndian.Uint64(ids.Values[8*i:])
	}
	s.Columns = b.Columns[1:]
	switch s.Quantizer {
	case QuantFlat:
		if s.Distance == "hamming" {
			return checkFSL(s.Columns[0], colFlat, 0, file.KindUint8)
		}
		return checkFSL(s.Columns[0], colFlat, 0, file.KindFloat16, file.KindFloat32, file.KindFloat64)
	case QuantSQ:
		return checkFSL(s.Columns[0], colSQ, s.SQ.Dim, file.KindUint8)
	case QuantRQ:
		if err := checkFSL(s.Columns[0], colRQ, (s.RQ.CodeDim+7)/8, file.KindUint8); err != nil {
			return err
		}
		for i, c := range s.Columns[1:] {
			if c.Type.Kind != file.KindFloat32 {
				return formatErr("%s: column %s has type %s", StorageFile, storageColumns[QuantRQ][i+1], c.Type)
			}
		}
		if err := s.readRQ(); err != nil {
			return err
		}
	case QuantPQ:
		return s.setPQCodes()
	}
	return nil
}

// sumLengths is the rows of ivf's partitions.
func sumLengths(ivf *ipb.IVF) uint64 {
	var n uint64
	for _, l := range ivf.GetLengths() {
		n += uint64(l)
	}
	return n
}

// checkFSL checks that a is a fixed-size list of width (any when 0) of one
// of kinds.
func checkFSL(a *file.Array, name string, width int, kinds ...file.Kind) error {
	if a.Type.Kind != file.KindFixedSizeList || len(a.Children) != 1 || (width > 0 && a.Type.Size != width) || a.Type.Size <= 0 {
		return formatErr("%s: column %s has type %s", StorageFile, name, a.Type)
	}
	c := a.Children[0]
	if !slices.Contains(kinds, c.Type.Kind) || c.Len != a.Len*a.Type.Size || len(c.Values) < c.Len*c.Type.ByteWidth() {
		return formatErr("%s: column %s holds %d items of %s", StorageFile, name, c.Len, c.Type)
	}
	return nil
}

func (s *Storage) readPQ(sm []byte) error {
	p := &PQParams{}
	if err := json.Unmarshal(sm, p); err != nil {
		return formatErr("%s: PQ metadata: %v", StorageFile, err)
	}
	if p.NBits != 8 && p.NBits != 4 {
		return unsupported("%s: PQ with %d bits", StorageFile, p.NBits)
	}
	if p.NumSubVectors <= 0 || p.Dimension <= 0 || p.Dimension%p.NumSubVectors != 0 || p.NumSubVectors*p.NBits%8 != 0 {
		return formatErr("%s: PQ of %d %d-bit sub-vectors over %d dimensions", StorageFile, p.NumSubVectors, p.NBits, p.Dimension)
	}
	if p.CodebookPosition < 2 || p.CodebookPosition-2 >= len(s.Extra) {
		return formatErr("%s: PQ codebook in global buffer %d of %d", StorageFile, p.CodebookPosition, len(s.Extra)+2)
	}
	t := &ipb.Tensor{}
	if err := proto.Unmarshal(s.Extra[p.CodebookPosition-2], t); err != nil {
		return formatErr("%s: PQ codebook: %v", StorageFile, err)
	}
	want := uint64(p.entries()) * uint64(p.Dimension)
	if w := tensorWidth(t.GetDataType()); w == 0 || t.GetDataType() == ipb.Tensor_UINT8 || uint64(len(t.GetData())) != uint64(w)*want {
		return formatErr("%s: PQ codebook of %s, %d bytes, want %d floats", StorageFile, t.GetDataType(), len(t.GetData()), want)
	}
	p.Codebook = tensorFloats(t)
	p.CodebookType = t.GetDataType()
	s.PQ = p
	return nil
}

// setPQCodes checks the PQ code column and de-transposes it.
func (s *Storage) setPQCodes() error {
	p := s.PQ
	if err := checkFSL(s.Columns[0], colPQ, p.codeBytes(), file.KindUint8); err != nil {
		return err
	}
	if p.Transposed {
		codes := s.Columns[0].Children[0]
		m := p.codeBytes()
		out := make([]byte, len(s.RowIDs)*m)
		for part, off := range s.IVF.GetOffsets() {
			n := int(s.IVF.GetLengths()[part])
			blk := codes.Values[int(off)*m : (int(off)+n)*m]
			for i := range n {
				for j := range m {
					out[(int(off)+i)*m+j] = blk[j*n+i]
				}
			}
		}
		s.Columns[0] = fslU8(out, m)
	}
	return nil
}

// fslU8 is a fixed-size list array of width-byte rows.
func fslU8(b []byte, width int) *file.Array {
	n := len(b) / width
	return &file.Array{Type: file.DataType{Kind: file.KindFixedSizeList, Size: width}, Len: n,
		Children: []*file.Array{{Type: file.DataType{Kind: file.KindUint8}, Len: len(b), Values: b}}}
}

func uint64Array(v []uint64) *file.Array {
	b := make([]byte, 0, 8*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, x)
	}
	return &file.Array{Type: file.DataType{Kind: file.KindUint64}, Len: len(v), Values: b}
}

// WriteStorage encodes s as an auxiliary.idx (PQ codes transposed and RQ
// codes packed per partition again when the metadata says so) and
// returns its size.
func WriteStorage(w io.Writer, s *Storage) (int64, error) {
	if err := checkPartitions(s.IVF, uint64(len(s.RowIDs)), StorageFile); err != nil {
		return 0, err
	}
	cols := []*file.Array{uint64Array(s.RowIDs)}
	for i, c := range s.Columns {
		if c.Len != len(s.RowIDs) {
			return 0, fmt.Errorf("%s: column %d has %d rows, want %d", StorageFile, i, c.Len, len(s.RowIDs))
		}
		cols = append(cols, c)
	}
	if s.Quantizer == QuantPQ && s.PQ.Transposed {
		cols[1] = transposePQ(s)
	}
	if s.Quantizer == QuantRQ && s.RQ.Packed {
		cols[1] = s.mapRQPartitions(packRQ)
	}
	ivf, err := encodeIVF(&ipb.IVF{Offsets: s.IVF.GetOffsets(), Lengths: s.IVF.GetLengths()})
	if err != nil {
		return 0, err
	}
	return writeFile(w, s.Fields, s.Metadata, append([][]byte{ivf}, s.Extra...), cols)
}

// transposePQ lays s's row-major PQ codes out as LanceDB stores them:
// column-major within each partition.
func transposePQ(s *Storage) *file.Array {
	m := s.PQ.codeBytes()
	rows := s.Columns[0].Children[0].Values
	out := make([]byte, len(s.RowIDs)*m)
	for part, off := range s.IVF.GetOffsets() {
		n := int(s.IVF.GetLengths()[part])
		blk := out[int(off)*m : (int(off)+n)*m]
		for i := range n {
			for j := range m {
				blk[j*n+i] = rows[(int(off)+i)*m+j]
			}
		}
	}
	return fslU8(out, m)
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// writeFile writes a Lance 2.2 file of cols (all of one length).
func writeFile(w io.Writer, fields []*lancepb.Field, md map[string][]byte, globals [][]byte, cols []*file.Array) (int64, error) {
	cw := &countingWriter{w: w}
	fw, err := file.NewWriter(cw, fields, file.WriterOptions{Version: file.V2_2, Metadata: md, GlobalBuffers: globals})
	if err != nil {
		return 0, err
	}
	n := 0
	if len(cols) > 0 {
		n = cols[0].Len
	}
	const chunk = 64 << 10
	for start := 0; start < n; start += chunk {
		end := min(n, start+chunk)
		b := &file.Batch{NumRows: end - start}
		for _, c := range cols {
			b.Columns = append(b.Columns, rowsView(c, start, end))
		}
		if err := fw.Write(b); err != nil {
			return 0, err
		}
	}
	if err := fw.Close(); err != nil {
		return 0, err
	}
	return cw.n, nil
}

// rowsView is rows [from, to) of a: sharing a's bytes when a is a
// column of fixed-width values, or a fixed-size list or a list of them,
// without nulls (the codes and row ids: a copy of a 64 Ki-row chunk of
// 768-byte SQ codes was 48 MiB; a graph's neighbour and distance lists,
// 20 MiB), else a copy (Slice).
func rowsView(a *file.Array, from, to int) *file.Array {
	fixed := func(x *file.Array) int {
		if w := x.Type.ByteWidth(); w > 0 && x.Valid == nil && len(x.Children) == 0 && len(x.Offsets) == 0 && x.Type.Kind != file.KindBool && len(x.Values) >= x.Len*w {
			return w
		}
		return 0
	}
	if w := fixed(a); w > 0 {
		return &file.Array{Type: a.Type, Name: a.Name, Len: to - from, Values: a.Values[from*w : to*w]}
	}
	if a.Type.Kind == file.KindFixedSizeList && a.Valid == nil && len(a.Children) == 1 && a.Type.Size > 0 {
		c, d := a.Children[0], a.Type.Size
		if w := fixed(c); w > 0 {
			item := &file.Array{Type: c.Type, Name: c.Name, Len: (to - from) * d, Values: c.Values[from*d*w : to*d*w]}
			return &file.Array{Type: a.Type, Name: a.Name, Len: to - from, Children: []*file.Array{item}}
		}
	}
	// A list of fixed-width items (an HNSW graph's neighbours and
	// distances): the offsets rebased, the items shared.
	if (a.Type.Kind == file.KindList || a.Type.Kind == file.KindLargeList) && a.Valid == nil && len(a.Children) == 1 && len(a.Offsets) == a.Len+1 {
		c := a.Children[0]
		lo, hi := a.Offsets[from], a.Offsets[to]
		if w := fixed(c); w > 0 && lo >= 0 && lo <= hi && int(hi) <= c.Len {
			offs := make([]int64, to-from+1)
			for i := range offs {
				offs[i] = a.Offsets[from+i] - lo
			}
			item := &file.Array{Type: c.Type, Name: c.Name, Len: int(hi - lo), Values: c.Values[int(lo)*w : int(hi)*w]}
			return &file.Array{Type: a.Type, Name: a.Name, Len: to - from, Offsets: offs, Children: []*file.Array{item}}
		}
	}
	return a.Slice(from, to)
}

func f32(b []byte) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(b))
}

// readRQ checks the fast rotation's signs and unpacks packed RQ codes to
// one row per vector.
func (s *Storage) readRQ() error {
	p := s.RQ
	if p.CodeDim <= 0 || p.CodeDim%8 != 0 || s.Columns[0].Type.Size != p.CodeDim/8 {
		return formatErr("%s: RQ codes of %d bytes for code_dim %d", StorageFile, s.Columns[0].Type.Size, p.CodeDim)
	}
	if len(p.FastRotationSigns) != rqRounds*p.CodeDim/8 {
		return formatErr("%s: %d fast rotation signs for code_dim %d, want %d", StorageFile, len(p.FastRotationSigns), p.CodeDim, rqRounds*p.CodeDim/8)
	}
	for _, b := range p.FastRotationSigns {
		if b < 0 || b > 255 {
			return formatErr("%s: fast rotation sign byte %d", StorageFile, b)
		}
	}
	if p.QueryEstimator != "" && p.QueryEstimator != "raw_query" {
		return unsupported("%s: RQ query estimator %q", StorageFile, p.QueryEstimator)
	}
	if p.Packed {
		s.Columns[0] = s.mapRQPartitions(unpackRQ)
	}
	return nil
}

// mapRQPartitions applies f (unpackRQ or packRQ) to each partition's RQ
// codes.
func (s *Storage) mapRQPartitions(f func(b []byte, n, w int) []byte) *file.Array {
	w := s.Columns[0].Type.Size
	codes := s.Columns[0].Children[0].Values
	out := make([]byte, 0, len(s.RowIDs)*w)
	for part, off := range s.IVF.GetOffsets() {
		n := int(s.IVF.GetLengths()[part])
		out = append(out, f(codes[int(off)*w:(int(off)+n)*w], n, w)...)
	}
	return fslU8(out, w)
}

// rotationSigns are the fast rotation's sign bytes.
func (p *RQParams) rotationSigns() []byte {
	out := make([]byte, len(p.FastRotationSigns))
	for i, b := range p.FastRotationSigns {
		out[i] = byte(b)
	}
	return out
}

// codeBytes is the width of a row's PQ codes: one byte per sub-vector, or
// two 4-bit codes a byte (sub-vector 2k in the low nibble, 2k+1 in the
// high one).
func (p *PQParams) codeBytes() int { return p.NumSubVectors * p.NBits / 8 }

// entries is the number of codebook entries per sub-vector.
func (p *PQParams) entries() int { return 1 << p.NBits }

// code is sub-vector j's code in a row's codes.
func (p *PQParams) code(row []byte, j int) int {
	if p.NBits == 4 {
		return int(row[j/2]>>(4*(j%2))) & 0xf
	}
	return int(row[j])
}
