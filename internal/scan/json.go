package scan

import (
	"encoding/base64"
	"encoding/binary"
	"math"
	"math/big"
	"strconv"
	"unicode/utf8"

	"github.com/compactord/compactord/internal/format/file"
)

// AppendValue appends value i of a as JSON, by the conventions of
// `table scan`: integers exact (never through float64), floats as the
// shortest decimal that reads back to the same value (NaN and infinities
// as the strings "NaN", "Infinity", "-Infinity", as LanceDB's JSON tools
// write them), strings as strings, binaries as base64, dates as days since
// the epoch, timestamps, times and durations as integers in the column's
// unit, decimals as decimal strings, lists and fixed-size lists as arrays,
// structs as objects keyed by name (names: the manifest's, by field id),
// nulls as null.
func AppendValue(dst []byte, a *file.Array, i int, names map[int32]string, f *file.Field) []byte {
	if !a.IsValid(i) {
		return append(dst, "null"...)
	}
	t := a.Type
	switch t.Kind {
	case file.KindNull:
		return append(dst, "null"...)
	case file.KindBool:
		if a.Bool(i) {
			return append(dst, "true"...)
		}
		return append(dst, "false"...)
	case file.KindInt8:
		return strconv.AppendInt(dst, int64(int8(a.Values[i])), 10)
	case file.KindUint8:
		return strconv.AppendUint(dst, uint64(a.Values[i]), 10)
	case file.KindInt16:
		return strconv.AppendInt(dst, int64(int16(le16(a.Values, i))), 10)
	case file.KindUint16:
		return strconv.AppendUint(dst, uint64(le16(a.Values, i)), 10)
	case file.KindInt32, file.KindTime32:
		return strconv.AppendInt(dst, int64(int32(le32(a.Values, i))), 10)
	case file.KindDate32:
		return strconv.AppendInt(dst, int64(int32(le32(a.Values, i))), 10)
	case file.KindUint32:
		return strconv.AppendUint(dst, uint64(le32(a.Values, i)), 10)
	case file.KindInt64, file.KindTimestamp, file.KindTime64, file.KindDuration:
		return strconv.AppendInt(dst, int64(le64(a.Values, i)), 10)
	case file.KindDate64:
		ms := int64(le64(a.Values, i))
		d := ms / 86_400_000
		if ms%86_400_000 < 0 {
			d--
		}
		return strconv.AppendInt(dst, d, 10)
	case file.KindUint64:
		return strconv.AppendUint(dst, le64(a.Values, i), 10)
	case file.KindFloat16:
		return appendFloat(dst, float64(file.Float16(le16(a.Values, i))), 32)
	case file.KindFloat32:
		return appendFloat(dst, float64(math.Float32frombits(le32(a.Values, i))), 32)
	case file.KindFloat64:
		return appendFloat(dst, math.Float64frombits(le64(a.Values, i)), 64)
	case file.KindUtf8, file.KindLargeUtf8:
		return AppendString(dst, a.Bytes(i))
	case file.KindBinary, file.KindLargeBinary, file.KindFixedSizeBinary:
		b := a.Bytes(i)
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, b)
		return append(dst, '"')
	case file.KindDecimal128, file.KindDecimal256:
		w := t.ByteWidth()
		return appendDecimal(dst, a.Values[i*w:(i+1)*w], t.Scale)
	case file.KindList, file.KindLargeList:
		c := a.Children[0]
		dst = append(dst, '[')
		for k := a.Offsets[i]; k < a.Offsets[i+1]; k++ {
			if k > a.Offsets[i] {
				dst = append(dst, ',')
			}
			dst = AppendValue(dst, c, int(k), names, child(f, 0))
		}
		return append(dst, ']')
	case file.KindFixedSizeList:
		c := a.Children[0]
		dst = append(dst, '[')
		for k := 0; k < t.Size; k++ {
			if k > 0 {
				dst = append(dst, ',')
			}
			dst = AppendValue(dst, c, i*t.Size+k, names, child(f, 0))
		}
		return append(dst, ']')
	case file.KindStruct:
		dst = append(dst, '{')
		for k, c := range a.Children {
			if k > 0 {
				dst = append(dst, ',')
			}
			cf := child(f, k)
			dst = AppendString(dst, []byte(fieldName(c.Name, cf, names)))
			dst = append(dst, ':')
			dst = AppendValue(dst, c, i, names, cf)
		}
		return append(dst, '}')
	}
	// Every kind the reader decodes is handled above.
	return append(dst, "null"...)
}

func child(f *file.Field, k int) *file.Field {
	if f == nil || k >= len(f.Children) {
		return nil
	}
	return f.Children[k]
}

func fieldName(fallback string, f *file.Field, names map[int32]string) string {
	if f != nil {
		if n, ok := names[f.ID]; ok && f.ID >= 0 {
			return n
		}
		return f.Name
	}
	return fallback
}

func le16(b []byte, i int) uint16 { return binary.LittleEndian.Uint16(b[2*i:]) }
func le32(b []byte, i int) uint32 { return binary.LittleEndian.Uint32(b[4*i:]) }
func le64(b []byte, i int) uint64 { return binary.LittleEndian.Uint64(b[8*i:]) }

func appendFloat(dst []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(dst, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(dst, `"-Infinity"`...)
	}
	return strconv.AppendFloat(dst, f, 'g', -1, bits)
}

// appendDecimal writes a little-endian two's-complement integer scaled by
// 10^-scale as a JSON string ("-12.50").
func appendDecimal(dst []byte, le []byte, scale int) []byte {
	be := make([]byte, len(le))
	for k := range le {
		be[len(le)-1-k] = le[k]
	}
	n := new(big.Int).SetBytes(be)
	if be[0]&0x80 != 0 {
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(8*len(le))))
	}
	s := n.String()
	neg := ""
	if s[0] == '-' {
		neg, s = "-", s[1:]
	}
	if scale > 0 {
		for len(s) <= scale {
			s = "0" + s
		}
		s = s[:len(s)-scale] + "." + s[len(s)-scale:]
	} else if scale < 0 {
		for k := 0; k < -scale; k++ {
			s += "0"
		}
	}
	dst = append(dst, '"')
	dst = append(dst, neg...)
	dst = append(dst, s...)
	return append(dst, '"')
}

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string; invalid UTF-8 becomes U+FFFD,
// as encoding/json does.
func AppendString(dst []byte, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
