package vector

// l2U8 is the squared L2 distance of two byte vectors of the same length,
// summed exactly in integers (modulo 2^32, as lance-linalg's l2_u8 sums in
// a u32): the distance LanceDB's SQ storage computes between two vectors'
// codes. Integer sums do not depend on their order, so the AVX2 path
// (l2U8AVX2, 32 bytes an iteration) and the Go one give the same value.
func l2U8(a, b []byte) uint32 {
	n := len(a)
	b = b[:n]
	var s uint32
	body := 0
	if useAVX2 && n >= 32 {
		body = n &^ 31
		s = l2U8AVX2(&a[0], &b[0], body)
	}
	return s + l2U8Go(a[body:], b[body:n])
}

// l2U8Go is l2U8 in Go: four independent sums over 4-byte groups, then
// the tail.
func l2U8Go(a, b []byte) uint32 {
	n := len(a)
	b = b[:n]
	var s0, s1, s2, s3 uint32
	i := 0
	for ; i+4 <= n; i += 4 {
		x, y := a[i:i+4:i+4], b[i:i+4:i+4]
		d0 := int32(x[0]) - int32(y[0])
		d1 := int32(x[1]) - int32(y[1])
		d2 := int32(x[2]) - int32(y[2])
		d3 := int32(x[3]) - int32(y[3])
		s0 += uint32(d0 * d0)
		s1 += uint32(d1 * d1)
		s2 += uint32(d2 * d2)
		s3 += uint32(d3 * d3)
	}
	for ; i < n; i++ {
		d := int32(a[i]) - int32(b[i])
		s0 += uint32(d * d)
	}
	return s0 + s1 + s2 + s3
}

// l2U8Many sets out[k] to l2U8(q, row rows[k] of codes), dim bytes a row,
// len(out) ≥ len(rows): one call for a whole neighbour list, each next
// row prefetched while the current one is summed (AVX2, dim a multiple of
// 32), else row by row.
func l2U8Many(q, codes []byte, dim int, rows []uint32, out []uint32) {
	if len(rows) == 0 {
		return
	}
	out = out[:len(rows)]
	if useAVX2 && dim >= 32 && dim%32 == 0 && len(q) == dim {
		for _, r := range rows {
			if (int(r)+1)*dim > len(codes) {
				panic("l2U8Many: row out of range")
			}
		}
		l2U8Rows(&q[0], &codes[0], dim, &rows[0], len(rows), &out[0])
		return
	}
	for k, r := range rows {
		out[k] = l2U8(q, codes[int(r)*dim:(int(r)+1)*dim])
	}
}
