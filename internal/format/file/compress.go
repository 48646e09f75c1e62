package file

import (
	"bytes"
	"io"
	"sync"

	pb "github.com/compactord/compactord/gen/lancefilepb"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// maxDecompressed bounds what one compressed buffer may expand to, so a
// hostile length prefix or frame cannot force a huge allocation; Lance
// compresses chunks and pages, which LanceDB keeps far below this.
const maxDecompressed = 256 << 20

var zstdDecoders = sync.Pool{New: func() any {
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxDecompressed), zstd.WithDecoderMaxWindow(maxDecompressed))
	if err != nil {
		panic(err) // only on invalid options
	}
	return d
}}

var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

// unzstd decodes a Lance zstd buffer: a u64 uncompressed length then a
// frame, or (older writers) a bare frame.
func unzstd(src []byte) ([]byte, error) {
	if len(src) == 0 {
		return nil, nil
	}
	d := zstdDecoders.Get().(*zstd.Decoder)
	defer zstdDecoders.Put(d)
	if len(src) >= 8 && !(bytes.HasPrefix(src, zstdMagic) && src[4]&0x10 == 0) {
		n := le.Uint64(src)
		if n > maxDecompressed {
			return nil, errf("zstd buffer claims %d bytes", n)
		}
		// Grow from what the input can justify rather than trusting n.
		out, err := d.DecodeAll(src[8:], make([]byte, 0, min(n, uint64(len(src))*64)))
		if err != nil {
			return nil, errf("zstd: %v", err)
		}
		if uint64(len(out)) != n {
			return nil, errf("zstd buffer decoded to %d bytes, header says %d", len(out), n)
		}
		return out, nil
	}
	if err := d.Reset(bytes.NewReader(src)); err != nil {
		return nil, errf("zstd: %v", err)
	}
	out, err := io.ReadAll(io.LimitReader(d, maxDecompressed+1))
	if err != nil {
		return nil, errf("zstd: %v", err)
	}
	if len(out) > maxDecompressed {
		return nil, errf("zstd frame expands past %d bytes", maxDecompressed)
	}
	return out, nil
}

// unlz4 decodes a Lance lz4 buffer: a u32 uncompressed length then a raw
// LZ4 block.
func unlz4(src []byte) ([]byte, error) {
	if len(src) < 4 {
		return nil, errf("lz4 buffer of %d bytes", len(src))
	}
	n := le.Uint32(src)
	// An LZ4 block expands at most 255x.
	if uint64(n) > uint64(len(src))*255+16 {
		return nil, errf("lz4 buffer claims %d bytes from %d", n, len(src))
	}
	out := make([]byte, n)
	if err := lz4Block(src[4:], out); err != nil {
		return nil, err
	}
	return out, nil
}

// lz4Block decodes a raw LZ4 block into dst, which must be exactly the
// decompressed size.
func lz4Block(src, dst []byte) error {
	si, di := 0, 0
	for si < len(src) {
		tok := src[si]
		si++
		lit := int(tok >> 4)
		if lit == 15 {
			for {
				if si >= len(src) {
					return errf("lz4: truncated literal length")
				}
				b := src[si]
				si++
				lit += int(b)
				if b != 255 {
					break
				}
			}
		}
		if lit > len(src)-si || lit > len(dst)-di {
			return errf("lz4: literal run overflows")
		}
		copy(dst[di:], src[si:si+lit])
		si += lit
		di += lit
		if si == len(src) {
			break
		}
		if si+2 > len(src) {
			return errf("lz4: truncated match offset")
		}
		off := int(src[si]) | int(src[si+1])<<8
		si += 2
		if off == 0 || off > di {
			return errf("lz4: bad match offset %d", off)
		}
		ml := int(tok & 15)
		if ml == 15 {
			for {
				if si >= len(src) {
					return errf("lz4: truncated match length")
				}
				b := src[si]
				si++
				ml += int(b)
				if b != 255 {
					break
				}
			}
		}
		ml += 4
		if ml > len(dst)-di {
			return errf("lz4: match overflows the output")
		}
		for k := 0; k < ml; k++ {
			dst[di+k] = dst[di-off+k]
		}
		di += ml
	}
	if di != len(dst) {
		return errf("lz4: decoded %d bytes, want %d", di, len(dst))
	}
	return nil
}

var zstdEncoders = sync.Pool{New: func() any {
	e, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedDefault))
	if err != nil {
		panic(err) // only on invalid options
	}
	return e
}}

// compressBuffer applies a general-purpose compression as Lance frames it:
// zstd is a u64 length then a frame, lz4 a u32 length then a raw block.
func compressBuffer(c pb.CompressionScheme, b []byte) ([]byte, error) {
	switch c {
	case pb.CompressionScheme_COMPRESSION_ALGORITHM_ZSTD:
		e := zstdEncoders.Get().(*zstd.Encoder)
		defer zstdEncoders.Put(e)
		return e.EncodeAll(b, le.AppendUint64(nil, uint64(len(b)))), nil
	case pb.CompressionScheme_COMPRESSION_ALGORITHM_LZ4:
		out := make([]byte, 4+lz4.CompressBlockBound(len(b)))
		le.PutUint32(out, uint32(len(b)))
		var c lz4.Compressor
		n, err := c.CompressBlock(b, out[4:])
		if err != nil {
			return nil, err
		}
		if n == 0 && len(b) > 0 {
			// Incompressible: lz4 reports 0; store the bytes as literals.
			return append(le.AppendUint32(nil, uint32(len(b))), lz4Literals(b)...), nil
		}
		return out[:4+n], nil
	}
	return b, nil
}

// lz4Literals is an LZ4 block holding b as one literal run.
func lz4Literals(b []byte) []byte {
	n := len(b)
	var out []byte
	if n < 15 {
		out = append(out, byte(n<<4))
	} else {
		out = append(out, 0xf0)
		r := n - 15
		for r >= 255 {
			out = append(out, 255)
			r -= 255
		}
		out = append(out, byte(r))
	}
	return append(out, b...)
}
