package fts

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// alphaPostings are the postings of token alpha in the seed
// positions.bin, LanceDB 0.39's stream (packed_delta_v1) for 300 docs:
// doc 0 "the quick brown fox jumps over the lazy dog alpha" (alpha at
// 9), docs 1..299 "alpha the beta alpha<i%3> verylongword alpha gamma"
// (at 0 and 5), with max_token_length 6 and stop words removed.
func alphaPostings() (*Postings, []uint32, []uint32) {
	p := &Postings{}
	var want []uint32
	for d := uint32(0); d < 300; d++ {
		p.Docs = append(p.Docs, d)
		if d == 0 {
			p.Freqs = append(p.Freqs, 1)
			want = append(want, 9)
			continue
		}
		p.Freqs = append(p.Freqs, 2)
		want = append(want, 0, 5)
	}
	return p, []uint32{0, 192, 290}, want
}

// TestPositionSeedDecodes: LanceDB's stream decodes to the positions the
// docs have, and encoding them gives LanceDB's bytes and offsets back.
func TestPositionSeedDecodes(t *testing.T) {
	stream := seed(t, "positions.bin")
	p, offs, want := alphaPostings()
	if err := DecodePositions(stream, offs, p, PackedDelta); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.Positions, want) {
		t.Fatalf("positions %v..., want %v...", p.Positions[:5], want[:5])
	}
	got, gotOffs, err := EncodePositions(p, PackedDelta)
	if err != nil || !bytes.Equal(got, stream) || !slices.Equal(gotOffs, offs) {
		t.Fatalf("re-encoded: %d bytes offsets %v (%v), LanceDB's %d bytes offsets %v", len(got), gotOffs, err, len(stream), offs)
	}
}

// TestPositionsRoundTrip: random postings round-trip under both codecs,
// across full 128-delta groups and tails.
func TestPositionsRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, codec := range []PositionCodec{PackedDelta, VarintDocDelta} {
		for _, n := range []int{1, 127, 128, 129, 300, 1000} {
			p := &Postings{}
			for d := 0; d < n; d++ {
				p.Docs = append(p.Docs, uint32(2*d))
				f := 1 + r.IntN(5)
				if n == 129 {
					f = 1 // with pos 0: a full group of zero deltas, packed in 0 bits
				}
				p.Freqs = append(p.Freqs, uint32(f))
				pos := uint32(r.IntN(3))
				if n == 129 {
					pos = 0
				}
				for range f {
					p.Positions = append(p.Positions, pos)
					pos += 1 + uint32(r.IntN(1<<r.IntN(20)))
				}
			}
			stream, offs, err := EncodePositions(p, codec)
			if err != nil {
				t.Fatal(err)
			}
			q := &Postings{Docs: p.Docs, Freqs: p.Freqs}
			if err := DecodePositions(stream, offs, q, codec); err != nil || !slices.Equal(q.Positions, p.Positions) {
				t.Fatalf("codec %d, %d docs: round trip differs (%v)", codec, n, err)
			}
		}
	}
}

// TestDecodePositionsRefuses: a stream that does not match its postings
// is an error, never a panic or a huge allocation.
func TestDecodePositionsRefuses(t *testing.T) {
	stream := seed(t, "positions.bin")
	for name, c := range map[string]struct {
		stream []byte
		offs   []uint32
		freq0  uint32
	}{
		"truncated":      {stream[:len(stream)-1], []uint32{0, 192, 290}, 1},
		"trailing bytes": {append(slices.Clone(stream), 0), []uint32{0, 192, 290}, 1},
		"offsets count":  {stream, []uint32{0, 192}, 1},
		"offset past":    {stream, []uint32{0, 192, 9999}, 1},
		"offsets order":  {stream, []uint32{0, 290, 192}, 1},
		"huge frequency": {stream, []uint32{0, 192, 290}, 1 << 31},
	} {
		p, _, _ := alphaPostings()
		p.Freqs[0] = c.freq0
		if err := DecodePositions(c.stream, c.offs, p, PackedDelta); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

func FuzzDecodePositions(f *testing.F) {
	f.Add(seed(f, "positions.bin"), uint16(300), uint8(2), uint32(192), uint32(290))
	f.Add([]byte{3, 1, 2}, uint16(1), uint8(3), uint32(0), uint32(0))
	f.Fuzz(func(t *testing.T, stream []byte, n uint16, freq uint8, o1, o2 uint32) {
		p := &Postings{}
		for d := 0; d < int(n)%(3*BlockSize+1); d++ {
			p.Docs = append(p.Docs, uint32(d))
			p.Freqs = append(p.Freqs, uint32(freq))
		}
		offs := []uint32{0, o1, o2}[:(len(p.Docs)+BlockSize-1)/BlockSize]
		if err := DecodePositions(stream, offs, p, PackedDelta); err != nil {
			return
		}
		// What decodes re-encodes to something that decodes the same.
		enc, eo, err := EncodePositions(p, PackedDelta)
		if err != nil {
			t.Fatal(err)
		}
		q := &Postings{Docs: p.Docs, Freqs: p.Freqs}
		if err := DecodePositions(enc, eo, q, PackedDelta); err != nil || !slices.Equal(p.Positions, q.Positions) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

// TestTokenPositions: positions count every base token, so a token a
// filter drops (too long here) leaves a gap.
func TestTokenPositions(t *testing.T) {
	raw := `{"base_tokenizer":"simple","lower_case":true,"max_token_length":6,"with_position":true}`
	var p Params
	if err := jsonUnmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	tok, err := NewTokenizer(p)
	if err != nil {
		t.Fatal(err)
	}
	toks, pos, err := tok.TokenPositions("Alpha, verylongword beta--Alpha1 x")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(toks, []string{"alpha", "beta", "x"}) || !slices.Equal(pos, []uint32{0, 2, 4}) {
		t.Fatalf("tokens %q at %v, want alpha beta x at 0 2 4", toks, pos)
	}
	plain, _ := tok.Tokens("Alpha, verylongword beta--Alpha1 x")
	if !slices.Equal(plain, toks) {
		t.Fatalf("TokenPositions' tokens %q differ from Tokens' %q", toks, plain)
	}
}

// TestPerWordTokensMatchWhole: for the simple and whitespace base
// tokenizers, filtering each base token on its own (what a partition
// build does, once per distinct word) gives Tokens' tokens of the whole
// doc, on random ASCII text with punctuation, case, tabs and long words.
func TestPerWordTokensMatchWhole(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	alphabet := "abcXYZ019 ,.-_'\t\n!?"
	for _, base := range []string{"simple", "whitespace"} {
		for _, lower := range []bool{false, true} {
			raw := fmt.Sprintf(`{"base_tokenizer":%q,"lower_case":%v,"max_token_length":7}`, base, lower)
			var p Params
			if err := jsonUnmarshal(raw, &p); err != nil {
				t.Fatal(err)
			}
			tok, err := NewTokenizer(p)
			if err != nil {
				t.Fatal(err)
			}
			for range 500 {
				b := make([]byte, r.IntN(60))
				for i := range b {
					b[i] = alphabet[r.IntN(len(alphabet))]
				}
				doc := string(b)
				whole, err := tok.Tokens(doc)
				if err != nil {
					t.Fatal(err)
				}
				var words []string
				if err := tok.eachBaseToken(doc, func(_ int, w string) error {
					ts, err := tok.Tokens(w)
					words = append(words, ts...)
					return err
				}); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(whole, words) {
					t.Fatalf("%s: %q: word by word %q, whole %q", raw, doc, words, whole)
				}
			}
		}
	}
}
