package vector

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/compactord/compactord/internal/format/file"
)

// sameTypes reports whether a and b have the same types, children
// included.
func sameTypes(a, b *file.Array) bool {
	if a.Type != b.Type || len(a.Children) != len(b.Children) {
		return false
	}
	for i := range a.Children {
		if !sameTypes(a.Children[i], b.Children[i]) {
			return false
		}
	}
	return true
}

// readStorageHead gives what ReadStorage gives but the rows: the
// quantizer, its parameters, the IVF, the global buffers and the columns'
// types, which a catch-up encodes new rows and writes its segment with.
func TestReadStorageHeadMatchesReadStorage(t *testing.T) {
	sb, _ := encodeSynth(t)
	for name, b := range map[string][]byte{"pq": sb, "pq4": encodeSynthPQ4(t), "rq": encodeSynthRQ(t)} {
		full, err := ReadStorage(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		head, err := readStorageHead(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(head.RowIDs) != 0 || len(full.RowIDs) == 0 {
			t.Fatalf("%s: head read %d row ids, full read %d", name, len(head.RowIDs), len(full.RowIDs))
		}
		if head.Quantizer != full.Quantizer || head.Distance != full.Distance || !reflect.DeepEqual(head.IVF.GetLengths(), full.IVF.GetLengths()) ||
			!reflect.DeepEqual(head.Extra, full.Extra) || !reflect.DeepEqual(head.Metadata, full.Metadata) || len(head.Fields) != len(full.Fields) {
			t.Fatalf("%s: head read %+v, full read %+v", name, head, full)
		}
		if !reflect.DeepEqual(head.PQ, full.PQ) || !reflect.DeepEqual(head.SQ, full.SQ) {
			t.Fatalf("%s: quantizer %+v %+v, full read %+v %+v", name, head.PQ, head.SQ, full.PQ, full.SQ)
		}
		if len(head.Columns) != len(full.Columns) {
			t.Fatalf("%s: %d columns, full read %d", name, len(head.Columns), len(full.Columns))
		}
		for i := range head.Columns {
			if !sameTypes(head.Columns[i], full.Columns[i]) || head.Columns[i].Len != 0 {
				t.Fatalf("%s: column %d: %s (%d rows), full read %s", name, i, head.Columns[i].Type, head.Columns[i].Len, full.Columns[i].Type)
			}
		}
		for cut := 0; cut < len(b); cut += 7 {
			if _, err := readStorageHead(bytes.NewReader(b[:cut]), int64(cut)); err == nil || strings.Contains(err.Error(), "\n") {
				t.Fatalf("%s cut at %d: %v", name, cut, err)
			}
		}
	}
}

func FuzzReadStorageHead(f *testing.F) {
	sb, _ := encodeSynth(f)
	f.Add(sb)
	f.Add(encodeSynthRQ(f))
	f.Add(encodeSynthPQ4(f))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := readStorageHead(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("a multi-line error: %v", err)
			}
			return
		}
		if s.IVF == nil || len(s.Columns) == 0 {
			t.Fatalf("read without an IVF or columns: %+v", s)
		}
	})
}
