package ops

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/table"
)

// Predicate is a conjunction of comparisons "field op literal".
type Predicate struct {
	terms []term
}

type term struct {
	field int
	op    string
	value any
}

var termRe = regexp.MustCompile(`^\s*([A-Za-z][A-Za-z0-9_]*)\s*(<=|>=|!=|==|=|<|>)\s*(.+?)\s*$`)
var andRe = regexp.MustCompile(`(?i)\s+AND\s+`)

// ParsePredicate parses e.g. `id >= 10 AND cat = 'a'`. String literals use
// single or double quotes; numbers, true, false and null are bare.
func ParsePredicate(s *pb.Schema, expr string) (*Predicate, error) {
	if strings.TrimSpace(expr) == "" {
		return nil, fmt.Errorf("empty predicate")
	}
	p := &Predicate{}
	for _, part := range andRe.Split(expr, -1) {
		m := termRe.FindStringSubmatch(part)
		if m == nil {
			return nil, fmt.Errorf("predicate term %q: want <field> <op> <literal> with op one of = == != < <= > >=, joined by AND", strings.TrimSpace(part))
		}
		f := table.FieldByName(s, m[1])
		if f == nil {
			return nil, fmt.Errorf("predicate term %q: no field %q", strings.TrimSpace(part), m[1])
		}
		lit := m[3]
		var raw any
		switch {
		case len(lit) >= 2 && (lit[0] == '\'' && lit[len(lit)-1] == '\'' || lit[0] == '"' && lit[len(lit)-1] == '"'):
			raw = lit[1 : len(lit)-1]
		case lit == "true" || lit == "false":
			raw = lit == "true"
		case lit == "null":
			raw = nil
		default:
			if !json.Valid([]byte(lit)) {
				return nil, fmt.Errorf("predicate term %q: cannot read literal %s (quote strings)", strings.TrimSpace(part), lit)
			}
			raw = json.Number(lit)
		}
		fc := &pb.Field{Id: f.Id, Name: f.Name, Type: f.Type, Nullable: true}
		v, err := table.ParseValue(fc, raw)
		if err != nil {
			return nil, fmt.Errorf("predicate term %q: %v", strings.TrimSpace(part), err)
		}
		op := m[2]
		if op == "==" {
			op = "="
		}
		p.terms = append(p.terms, term{field: table.FieldIndex(s, f.Id), op: op, value: v})
	}
	return p, nil
}

// Match reports whether r satisfies every term. Comparisons with null are
// false, as in SQL, except "= null" and "!= null".
func (p *Predicate) Match(r table.Row) bool {
	for _, t := range p.terms {
		v := r[t.field]
		if v == nil || t.value == nil {
			isNull := v == nil
			switch {
			case t.value == nil && t.op == "=" && isNull, t.value == nil && t.op == "!=" && !isNull:
				continue
			}
			return false
		}
		c := table.CompareValues(v, t.value)
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
