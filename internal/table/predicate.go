package table

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strings"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/format/file"
	"github.com/compactord/compactord/internal/format/jsonl"
)

// Predicate is a conjunction of comparisons "column op literal" over
// top-level columns of a Lance table, as `table delete --where` takes it.
type Predicate struct {
	expr    string
	terms   []term
	columns []string
}

type term struct {
	col int // index into Predicate.columns
	op  string
	// lit is the literal as one value of the column's type (nil for null).
	lit  *file.Array
	kind file.Kind
}

// The longer operators come first in the alternation: with "=" first,
// "id == 5" matched "=" and left "= 5" as the literal.
var termRe = regexp.MustCompile(`^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(<=|>=|!=|==|=|<|>)\s*(.+?)\s*$`)
var andRe = regexp.MustCompile(`(?i)\s+AND\s+`)

// PredicateError is a predicate that does not parse against the schema:
// the operator's input is wrong, not the table.
type PredicateError struct{ Err error }

func (e *PredicateError) Error() string { return e.Err.Error() }
func (e *PredicateError) Unwrap() error { return e.Err }

// ParsePredicate parses e.g. `id >= 10 AND cat = 'a'` against the
// manifest's fields. Operators are = (or ==), !=, <, <=, > and >=; terms
// are joined by AND. String literals use single or double quotes; numbers,
// true, false and null are bare. Literals follow `table append`'s JSON
// conventions for the column's type (binaries as base64 strings,
// timestamps, dates and times as integers in the column's unit), so any
// value `table scan` prints can be written back as a literal. Errors are
// *PredicateError.
func ParsePredicate(fields []*pb.Field, expr string) (*Predicate, error) {
	p, err := parsePredicate(fields, expr)
	if err != nil {
		return nil, &PredicateError{Err: err}
	}
	return p, nil
}

func parsePredicate(fields []*pb.Field, expr string) (*Predicate, error) {
	if strings.TrimSpace(expr) == "" {
		return nil, fmt.Errorf("empty predicate")
	}
	p := &Predicate{expr: strings.TrimSpace(expr)}
	for _, part := range andRe.Split(expr, -1) {
		part = strings.TrimSpace(part)
		m := termRe.FindStringSubmatch(part)
		if m == nil {
			return nil, fmt.Errorf("predicate term %q: want <field> <op> <literal> with op one of = == != < <= > >=, joined by AND", part)
		}
		var f *pb.Field
		for _, x := range fields {
			if x.GetParentId() == -1 && x.GetName() == m[1] {
				f = x
				break
			}
		}
		if f == nil {
			return nil, fmt.Errorf("predicate term %q: no field %q", part, m[1])
		}
		t, err := file.ParseType(f.GetLogicalType())
		if err != nil {
			return nil, fmt.Errorf("predicate term %q: %v", part, err)
		}
		if !comparable(t.Kind) {
			return nil, fmt.Errorf("predicate term %q: field %q of type %s cannot be compared", part, f.GetName(), f.GetLogicalType())
		}
		op := m[2]
		if op == "==" {
			op = "="
		}
		tm := term{op: op, kind: t.Kind}
		lit := m[3]
		var raw []byte
		switch {
		case len(lit) >= 2 && (lit[0] == '\'' && lit[len(lit)-1] == '\'' || lit[0] == '"' && lit[len(lit)-1] == '"'):
			raw, _ = json.Marshal(lit[1 : len(lit)-1])
		case lit == "null":
		case lit == "true" || lit == "false":
			raw = []byte(lit)
		default:
			if !json.Valid([]byte(lit)) {
				return nil, fmt.Errorf("predicate term %q: cannot read literal %s (quote strings)", part, lit)
			}
			raw = []byte(lit)
		}
		if raw != nil {
			b, err := jsonl.NewBuilder([]*file.Field{{Name: "v", Type: t, Nullable: true, Column: -1}})
			if err != nil {
				return nil, fmt.Errorf("predicate term %q: %v", part, err)
			}
			line := append(append([]byte(`{"v":`), raw...), '}')
			if err := b.AddLine(line); err != nil {
				return nil, fmt.Errorf("predicate term %q: %v", part, err)
			}
			tm.lit = b.Flush().Columns[0]
		}
		tm.col = -1
		for i, c := range p.columns {
			if c == f.GetName() {
				tm.col = i
			}
		}
		if tm.col < 0 {
			tm.col = len(p.columns)
			p.columns = append(p.columns, f.GetName())
		}
		p.terms = append(p.terms, tm)
	}
	return p, nil
}

// String is the predicate as given (trimmed).
func (p *Predicate) String() string { return p.expr }

// Columns are the top-level columns the predicate reads, in the order the
// terms name them first; Match takes their values in this order.
func (p *Predicate) Columns() []string { return p.columns }

// Match reports whether row i satisfies every term; cols[k] holds column
// Columns()[k] (nil when the fragment has no data for it: every value is
// null). Comparisons with null are false, as in SQL, except "= null" (is
// null) and "!= null" (is not null). Floats compare in IEEE 754 total
// order, as Arrow's comparison kernels do.
func (p *Predicate) Match(cols []*file.Array, i int) bool {
	for _, t := range p.terms {
		a := cols[t.col]
		isNull := a == nil || !a.IsValid(i)
		if isNull || t.lit == nil {
			switch {
			case t.lit == nil && t.op == "=" && isNull, t.lit == nil && t.op == "!=" && !isNull:
				continue
			}
			return false
		}
		c := compareAt(t.kind, a, i, t.lit, 0)
		ok := false
		switch t.op {
		case "=":
			ok = c == 0
		case "!=":
			ok = c != 0
		case "<":
			ok = c < 0
		case "<=":
			ok = c <= 0
		case ">":
			ok = c > 0
		case ">=":
			ok = c >= 0
		}
		if !ok {
			return false
		}
	}
	return true
}

func comparable(k file.Kind) bool {
	switch k {
	case file.KindBool, file.KindInt8, file.KindInt16, file.KindInt32, file.KindInt64,
		file.KindUint8, file.KindUint16, file.KindUint32, file.KindUint64,
		file.KindFloat16, file.KindFloat32, file.KindFloat64,
		file.KindUtf8, file.KindLargeUtf8, file.KindBinary, file.KindLargeBinary, file.KindFixedSizeBinary,
		file.KindDate32, file.KindDate64, file.KindTime32, file.KindTime64, file.KindDuration, file.KindTimestamp:
		return true
	}
	return false
}

// compareAt compares value i of a with value j of b, both of kind k.
func compareAt(k file.Kind, a *file.Array, i int, b *file.Array, j int) int {
	switch k {
	case file.KindBool:
		x, y := a.Bool(i), b.Bool(j)
		switch {
		case x == y:
			return 0
		case !x:
			return -1
		}
		return 1
	case file.KindUint8, file.KindUint16, file.KindUint32, file.KindUint64:
		return cmp3(unsignedAt(a, i), unsignedAt(b, j))
	case file.KindFloat16, file.KindFloat32, file.KindFloat64:
		return cmp3(totalOrder(floatAt(a, i)), totalOrder(floatAt(b, j)))
	case file.KindUtf8, file.KindLargeUtf8, file.KindBinary, file.KindLargeBinary, file.KindFixedSizeBinary:
		return bytes.Compare(a.Bytes(i), b.Bytes(j))
	}
	return cmp3(signedAt(a, i), signedAt(b, j))
}

func cmp3[T int64 | uint64](x, y T) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

func signedAt(a *file.Array, i int) int64 {
	switch a.Type.ByteWidth() {
	case 1:
		return int64(int8(a.Values[i]))
	case 2:
		return int64(int16(binary.LittleEndian.Uint16(a.Values[2*i:])))
	case 4:
		return int64(int32(binary.LittleEndian.Uint32(a.Values[4*i:])))
	}
	return int64(binary.LittleEndian.Uint64(a.Values[8*i:]))
}

func unsignedAt(a *file.Array, i int) uint64 {
	switch a.Type.ByteWidth() {
	case 1:
		return uint64(a.Values[i])
	case 2:
		return uint64(binary.LittleEndian.Uint16(a.Values[2*i:]))
	case 4:
		return uint64(binary.LittleEndian.Uint32(a.Values[4*i:]))
	}
	return binary.LittleEndian.Uint64(a.Values[8*i:])
}

func floatAt(a *file.Array, i int) float64 {
	switch a.Type.Kind {
	case file.KindFloat16:
		return float64(file.Float16(binary.LittleEndian.Uint16(a.Values[2*i:])))
	case file.KindFloat32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(a.Values[4*i:])))
	}
	return math.Float64frombits(binary.LittleEndian.Uint64(a.Values[8*i:]))
}

// totalOrder maps f to an integer whose order is IEEE 754's totalOrder:
// -NaN < -Inf < ... < -0 < +0 < ... < +Inf < +NaN.
func totalOrder(f float64) int64 {
	b := int64(math.Float64bits(f))
	if b < 0 {
		b ^= math.MaxInt64
	}
	return b
}
