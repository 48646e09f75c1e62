package jsonl

import (
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// The scanner accepts exactly what encoding/json accepts (RFC 8259 with
// its leniencies: any byte from 0x20 up inside strings, invalid UTF-8
// included, which unquoting coerces to U+FFFD) and returns values as the
// byte ranges json.RawMessage would hold: no surrounding white space.

// maxDepth is encoding/json's nesting limit (its scanner's
// maxNestingDepth): a line nesting objects and arrays deeper is rejected.
const maxDepth = 10000

// syntaxError is where and why a line is not JSON.
type syntaxError struct {
	msg string
	off int
}

func (e *syntaxError) Error() string { return fmt.Sprintf("%s at byte %d", e.msg, e.off) }

func errAt(b []byte, i int, context string) error {
	if i >= len(b) {
		return &syntaxError{"unexpected end of line", i}
	}
	return &syntaxError{fmt.Sprintf("invalid character %s %s", quoteByte(b[i]), context), i}
}

func quoteByte(c byte) string {
	if c < utf8.RuneSelf {
		return fmt.Sprintf("%q", rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

// isSpace is JSON's white space (encoding/json's isSpace).
func isSpace(c byte) bool {
	return c <= ' ' && (c == ' ' || c == '\t' || c == '\r' || c == '\n')
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// scanValue checks the JSON value starting at b[i] (not white space) and
// returns the index just past it. depth is the number of objects and
// arrays that enclose it.
func scanValue(b []byte, i, depth int) (int, error) {
	if i >= len(b) {
		return i, errAt(b, i, "")
	}
	switch c := b[i]; {
	case c == '"':
		end, _, err := scanString(b, i)
		return end, err
	case c == '-' || '0' <= c && c <= '9':
		return scanNumber(b, i)
	case c == 't':
		return scanLiteral(b, i, "true")
	case c == 'f':
		return scanLiteral(b, i, "false")
	case c == 'n':
		return scanLiteral(b, i, "null")
	case c == '{':
		if depth+1 > maxDepth {
			return i, &syntaxError{"exceeded max depth", i}
		}
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == '}' {
			return i + 1, nil
		}
		for {
			if i >= len(b) || b[i] != '"' {
				return i, errAt(b, i, "looking for beginning of object key string")
			}
			var err error
			if i, _, err = scanString(b, i); err != nil {
				return i, err
			}
			if i = skipSpace(b, i); i >= len(b) || b[i] != ':' {
				return i, errAt(b, i, "after object key")
			}
			if i, err = scanValue(b, skipSpace(b, i+1), depth+1); err != nil {
				return i, err
			}
			if i = skipSpace(b, i); i < len(b) && b[i] == ',' {
				i = skipSpace(b, i+1)
				continue
			}
			if i < len(b) && b[i] == '}' {
				return i + 1, nil
			}
			return i, errAt(b, i, "after object key:value pair")
		}
	case c == '[':
		if depth+1 > maxDepth {
			return i, &syntaxError{"exceeded max depth", i}
		}
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == ']' {
			return i + 1, nil
		}
		for {
			var err error
			if i, err = scanValue(b, i, depth+1); err != nil {
				return i, err
			}
			if i = skipSpace(b, i); i < len(b) && b[i] == ',' {
				i = skipSpace(b, i+1)
				continue
			}
			if i < len(b) && b[i] == ']' {
				return i + 1, nil
			}
			return i, errAt(b, i, "after array element")
		}
	}
	return i, errAt(b, i, "looking for beginning of value")
}

func scanLiteral(b []byte, i int, lit string) (int, error) {
	for k := 0; k < len(lit); k++ {
		if i+k >= len(b) || b[i+k] != lit[k] {
			return i + k, errAt(b, i+k, "in literal "+lit)
		}
	}
	return i + len(lit), nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// scanNumber checks -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?; what
// may follow is the enclosing value's business.
func scanNumber(b []byte, i int) (int, error) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && isDigit(b[i]):
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	default:
		return i, errAt(b, i, "in numeric literal")
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return i, errAt(b, i, "after decimal point in numeric literal")
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return i, errAt(b, i, "in exponent of numeric literal")
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	return i, nil
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// scanString checks the string starting at b[i] (a '"') and returns the
// index past its closing quote, and whether its content differs from its
// decoded value (escapes or bytes that are not ASCII, which may be
// invalid UTF-8).
func scanString(b []byte, i int) (end int, special bool, err error) {
	i++
	for i < len(b) {
		switch c := b[i]; {
		case c == '"':
			return i + 1, special, nil
		case c == '\\':
			special = true
			i++
			if i >= len(b) {
				return i, special, errAt(b, i, "")
			}
			switch b[i] {
			case 'b', 'f', 'n', 'r', 't', '\\', '/', '"':
				i++
			case 'u':
				i++
				for k := 0; k < 4; k++ {
					if i >= len(b) || !isHex(b[i]) {
						return i, special, errAt(b, i, `in \u hexadecimal character escape`)
					}
					i++
				}
			default:
				return i, special, errAt(b, i, "in string escape code")
			}
		case c < ' ':
			return i, special, errAt(b, i, "in string literal")
		default:
			if c >= utf8.RuneSelf {
				special = true
			}
			i++
		}
	}
	return i, special, errAt(b, i, "")
}

// plainString reports whether s, a string's content as scanned, is its
// own decoded value: no escapes and valid UTF-8.
func plainString(s []byte) bool {
	for i, c := range s {
		if c == '\\' {
			return false
		}
		if c >= utf8.RuneSelf {
			return !hasEscape(s[i:]) && utf8.Valid(s[i:])
		}
	}
	return true
}

func hasEscape(s []byte) bool {
	for _, c := range s {
		if c == '\\' {
			return true
		}
	}
	return false
}

// appendUnquoted appends the decoded value of s, a string's content as
// scanned (escapes valid, no control characters), to dst, as
// encoding/json decodes it: a surrogate pair of \u escapes is one rune, a
// lone surrogate and each byte of invalid UTF-8 become U+FFFD.
func appendUnquoted(dst, s []byte) []byte {
	for i := 0; i < len(s); {
		// Copy the run of plain ASCII in one go.
		j := i
		for j < len(s) && s[j] != '\\' && s[j] < utf8.RuneSelf {
			j++
		}
		dst = append(dst, s[i:j]...)
		if i = j; i >= len(s) {
			break
		}
		if c := s[i]; c >= utf8.RuneSelf {
			r, size := utf8.DecodeRune(s[i:])
			dst = utf8.AppendRune(dst, r)
			i += size
			continue
		}
		// An escape: the scanner has checked it is complete.
		if i+1 >= len(s) {
			return append(dst, s[i:]...)
		}
		switch e := s[i+1]; e {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r := getu4(s[i:])
			if r < 0 {
				return append(dst, s[i:]...)
			}
			i += 6
			if utf16.IsSurrogate(r) {
				if d := utf16.DecodeRune(r, getu4(s[i:])); d != utf8.RuneError {
					dst = utf8.AppendRune(dst, d)
					i += 6
					continue
				}
				r = utf8.RuneError
			}
			dst = utf8.AppendRune(dst, r)
			continue
		default: // '"', '\\', '/'
			dst = append(dst, e)
		}
		i += 2
	}
	return dst
}

// getu4 decodes a \uXXXX escape at the start of s, or returns -1.
func getu4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}
