package meta

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

// corpusFiles returns every real file of the LanceDB corpus match accepts.
func corpusFiles(t testing.TB, match func(rel string) bool) []string {
	t.Helper()
	return lancedb.CorpusFiles(t, match)
}

func isManifest(p string) bool {
	return strings.Contains(p, "/_versions/") && strings.HasSuffix(p, ".manifest")
}
func isShardManifest(p string) bool {
	return strings.Contains(p, "/manifest/") && strings.HasSuffix(p, ".binpb")
}
func isTxn(p string) bool { return strings.HasSuffix(p, ".txn") }

// unknownField is a field number no Lance message uses, with a payload
// recognisable in the output.
const unknownField = 9999

func withUnknown(b []byte) []byte {
	b = protowire.AppendTag(b, unknownField, protowire.BytesType)
	return protowire.AppendBytes(b, []byte("from a newer writer"))
}

func hasUnknown(b []byte) bool {
	return bytes.Contains(b, withUnknown(nil))
}

// TestManifestFilesRoundTrip decodes every manifest LanceDB wrote, and
// re-encodes it: equal content, the version named by the file, and the
// same sections.
func TestManifestFilesRoundTrip(t *testing.T) {
	identical := 0
	files := corpusFiles(t, isManifest)
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		f, err := DecodeManifestFile(data)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if v, _, ok := ParseManifestKey(VersionsDir + filepath.Base(p)); !ok || v != f.Manifest.GetVersion() {
			t.Errorf("%s: name says %d (ok=%v), manifest says %d", p, v, ok, f.Manifest.GetVersion())
		}
		if u := f.Manifest.ProtoReflect().GetUnknown(); len(u) > 0 {
			t.Errorf("%s: manifest has %d bytes of fields our proto does not name", p, len(u))
		}
		out, err := EncodeManifestFile(f)
		if err != nil {
			t.Fatal(err)
		}
		g, err := DecodeManifestFile(out)
		if err != nil {
			t.Fatalf("%s: re-encoded: %v", p, err)
		}
		if !proto.Equal(f.Manifest, g.Manifest) || !proto.Equal(f.Transaction, g.Transaction) || len(f.Indices) != len(g.Indices) || (f.Indices == nil) != (g.Indices == nil) {
			t.Errorf("%s: content changed by a round trip", p)
		}
		for i := range f.Indices {
			if !proto.Equal(f.Indices[i], g.Indices[i]) {
				t.Errorf("%s: index %d changed by a round trip", p, i)
			}
		}
		if bytes.Equal(out, data) {
			identical++
		}
	}
	// Go and prost both write fields in number order; they differ only in
	// how map entries with a zero key are written. Most files come back
	// byte for byte.
	if identical*2 < len(files) {
		t.Errorf("only %d of %d manifests re-encode byte-identically", identical, len(files))
	}
}

// TestUnknownFieldsSurvive: a field a newer writer adds to any message kind
// LanceDB writes survives decode, modify, encode.
func TestUnknownFieldsSurvive(t *testing.T) {
	msgs := map[string]func() proto.Message{
		"manifest":      func() proto.Message { return &pb.Manifest{} },
		"transaction":   func() proto.Message { return &pb.Transaction{} },
		"shard":         func() proto.Message { return &pb.ShardManifest{} },
		"index":         func() proto.Message { return &pb.IndexMetadata{} },
		"memwal":        func() proto.Message { return &pb.MemWalIndexDetails{} },
		"fragment":      func() proto.Message { return &pb.DataFragment{} },
		"frag_reuse":    func() proto.Message { return &pb.FragmentReuseIndexDetails{} },
		"index_section": func() proto.Message { return &pb.IndexSection{} },
	}
	check := func(name string, raw []byte, mutate func(proto.Message)) {
		t.Helper()
		m := msgs[name]()
		if err := proto.Unmarshal(withUnknown(append([]byte(nil), raw...)), m); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		mutate(m)
		out, err := marshal.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if !hasUnknown(out) {
			t.Errorf("%s: the unknown field was dropped by a read-modify-write", name)
		}
	}
	for _, p := range corpusFiles(t, isManifest) {
		data, _ := os.ReadFile(p)
		f, err := DecodeManifestFile(data)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := marshal.Marshal(f.Manifest)
		check("manifest", raw, func(m proto.Message) { m.(*pb.Manifest).Version++ })
		// Through the whole file layout too.
		mf := &pb.Manifest{}
		_ = proto.Unmarshal(withUnknown(raw), mf)
		f.Manifest = mf
		out, err := EncodeManifestFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if g, err := DecodeManifestFile(out); err != nil || !hasUnknown(g.Manifest.ProtoReflect().GetUnknown()) {
			t.Errorf("%s: unknown manifest field lost through the file layout (%v)", p, err)
		}
		for _, ix := range f.Indices {
			raw, _ := marshal.Marshal(ix)
			check("index", raw, func(m proto.Message) { m.(*pb.IndexMetadata).DatasetVersion++ })
			if ix.GetName() == MemWalIndexName {
				check("memwal", ix.GetIndexDetails().GetValue(), func(m proto.Message) { m.(*pb.MemWalIndexDetails).NumShards++ })
			}
			if ix.GetName() == FragReuseIndexName {
				check("frag_reuse", ix.GetIndexDetails().GetValue(), func(m proto.Message) {})
			}
		}
		if f.Indices != nil {
			raw, _ := marshal.Marshal(&pb.IndexSection{Indices: f.Indices})
			check("index_section", raw, func(m proto.Message) {})
		}
		for _, fr := range f.Manifest.GetFragments() {
			raw, _ := marshal.Marshal(fr)
			check("fragment", raw, func(m proto.Message) { m.(*pb.DataFragment).PhysicalRows++ })
		}
	}
	for _, p := range corpusFiles(t, isTxn) {
		raw, _ := os.ReadFile(p)
		check("transaction", raw, func(m proto.Message) { m.(*pb.Transaction).ReadVersion++ })
	}
	for _, p := range corpusFiles(t, isShardManifest) {
		raw, _ := os.ReadFile(p)
		check("shard", raw, func(m proto.Message) { m.(*pb.ShardManifest).Version++ })
	}
}

func TestTransactionFilesDecode(t *testing.T) {
	ops := map[string]int{}
	for _, p := range corpusFiles(t, isTxn) {
		raw, _ := os.ReadFile(p)
		txn, err := DecodeTransaction(raw)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if txn.GetOperation() == nil {
			t.Errorf("%s: no operation we know", p)
		}
		if u := txn.ProtoReflect().GetUnknown(); len(u) > 0 {
			t.Errorf("%s: %d bytes of fields our proto does not name", p, len(u))
		}
		name := filepath.Base(p)
		if !strings.HasPrefix(name, strings.Split(TransactionName(txn.GetReadVersion(), txn.GetUuid()), "-")[0]+"-") || !strings.Contains(name, txn.GetUuid()) {
			t.Errorf("%s: name does not match read version %d and uuid %s", p, txn.GetReadVersion(), txn.GetUuid())
		}
		ops[string(txn.ProtoReflect().WhichOneof(txn.ProtoReflect().Descriptor().Oneofs().ByName("operation")).Name())]++
	}
	// The corpus covers what LanceDB 0.39 commits for these fixtures.
	for _, want := range []string{"append", "delete", "create_index", "update_config", "rewrite", "reserve_fragments", "overwrite"} {
		if ops[want] == 0 {
			t.Errorf("no %s transaction in the corpus (have %v)", want, ops)
		}
	}
}

func TestNames(t *testing.T) {
	if got := ManifestKey(NamingV2, 1); got != "_versions/18446744073709551614.manifest" {
		t.Errorf("v1 = %s", got)
	}
	if got := ManifestKey(NamingV1, 7); got != "_versions/7.manifest" {
		t.Errorf("V1 naming of 7 = %s", got)
	}
	for _, v := range []uint64{1, 2, 9, 10, 1 << 40, math.MaxUint64 - 1} {
		for _, n := range []Naming{NamingV1, NamingV2} {
			if n == NamingV1 && v > 1e18 {
				continue
			}
			got, gn, ok := ParseManifestKey(ManifestKey(n, v))
			if !ok || got != v || gn != n {
				t.Errorf("ParseManifestKey(ManifestKey(%v, %d)) = %d, %v, %v", n, v, got, gn, ok)
			}
		}
	}
	for _, bad := range []string{"_versions/latest_version_hint.json", "_versions/d18446744073709551614.manifest",
		"_versions/.tmp-ab", "_versions/0.manifest", "_versions/18446744073709551615.manifest", "_versions/x/1.manifest", "data/1.manifest"} {
		if _, _, ok := ParseManifestKey(bad); ok {
			t.Errorf("ParseManifestKey(%q) accepted", bad)
		}
	}
	if got := TransactionName(3, "u"); got != "3-u.txn" {
		t.Errorf("TransactionName = %s", got)
	}
}

// TestCorruptManifestFile: every truncation and a flipped byte in each
// region give an error that names the problem, never a panic.
func TestCorruptManifestFile(t *testing.T) {
	p := corpusFiles(t, isManifest)[0]
	data, _ := os.ReadFile(p)
	for n := 0; n < len(data); n++ {
		if _, err := DecodeManifestFile(data[:n]); err == nil {
			t.Fatalf("truncated to %d of %d bytes: decoded", n, len(data))
		}
	}
	for i := range data {
		bad := append([]byte(nil), data...)
		bad[i] ^= 0xff
		f, err := DecodeManifestFile(bad)
		if err == nil && f.Manifest == nil {
			t.Fatalf("flip at %d: nil manifest without an error", i)
		}
	}
	ctx := t.Context()
	b := memBucket(t)
	if err := b.Put(ctx, ManifestKey(NamingV2, 1), data[:len(data)-3]); err != nil {
		t.Fatal(err)
	}
	_, err := ReadVersion(ctx, b, NamingV2, 1)
	if !errors.Is(err, ErrCorrupt) || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), ManifestKey(NamingV2, 1)) {
		t.Errorf("corrupt manifest: %v", err)
	}
}

func TestLatestAndList(t *testing.T) {
	ctx := t.Context()
	b, err := storage.Open(ctx, "file://"+lancedb.CorpusDir(t, "plain"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	v, n, err := Latest(ctx, b)
	if err != nil || v != 3 || n != NamingV2 {
		t.Fatalf("Latest = %d, %v, %v", v, n, err)
	}
	vs, _, err := ListVersions(ctx, b)
	if err != nil || len(vs) != 3 || vs[0] != 1 || vs[2] != 3 {
		t.Fatalf("ListVersions = %v, %v", vs, err)
	}
	empty := memBucket(t)
	if _, _, err := Latest(ctx, empty); !errors.Is(err, ErrNoTable) {
		t.Errorf("empty: %v", err)
	}
	// V1 names need the whole listing.
	old := memBucket(t)
	for _, v := range []uint64{1, 2, 10} {
		f := &ManifestFile{Manifest: &pb.Manifest{Version: v}}
		raw, _ := EncodeManifestFile(f)
		_ = old.Put(ctx, ManifestKey(NamingV1, v), raw)
	}
	if v, n, err := Latest(ctx, old); err != nil || v != 10 || n != NamingV1 {
		t.Errorf("V1 Latest = %d, %v, %v", v, n, err)
	}
}

func TestFlags(t *testing.T) {
	m := &pb.Manifest{WriterFeatureFlags: FlagDeletionFiles | FlagDataOverlays, ReaderFeatureFlags: FlagDeletionFiles | FlagDataOverlays}
	if err := CheckRead(m); err != nil {
		t.Errorf("overlays refused for reading metadata: %v", err)
	}
	err := CheckWrite(m)
	var fe *FeatureError
	if !errors.As(err, &fe) || !fe.Write || !strings.Contains(err.Error(), "data overlay") {
		t.Errorf("CheckWrite with overlays = %v", err)
	}
	if err := CheckRead(&pb.Manifest{ReaderFeatureFlags: 1 << 20}); err == nil || !strings.Contains(err.Error(), "unknown flag") {
		t.Errorf("unknown reader bit: %v", err)
	}
	n := &pb.Manifest{Fragments: []*pb.DataFragment{{Id: 1, DeletionFile: &pb.DeletionFile{}}}}
	RecomputeFlags(n, FlagStableRowIDs|FlagTableConfig, FlagStableRowIDs|FlagTableConfig)
	if n.ReaderFeatureFlags != FlagStableRowIDs|FlagDeletionFiles || n.WriterFeatureFlags != n.ReaderFeatureFlags {
		t.Errorf("recomputed flags = %d/%d", n.ReaderFeatureFlags, n.WriterFeatureFlags)
	}
}

func TestHintAndTags(t *testing.T) {
	if v, err := DecodeHint(EncodeHint(42)); err != nil || v != 42 {
		t.Errorf("hint round trip = %d, %v", v, err)
	}
	ctx := t.Context()
	b, err := storage.Open(ctx, "file://"+lancedb.CorpusDir(t, "tagged"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	tags, err := LoadTags(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	got := TaggedVersions(tags)
	if len(tags) != 2 || len(got[1]) != 1 || got[1][0] != "v1" || len(got[2]) != 1 || got[2][0] != "v2" {
		t.Errorf("tags = %+v", tags)
	}
	if err := b.Put(ctx, TagKey("broken"), []byte("{")); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadTags(ctx, b); !errors.Is(err, ErrCorrupt) {
		t.Errorf("broken tag: %v", err)
	}
}

func memBucket(t *testing.T) storage.Bucket {
	t.Helper()
	b, err := storage.Open(t.Context(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}
