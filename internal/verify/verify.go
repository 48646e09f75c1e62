// Package verify checks every invariant of a real Lance dataset that its
// metadata alone can prove: the manifest chain, feature flags, fragments,
// the files manifests reference, indexes, transactions, tags, the MemWAL
// (shard manifests, flushed generations, WAL entries, compacted and
// catch-up positions) and the fragment-reuse index.
//
// Verify only reads. Undecodable metadata is a violation naming the object,
// never a reason to delete anything: the bytes may be a newer writer's.
// Each violation is a typed record so scripts can tell the checks apart.
package verify

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/RoaringBitmap/roaring/v2"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/format/arrowipc"
	"github.com/compactord/compactord/internal/format/deletion"
	"github.com/compactord/compactord/internal/format/file"
	"github.com/compactord/compactord/internal/index/content"
	"github.com/compactord/compactord/internal/inspect"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/progress"
	"github.com/compactord/compactord/internal/storage"
)

// The checks a violation can name.
const (
	CheckManifest      = "manifest"       // a listed manifest decodes and says its own version
	CheckChain         = "manifest_chain" // timestamps never decrease along the versions
	CheckFlags         = "feature_flags"  // every reader and writer flag is one lance 12 defines (a warning: a newer Lance's table is not damaged)
	CheckTransaction   = "transaction"    // the version's transaction exists, decodes and matches its name
	CheckFragments     = "fragments"      // ids unique and ≤ max_fragment_id, rows > 0, deleted ≤ physical
	CheckDataFile      = "data_file"      // referenced data files exist with their recorded size (and, deep, every page decodes)
	CheckDeletionFile  = "deletion_file"  // deletion files exist (and, deep, decode to num_deleted_rows)
	CheckIndex         = "index"          // index files exist, bitmaps ⊆ fragments ever live, segments agree (and, deep, their Lance files, .lance and .idx, decode)
	CheckTag           = "tag"            // tags decode and name retained versions
	CheckMemWal        = "mem_wal"        // MemWAL index: compacted ≤ flushed, catch-up ≤ compacted, maintained indexes exist
	CheckShardManifest = "shard_manifest" // shard manifests decode and say their own version and shard
	CheckSSTable       = "sstable"        // unmerged generations exist with their _versions (and, deep, their data files decode whole)
	CheckWAL           = "wal"            // WAL entries above replay_after are present without gaps (and, deep, decode)
	CheckFragReuse     = "frag_reuse"     // FRI groups agree with the fragments
	CheckIndexContent  = "index_content"  // (deep) btree and bitmap entries are exactly the covered live rows, values included
)

// Violation is one broken invariant.
type Violation struct {
	Check   string `json:"check"`
	Object  string `json:"object"`
	Message string `json:"message"`
}

func (v Violation) String() string { return v.Check + " " + v.Object + ": " + v.Message }

// Report is what Run found.
type Report struct {
	Versions   []uint64    `json:"versions"`
	Objects    int         `json:"objects"` // referenced files checked
	Rows       uint64      `json:"rows"`    // live rows of the newest version checked
	Violations []Violation `json:"violations"`
	// Warnings are oddities that break no invariant (a transaction file
	// missing where the manifest also carries the transaction inline, a
	// version removed by a concurrent cleanup while being checked).
	Warnings []Violation `json:"warnings"`
	// IndexContent is, with Deep, what the content check of the newest
	// version checked found in each of its indexes.
	IndexContent []content.Check `json:"index_content,omitempty"`
}

// OK reports whether every invariant held.
func (r *Report) OK() bool { return len(r.Violations) == 0 }

// Options selects what Run checks.
type Options struct {
	// Version checks only this version (0: every retained version).
	Version uint64
	// Deep also decodes every page of every data file and every Lance
	// file (.lance, .idx) of an index segment the checked versions
	// reference (one page in memory at a time, file.Check), every
	// deletion file, every WAL entry above its shard's replay position,
	// and every unmerged generation end to end (its newest manifest, and every data and deletion file of
	// it): the acknowledged data the base table does not hold yet, which
	// the shard's next flush or the next merge must read. With
	// IndexContent set, it also checks the content of the newest checked
	// version's indexes against its data; indexes whose content compactord
	// cannot read are named in a warning.
	Deep bool
	// IndexContent checks the content of a version's indexes against its
	// data (index.ContentChecker; verify does not import the index jobs).
	// Nil: deep verify does not check index content.
	IndexContent func(ctx context.Context, b storage.Bucket, f *meta.ManifestFile) ([]content.Check, error)
}

type checker struct {
	b      storage.Bucket
	opt    Options
	rep    *Report
	seen   map[Violation]bool
	files  map[string]int64 // every object under the referenced prefixes
	dirs   map[string]bool  // every directory prefix of those objects
	naming meta.Naming
	// checked dedupes per-object checks across versions.
	checked map[string]bool
	// missingIn holds, for each missing-object violation, every version
	// referencing the object, so an object all of whose versions a
	// concurrent cleanup removed can be excused at the end.
	missingIn  map[Violation][]uint64
	missingObj map[string]Violation
	// bytes is the listed size of the referenced files object checked.
	bytes int64
	// decode lists, with Deep, the data and index files to decode page by
	// page once every version is read (each once).
	decode []decodeFile
}

// Run checks the dataset. The error is for a dataset it could not look at
// (no manifest, a listing that failed); everything wrong with the dataset
// itself is in the report.
func Run(ctx context.Context, b storage.Bucket, opt Options) (*Report, error) {
	vs, naming, err := meta.ListVersions(ctx, b)
	if err != nil {
		return nil, err
	}
	c := &checker{
		b: b, opt: opt, naming: naming,
		rep:  &Report{Versions: []uint64{}, Violations: []Violation{}, Warnings: []Violation{}},
		seen: map[Violation]bool{}, files: map[string]int64{}, dirs: map[string]bool{},
		checked: map[string]bool{}, missingIn: map[Violation][]uint64{}, missingObj: map[string]Violation{},
	}
	latest := vs[len(vs)-1]
	if opt.Version != 0 {
		i := sort.Search(len(vs), func(i int) bool { return vs[i] >= opt.Version })
		if i == len(vs) || vs[i] != opt.Version {
			return nil, fmt.Errorf("version %d is not retained (versions %d to %d are listed)", opt.Version, vs[0], latest)
		}
		vs = []uint64{opt.Version}
	}
	// Files are listed after the versions: every file a listed version
	// references was written before its manifest, so it is in this listing
	// unless something deleted it.
	for _, p := range []string{meta.DataDir, meta.DeletionsDir, meta.IndicesDir, meta.TransactionsDir, meta.MemWalDir} {
		if err := b.List(ctx, p, func(a storage.Attrs) error {
			c.files[a.Key] = a.Size
			for k := strings.LastIndex(a.Key, "/"); k > 0; k = strings.LastIndex(a.Key[:k], "/") {
				if c.dirs[a.Key[:k+1]] {
					break
				}
				c.dirs[a.Key[:k+1]] = true
			}
			return nil
		}); err != nil {
			return nil, fmt.Errorf("list %s: %w", p, err)
		}
	}

	tags, tagErr := meta.LoadTags(ctx, b)
	if tagErr != nil {
		c.corrupt(CheckTag, meta.TagsDir, tagErr)
	}

	// Progress: the referenced objects checked (rows) and their listed
	// bytes, counted a version at a time; their total is known only once
	// every manifest is read.
	rep := progress.From(ctx)
	rep.Start("verify", progress.Units{})
	var reported progress.Units
	report := func() {
		rep.Add(int64(c.rep.Objects)-reported.Rows, c.bytes-reported.Bytes)
		reported = progress.Units{Rows: int64(c.rep.Objects), Bytes: c.bytes}
	}
	defer report()
	var prev *meta.ManifestFile
	var newest *meta.ManifestFile
	for _, v := range vs {
		report()
		f, ok, err := c.readVersion(ctx, v)
		if err != nil {
			return nil, err
		}
		c.rep.Versions = append(c.rep.Versions, v)
		if !ok {
			prev = nil
			continue
		}
		if prev != nil {
			c.chain(prev, f)
		}
		if err := c.version(ctx, f); err != nil {
			return nil, err
		}
		prev, newest = f, f
	}
	if len(c.decode) > 0 {
		report() // the objects' phase ends here
		if err := c.decodeFiles(ctx); err != nil {
			return nil, err
		}
	}
	if newest != nil {
		if d, err := inspect.FromManifest(ctx, b, newest); err == nil {
			c.rep.Rows = d.Rows
		}
		if opt.Deep && opt.IndexContent != nil {
			report() // the objects' phase ends here
			if err := c.indexContent(ctx, newest); err != nil {
				return nil, err
			}
		}
	}
	if tagErr == nil && opt.Version == 0 {
		retained := map[uint64]bool{}
		for _, v := range vs {
			retained[v] = true
		}
		for _, t := range tags {
			if !retained[t.Version] {
				c.add(CheckTag, meta.TagKey(t.Name), fmt.Sprintf("names version %d, which is not retained", t.Version))
			}
		}
	}
	if newest != nil && newest.Manifest.GetVersion() == latest {
		if err := c.memWalShards(ctx, newest); err != nil {
			return nil, err
		}
	}
	if err := c.excuseCleaned(ctx, latest); err != nil {
		return nil, err
	}
	return c.rep, nil
}

func (c *checker) add(check, object, msg string) {
	v := Violation{Check: check, Object: object, Message: msg}
	if !c.seen[v] {
		c.seen[v] = true
		c.rep.Violations = append(c.rep.Violations, v)
	}
}

func (c *checker) warn(check, object, msg string) {
	c.rep.Warnings = append(c.rep.Warnings, Violation{Check: check, Object: object, Message: msg})
}

// corrupt records an undecodable object, naming the key the error names
// when it is a meta.CorruptError.
func (c *checker) corrupt(check, object string, err error) {
	var ce *meta.CorruptError
	if errors.As(err, &ce) {
		c.add(check, ce.Key, fmt.Sprintf("does not decode: %v", ce.Err))
		return
	}
	c.add(check, object, err.Error())
}

// missing records a referenced object that is not there, remembered by
// version so a concurrent cleanup can excuse it.
func (c *checker) missing(v uint64, check, object, msg string) {
	if x, ok := c.missingObj[object]; ok {
		c.missingIn[x] = append(c.missingIn[x], v)
		return
	}
	c.add(check, object, msg)
	x := Violation{Check: check, Object: object, Message: msg}
	c.missingObj[object] = x
	c.missingIn[x] = append(c.missingIn[x], v)
}

// readVersion reads and decodes one manifest. ok is false when it is
// corrupt (a violation) or was removed since the listing (a warning).
func (c *checker) readVersion(ctx context.Context, v uint64) (*meta.ManifestFile, bool, error) {
	key := meta.ManifestKey(c.naming, v)
	data, err := c.b.Get(ctx, key)
	if err != nil {
		if storage.IsNotFound(err) {
			c.warn(CheckManifest, key, "removed while verify ran (a concurrent cleanup); not checked")
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("read %s: %w", key, err)
	}
	f, err := meta.DecodeManifestFile(data)
	if err != nil {
		c.add(CheckManifest, key, fmt.Sprintf("does not decode: %v", err))
		return nil, false, nil
	}
	if got := f.Manifest.GetVersion(); got != v {
		c.add(CheckManifest, key, fmt.Sprintf("is named for version %d but says version %d", v, got))
		return nil, false, nil
	}
	return f, true, nil
}

func (c *checker) chain(prev, f *meta.ManifestFile) {
	a, b := prev.Manifest.GetTimestamp(), f.Manifest.GetTimestamp()
	if a != nil && b != nil && b.AsTime().Before(a.AsTime()) {
		c.add(CheckChain, meta.ManifestKey(c.naming, f.Manifest.GetVersion()),
			fmt.Sprintf("timestamp %s is before version %d's %s", b.AsTime().UTC().Format("2006-01-02T15:04:05.000000Z"),
				prev.Manifest.GetVersion(), a.AsTime().UTC().Format("2006-01-02T15:04:05.000000Z")))
	}
	if pm, m := prev.Manifest, f.Manifest; pm.MaxFragmentId != nil && m.MaxFragmentId != nil && m.GetMaxFragmentId() < pm.GetMaxFragmentId() {
		c.add(CheckChain, meta.ManifestKey(c.naming, m.GetVersion()),
			fmt.Sprintf("max_fragment_id %d is below version %d's %d: fragment ids would be reused", m.GetMaxFragmentId(), pm.GetVersion(), pm.GetMaxFragmentId()))
	}
	c.compactedMonotone(prev, f)
}

// version runs the checks of one decoded version.
func (c *checker) version(ctx context.Context, f *meta.ManifestFile) error {
	m := f.Manifest
	v := m.GetVersion()
	mkey := meta.ManifestKey(c.naming, v)
	if x := m.GetReaderFeatureFlags() &^ meta.KnownFlags; x != 0 {
		c.warn(CheckFlags, mkey, fmt.Sprintf("reader flags carry bits lance 12 does not define: %s (a newer Lance wrote this version; compactord maintains nothing on the table, and what it reads of the data may be incomplete)", strings.Join(meta.FlagNames(x), ", ")))
	}
	if x := m.GetWriterFeatureFlags() &^ meta.KnownFlags; x != 0 {
		c.warn(CheckFlags, mkey, fmt.Sprintf("writer flags carry bits lance 12 does not define: %s (a newer Lance wrote this version; compactord reads it but maintains nothing on the table)", strings.Join(meta.FlagNames(x), ", ")))
	}
	if err := c.transaction(ctx, f, mkey); err != nil {
		return err
	}
	live := c.fragments(ctx, f, mkey)
	c.indices(ctx, f, mkey, live)
	c.memWalIndex(f, mkey)
	c.fragReuse(ctx, f, mkey, live)
	return nil
}

func (c *checker) transaction(ctx context.Context, f *meta.ManifestFile, mkey string) error {
	m := f.Manifest
	v := m.GetVersion()
	if t := f.Transaction; t != nil && v > 1 && t.GetReadVersion() >= v {
		c.add(CheckTransaction, mkey, fmt.Sprintf("inline transaction read version %d is not below the version", t.GetReadVersion()))
	}
	name := m.GetTransactionFile()
	if name == "" {
		if f.Transaction == nil && m.GetWriterFeatureFlags()&meta.FlagNoTxnFiles == 0 {
			c.warn(CheckTransaction, mkey, "records no transaction (file or inline); concurrent writers must treat it as conflicting with anything")
		}
		return nil
	}
	key := meta.TransactionKey(name)
	if _, ok := c.files[key]; !ok {
		if f.Transaction != nil {
			c.warn(CheckTransaction, key, fmt.Sprintf("named by version %d is missing; the manifest carries the transaction inline", v))
		} else {
			c.missing(v, CheckTransaction, key, fmt.Sprintf("named by version %d is missing and the manifest has no inline copy", v))
		}
		return nil
	}
	data, err := c.b.Get(ctx, key)
	if err != nil {
		if storage.IsNotFound(err) {
			c.missing(v, CheckTransaction, key, fmt.Sprintf("named by version %d is missing", v))
			return nil
		}
		return fmt.Errorf("read %s: %w", key, err)
	}
	c.rep.Objects++
	t, err := meta.DecodeTransaction(data)
	if err != nil {
		c.add(CheckTransaction, key, fmt.Sprintf("does not decode: %v", err))
		return nil
	}
	if t.GetOperation() == nil {
		if len(t.ProtoReflect().GetUnknown()) == 0 {
			c.add(CheckTransaction, key, "does not decode: it holds no operation (empty or not a transaction)")
			return nil
		}
		c.warn(CheckTransaction, key, "holds an operation lance 12 does not define (a newer writer's)")
	}
	rv, id, _ := strings.Cut(strings.TrimSuffix(name, ".txn"), "-")
	if want := fmt.Sprint(t.GetReadVersion()); rv != want || id != t.GetUuid() {
		c.add(CheckTransaction, key, fmt.Sprintf("holds transaction %s read at version %d, which its name contradicts", t.GetUuid(), t.GetReadVersion()))
		return nil
	}
	if v > 1 && t.GetReadVersion() >= v {
		c.add(CheckTransaction, key, fmt.Sprintf("read version %d is not below version %d, which it made", t.GetReadVersion(), v))
	}
	if f.Transaction != nil && f.Transaction.GetUuid() != t.GetUuid() {
		c.add(CheckTransaction, key, fmt.Sprintf("is transaction %s but version %d's inline transaction is %s", t.GetUuid(), v, f.Transaction.GetUuid()))
	}
	return nil
}

// fragments checks the version's fragments and the files they reference,
// and returns the live fragments by id.
func (c *checker) fragments(ctx context.Context, f *meta.ManifestFile, mkey string) map[uint64]*pb.DataFragment {
	m := f.Manifest
	v := m.GetVersion()
	live := make(map[uint64]*pb.DataFragment, len(m.GetFragments()))
	for _, fr := range m.GetFragments() {
		id := fr.GetId()
		// Named only for a violation: formatting it for every fragment of
		// every version was most of verify's time on long histories.
		obj := lazyName(func() string { return fmt.Sprintf("%s fragment %d", mkey, id) })
		if live[id] != nil {
			c.add(CheckFragments, obj(), "fragment id appears twice")
		}
		live[id] = fr
		switch {
		case m.MaxFragmentId == nil:
			c.add(CheckFragments, obj(), "the manifest records no max_fragment_id although it has fragments")
		case id > uint64(m.GetMaxFragmentId()):
			c.add(CheckFragments, obj(), fmt.Sprintf("id is above max_fragment_id %d", m.GetMaxFragmentId()))
		}
		if fr.GetPhysicalRows() == 0 {
			c.add(CheckFragments, obj(), "has no physical rows")
		}
		if len(fr.GetFiles()) == 0 {
			c.add(CheckFragments, obj(), "has no data files")
		}
		for _, df := range fr.GetFiles() {
			if df.BaseId != nil {
				continue // in another base path: not under this root
			}
			key := meta.DataKey(df.GetPath())
			if c.object(v, CheckDataFile, key, df.GetFileSizeBytes(), "of fragment", id) {
				c.toDecode(decodeFile{check: CheckDataFile, key: key, frag: id, rows: fr.GetPhysicalRows(), df: df})
			}
		}
		del := fr.GetDeletionFile()
		if del == nil {
			continue
		}
		if n := del.GetNumDeletedRows(); n > fr.GetPhysicalRows() {
			c.add(CheckFragments, obj(), fmt.Sprintf("%d deleted rows exceed its %d physical rows", n, fr.GetPhysicalRows()))
		}
		if del.BaseId != nil {
			continue
		}
		key := deletion.Key(id, del)
		if !c.object(v, CheckDeletionFile, key, 0, "of fragment", id) || !c.opt.Deep || c.checked["deep "+key] {
			continue
		}
		c.checked["deep "+key] = true
		data, err := c.b.Get(ctx, key)
		if err != nil {
			c.missing(v, CheckDeletionFile, key, fmt.Sprintf("cannot be read: %v", err))
			continue
		}
		bm, err := deletion.Decode(del, data, fr.GetPhysicalRows())
		if err != nil {
			c.add(CheckDeletionFile, key, fmt.Sprintf("does not decode: %v", err))
			continue
		}
		if n := del.GetNumDeletedRows(); n != 0 && bm.GetCardinality() != n {
			c.add(CheckDeletionFile, key, fmt.Sprintf("holds %d offsets, the manifest says %d", bm.GetCardinality(), n))
		}
	}
	return live
}

// noID: object's what names no fragment.
const noID = ^uint64(0)

// lazyName formats a violation's object on first use.
func lazyName(f func() string) func() string {
	var s string
	return func() string {
		if s == "" {
			s = f()
		}
		return s
	}
}

// object checks a referenced object exists (and, when size > 0, has that
// size), once per key. It reports whether the object is there. what (with
// the fragment id, unless noID) is formatted only for a violation.
func (c *checker) object(v uint64, check, key string, size uint64, what string, id uint64) bool {
	got, ok := c.files[key]
	if !c.checked[key] {
		c.checked[key] = true
		c.rep.Objects++
		c.bytes += got
	}
	if (!ok || (size > 0 && uint64(got) != size)) && id != noID {
		what = fmt.Sprintf("%s %d", what, id)
	}
	if !ok {
		c.missing(v, check, key, fmt.Sprintf("%s is missing (referenced by version %d)", what, v))
		return false
	}
	if size > 0 && uint64(got) != size {
		c.add(check, key, fmt.Sprintf("%s is %d bytes, the manifest records %d", what, got, size))
	}
	return true
}

func (c *checker) indices(ctx context.Context, f *meta.ManifestFile, mkey string, live map[uint64]*pb.DataFragment) {
	m := f.Manifest
	v := m.GetVersion()
	type shape struct {
		fields string
		kind   string
		uuid   string
	}
	first := map[string]shape{}
	uuids := map[string]bool{}
	for _, ix := range f.Indices {
		id := meta.UUIDString(ix.GetUuid())
		obj := fmt.Sprintf("index %s (%s)", ix.GetName(), id)
		if uuids[id] {
			c.add(CheckIndex, obj, fmt.Sprintf("uuid appears twice in version %d", v))
		}
		uuids[id] = true
		if ix.GetDatasetVersion() > v {
			c.add(CheckIndex, obj, fmt.Sprintf("dataset_version %d is above version %d, which holds it", ix.GetDatasetVersion(), v))
		}
		sh := shape{fields: fmt.Sprint(ix.GetFields()), kind: meta.IndexKind(ix), uuid: id}
		if p, ok := first[ix.GetName()]; !ok {
			first[ix.GetName()] = sh
		} else if p.fields != sh.fields || p.kind != sh.kind {
			c.add(CheckIndex, obj, fmt.Sprintf("segment is a %s index on fields %s, segment %s of the same index a %s index on %s", sh.kind, sh.fields, p.uuid, p.kind, p.fields))
		}
		bm, known, err := meta.FragmentBitmap(ix)
		if err != nil {
			c.add(CheckIndex, obj, fmt.Sprintf("fragment bitmap does not decode: %v", err))
		} else if known && !bm.IsEmpty() {
			if m.MaxFragmentId == nil || bm.Maximum() > m.GetMaxFragmentId() {
				c.add(CheckIndex, obj, fmt.Sprintf("fragment bitmap names fragment %d, which was never live (max_fragment_id %s)", bm.Maximum(), optU32(m.MaxFragmentId)))
			}
		}
		if meta.IsSystemIndex(ix) {
			continue
		}
		dir := meta.IndexDir(id)
		if len(ix.GetFiles()) == 0 {
			if !c.checked[dir] {
				c.checked[dir] = true
				c.rep.Objects++
			}
			if !c.dirs[dir] {
				c.missing(v, CheckIndex, dir, fmt.Sprintf("directory of index %s is missing or empty (referenced by version %d)", ix.GetName(), v))
			}
			// A segment that lists no files: its directory's Lance files.
			for key := range c.files {
				if strings.HasPrefix(key, dir) && lanceIndexFile(key) {
					c.toDecode(decodeFile{check: CheckIndex, key: key, frag: noID})
				}
			}
		}
		for _, file := range ix.GetFiles() {
			key := dir + file.GetPath()
			if c.object(v, CheckIndex, key, file.GetSizeBytes(), "file of index "+ix.GetName(), noID) && lanceIndexFile(key) {
				c.toDecode(decodeFile{check: CheckIndex, key: key, frag: noID})
			}
		}
	}
}

// lanceIndexFile reports whether an index segment's file is a Lance file
// deep verify decodes: a scalar or full-text segment's *.lance, and a
// vector segment's index.idx and auxiliary.idx (Lance 2.x files too). A
// legacy vector index.idx (a protobuf before a 16-byte footer) reads as
// a file version compactord does not decode: a warning, not a violation.
func lanceIndexFile(key string) bool {
	return strings.HasSuffix(key, ".lance") || strings.HasSuffix(key, ".idx")
}

// indexContent checks the content of the indexes of f against its data
// (deep only; one version: every segment is read whole and every covered
// fragment's indexed column decoded).
func (c *checker) indexContent(ctx context.Context, f *meta.ManifestFile) error {
	mkey := meta.ManifestKey(c.naming, f.Manifest.GetVersion())
	checks, err := c.opt.IndexContent(ctx, c.b, f)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		c.add(CheckIndexContent, mkey, fmt.Sprintf("index content not checked: %v", err))
		return nil
	}
	c.rep.IndexContent = checks
	for _, ck := range checks {
		obj := fmt.Sprintf("%s index %s", mkey, ck.Name)
		if !ck.Checked {
			c.warn(CheckIndexContent, obj, fmt.Sprintf("content not checked: %s", ck.Reason))
			continue
		}
		for _, p := range ck.Problems {
			c.add(CheckIndexContent, obj, p+"; rebuild it (compactord index rebuild --name "+ck.Name+")")
		}
	}
	return nil
}

func optU32(p *uint32) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}

// memWalIndex checks the MemWAL index of one version on its own: catch-up
// never ahead of the merged generation, maintained indexes present.
func (c *checker) memWalIndex(f *meta.ManifestFile, mkey string) {
	ix := memwal.Index(f.Indices)
	if ix == nil {
		return
	}
	obj := fmt.Sprintf("%s index %s (%s)", mkey, ix.GetName(), meta.UUIDString(ix.GetUuid()))
	d, err := memwal.Details(ix)
	if err != nil {
		c.add(CheckMemWal, obj, fmt.Sprintf("details do not decode: %v", err))
		return
	}
	compacted := memwal.Compacted(d)
	for idx, shards := range memwal.Catchup(d) {
		for shard, g := range shards {
			if g > compacted[shard] {
				c.add(CheckMemWal, obj, fmt.Sprintf("index %s is caught up to generation %d of shard %s, above its merged generation %d", idx, g, shard, compacted[shard]))
			}
		}
	}
	for _, name := range d.GetMaintainedIndexes() {
		if len(meta.FindIndex(f.Indices, name)) == 0 {
			c.add(CheckMemWal, obj, fmt.Sprintf("maintained index %s does not exist in version %d", name, f.Manifest.GetVersion()))
		}
	}
}

// compactedMonotone: a shard's merged generation never goes back; a
// generation merged twice would apply its rows twice.
func (c *checker) compactedMonotone(prev, f *meta.ManifestFile) {
	pi, ix := memwal.Index(prev.Indices), memwal.Index(f.Indices)
	if pi == nil || ix == nil {
		return
	}
	pd, err1 := memwal.Details(pi)
	d, err2 := memwal.Details(ix)
	if err1 != nil || err2 != nil {
		return
	}
	now := memwal.Compacted(d)
	for shard, g := range memwal.Compacted(pd) {
		if now[shard] < g {
			c.add(CheckMemWal, meta.ManifestKey(c.naming, f.Manifest.GetVersion()),
				fmt.Sprintf("shard %s's merged generation went back from %d (version %d) to %d", shard, g, prev.Manifest.GetVersion(), now[shard]))
		}
	}
}

// memWalShards checks the shards against the newest version's MemWAL index:
// shard manifests decode, merged ≤ flushed, unmerged generations present,
// WAL entries above the replay position present without gaps.
func (c *checker) memWalShards(ctx context.Context, f *meta.ManifestFile) error {
	ids, err := memwal.ListShards(ctx, c.b)
	if err != nil {
		return err
	}
	compacted := map[string]uint64{}
	catchup := map[string]map[string]uint64{}
	if ix := memwal.Index(f.Indices); ix != nil {
		if d, err := memwal.Details(ix); err == nil {
			compacted = memwal.Compacted(d)
			catchup = memwal.Catchup(d)
		}
	}
	have := map[string]bool{}
	for _, id := range ids {
		have[id] = true
		if err := c.shard(ctx, id, compacted[id]); err != nil {
			return err
		}
	}
	for shard, g := range compacted {
		if !have[shard] && g > 0 {
			c.add(CheckMemWal, memwal.ShardDir(shard), fmt.Sprintf("generation %d is recorded as merged but the shard has no directory", g))
		}
	}
	for idx, shards := range catchup {
		for shard := range shards {
			if !have[shard] {
				c.add(CheckMemWal, memwal.ShardDir(shard), fmt.Sprintf("index %s records catch-up for a shard with no directory", idx))
			}
		}
	}
	return nil
}

func (c *checker) shard(ctx context.Context, id string, compacted uint64) error {
	dir := memwal.ShardManifestDir(id)
	var versions []uint64
	for key := range c.files {
		name, ok := strings.CutPrefix(key, dir)
		if !ok {
			continue
		}
		if bits, ok := strings.CutSuffix(name, ".binpb"); ok {
			if v, ok := memwal.ParseBitName(bits); ok {
				versions = append(versions, v)
				continue
			}
			c.add(CheckShardManifest, key, "is not named by a 64-digit bit-reversed version")
		}
	}
	sort.Slice(versions, func(i, j int) bool { return versions[i] < versions[j] })
	var newest *pb.ShardManifest
	for _, v := range versions {
		key := memwal.ShardManifestKey(id, v)
		data, err := c.b.Get(ctx, key)
		if err != nil {
			if storage.IsNotFound(err) {
				continue // replaced or trimmed since the listing
			}
			return fmt.Errorf("read %s: %w", key, err)
		}
		c.rep.Objects++
		m, err := memwal.DecodeShardManifest(data)
		switch {
		case err != nil:
			c.add(CheckShardManifest, key, fmt.Sprintf("does not decode: %v", err))
			continue
		case m.GetVersion() != v:
			c.add(CheckShardManifest, key, fmt.Sprintf("is named for version %d but says version %d", v, m.GetVersion()))
			continue
		case m.GetShardId() != nil && meta.UUIDString(m.GetShardId()) != id:
			c.add(CheckShardManifest, key, fmt.Sprintf("says it belongs to shard %s", meta.UUIDString(m.GetShardId())))
			continue
		}
		newest = m
	}
	if newest == nil {
		if compacted > 0 {
			c.add(CheckMemWal, memwal.ShardDir(id), fmt.Sprintf("generation %d is recorded as merged but the shard has no readable manifest", compacted))
		}
		return nil
	}
	obj := memwal.ShardManifestKey(id, newest.GetVersion())
	flushed := uint64(0)
	if g := newest.GetCurrentGeneration(); g > 0 {
		flushed = g - 1
	}
	if compacted > flushed {
		c.add(CheckMemWal, obj, fmt.Sprintf("generation %d is recorded as merged, but the shard has flushed only up to %d (current_generation %d)", compacted, flushed, newest.GetCurrentGeneration()))
	}
	gens := map[uint64]bool{}
	for _, s := range newest.GetSstables() {
		g := s.GetGeneration()
		if gens[g] {
			c.add(CheckShardManifest, obj, fmt.Sprintf("lists generation %d twice", g))
		}
		gens[g] = true
		if g == 0 || g > flushed {
			c.add(CheckShardManifest, obj, fmt.Sprintf("lists generation %d, outside the flushed generations 1..%d", g, flushed))
		}
		if g <= compacted {
			continue // merged: trim may have removed it
		}
		gdir := memwal.GenerationDir(id, s.GetPath())
		if !c.checked[gdir] {
			c.checked[gdir] = true
			c.rep.Objects++
		}
		hasManifest := false
		for key := range c.files {
			if rest, ok := strings.CutPrefix(key, gdir+meta.VersionsDir); ok {
				if _, _, ok := meta.ParseManifestKey(meta.VersionsDir + rest); ok {
					hasManifest = true
					break
				}
			}
		}
		if !hasManifest {
			c.add(CheckSSTable, gdir, fmt.Sprintf("generation %d is not merged (merged up to %d) but has no %s manifest", g, compacted, meta.VersionsDir))
			continue
		}
		if c.opt.Deep {
			if err := c.sstableManifest(ctx, gdir); err != nil {
				return err
			}
		}
	}
	pos, err := memwal.ListWAL(ctx, c.b, id)
	if err != nil {
		return err
	}
	replay := newest.GetReplayAfterWalEntryPosition()
	next := replay + 1
	for _, p := range pos {
		if p <= replay {
			continue
		}
		if p != next {
			c.add(CheckWAL, memwal.WALKey(id, next), fmt.Sprintf("is missing: WAL entries above the replay position %d must be contiguous, but %d follows %d", replay, p, next-1))
			break
		}
		next++
		if c.opt.Deep {
			if err := c.walEntry(ctx, memwal.WALKey(id, p)); err != nil {
				return err
			}
		}
	}
	return nil
}

// walEntry decodes an unflushed WAL entry (deep only) as a replay reads
// it: an Arrow IPC stream whose batches hold their rows and a _tombstone
// column, or a fence sentinel.
func (c *checker) walEntry(ctx context.Context, key string) error {
	data, err := c.b.Get(ctx, key)
	if storage.IsNotFound(err) {
		return nil // the listing already judged its presence
	}
	if err != nil {
		return err
	}
	c.rep.Objects++
	st, err := arrowipc.ReadStream(data, nil)
	if err != nil {
		c.add(CheckWAL, key, fmt.Sprintf("does not decode: %v", err))
		return nil
	}
	if v, _ := st.Schema.Metadata.Get("fence_sentinel"); v == "true" {
		return nil
	}
	for i, b := range st.Batches {
		for k, col := range b.Columns {
			if col == nil || col.Len != b.Len {
				c.add(CheckWAL, key, fmt.Sprintf("batch %d: column %d does not hold the batch's %d rows", i, k, b.Len))
				return nil
			}
		}
		if b.Column(st.Schema, "_tombstone") == nil {
			c.add(CheckWAL, key, fmt.Sprintf("batch %d has no _tombstone column", i))
			return nil
		}
	}
	return nil
}

// sstableManifest decodes a generation's newest manifest (deep only).
func (c *checker) sstableManifest(ctx context.Context, gdir string) error {
	sub := storage.Sub(c.b, gdir)
	f, _, err := meta.ReadLatest(ctx, sub)
	if err != nil {
		var ce *meta.CorruptError
		if errors.As(err, &ce) {
			c.add(CheckSSTable, gdir+ce.Key, fmt.Sprintf("does not decode: %v", ce.Err))
			return nil
		}
		if storage.IsNotFound(err) || errors.Is(err, meta.ErrNoTable) {
			c.add(CheckSSTable, gdir, err.Error())
			return nil
		}
		return err
	}
	if len(f.Manifest.GetFragments()) == 0 {
		c.add(CheckSSTable, gdir, "the generation's manifest has no fragments")
	}
	// Every page of every data file decodes (one page in memory at a
	// time) and every deletion file decodes: the merge reads them all.
	for _, fr := range f.Manifest.GetFragments() {
		for _, df := range fr.GetFiles() {
			key := meta.DataKey(df.GetPath())
			a, err := sub.Attributes(ctx, key)
			if storage.IsNotFound(err) {
				c.add(CheckSSTable, gdir+key, "is missing")
				continue
			}
			if err != nil {
				return err
			}
			c.rep.Objects++
			r := storage.NewReaderAt(ctx, sub, key, a.Size)
			lf, err := file.Open(r, a.Size)
			if err == nil {
				err = lf.Check(nil)
			}
			_ = r.(*storage.ReaderAt).Close()
			switch {
			case err == nil:
				if fr.GetPhysicalRows() != 0 && lf.NumRows() != fr.GetPhysicalRows() {
					c.add(CheckSSTable, gdir+key, fmt.Sprintf("does not decode: %d rows, the fragment %d", lf.NumRows(), fr.GetPhysicalRows()))
				}
			case ctx.Err() != nil:
				return ctx.Err()
			case storage.IsNotFound(err):
				c.add(CheckSSTable, gdir+key, "is missing")
			case errors.Is(err, file.ErrFormat):
				c.add(CheckSSTable, gdir+key, fmt.Sprintf("does not decode: %v", err))
			default:
				return err
			}
		}
		if dfl := fr.GetDeletionFile(); dfl != nil {
			if _, err := deletion.Read(ctx, sub, fr.GetId(), dfl, fr.GetPhysicalRows()); err != nil {
				if storage.IsNotFound(err) {
					c.add(CheckSSTable, gdir+deletion.Key(fr.GetId(), dfl), "is missing")
				} else {
					c.add(CheckSSTable, gdir+deletion.Key(fr.GetId(), dfl), fmt.Sprintf("does not decode: %v", err))
				}
			}
		}
	}
	return nil
}

// fragReuse checks the FRI of one version against its fragments.
func (c *checker) fragReuse(ctx context.Context, f *meta.ManifestFile, mkey string, live map[uint64]*pb.DataFragment) {
	segs := meta.FindIndex(f.Indices, meta.FragReuseIndexName)
	if len(segs) == 0 {
		return
	}
	m := f.Manifest
	if len(segs) > 1 {
		c.add(CheckFragReuse, mkey, fmt.Sprintf("has %d fragment-reuse index segments; Lance keeps one", len(segs)))
	}
	for _, ix := range segs {
		obj := fmt.Sprintf("%s index %s (%s)", mkey, ix.GetName(), meta.UUIDString(ix.GetUuid()))
		content, err := meta.FragReuseContent(ctx, c.b, ix)
		if err != nil {
			if storage.IsNotFound(err) {
				c.missing(m.GetVersion(), CheckFragReuse, obj, fmt.Sprintf("external details are missing: %v", err))
			} else {
				c.corrupt(CheckFragReuse, obj, err)
			}
			continue
		}
		newIDs := roaring.New()
		for _, ver := range content.GetVersions() {
			vobj := fmt.Sprintf("%s version %d", obj, ver.GetDatasetVersion())
			if ver.GetDatasetVersion() > m.GetVersion() {
				c.add(CheckFragReuse, vobj, fmt.Sprintf("is above version %d, which holds it", m.GetVersion()))
			}
			for gi, g := range ver.GetGroups() {
				gobj := fmt.Sprintf("%s group %d", vobj, gi)
				c.friGroup(g, gobj, m, live, newIDs)
			}
		}
	}
}

func (c *checker) friGroup(g *pb.FragmentReuseIndexDetails_Group, obj string, m *pb.Manifest, live map[uint64]*pb.DataFragment, newIDs *roaring.Bitmap) {
	sane := func(d *pb.FragmentReuseIndexDetails_FragmentDigest, role string) bool {
		if d.GetPhysicalRows() == 0 {
			c.add(CheckFragReuse, obj, fmt.Sprintf("%s fragment %d has a digest of 0 physical rows", role, d.GetId()))
			return false
		}
		if d.GetNumDeletedRows() > d.GetPhysicalRows() {
			c.add(CheckFragReuse, obj, fmt.Sprintf("%s fragment %d's digest has %d deleted of %d rows", role, d.GetId(), d.GetNumDeletedRows(), d.GetPhysicalRows()))
			return false
		}
		return true
	}
	var oldLive, newRows uint64
	ok := true
	for _, d := range g.GetOldFragments() {
		ok = sane(d, "old") && ok
		oldLive += d.GetPhysicalRows() - min(d.GetNumDeletedRows(), d.GetPhysicalRows())
		if live[d.GetId()] != nil {
			c.add(CheckFragReuse, obj, fmt.Sprintf("old fragment %d is still live", d.GetId()))
		}
	}
	for _, d := range g.GetNewFragments() {
		ok = sane(d, "new") && ok
		newRows += d.GetPhysicalRows()
		if m.MaxFragmentId == nil || d.GetId() > uint64(m.GetMaxFragmentId()) {
			c.add(CheckFragReuse, obj, fmt.Sprintf("new fragment %d was never live (max_fragment_id %s)", d.GetId(), optU32(m.MaxFragmentId)))
		}
		if fr := live[d.GetId()]; fr != nil && fr.GetPhysicalRows() != d.GetPhysicalRows() {
			c.add(CheckFragReuse, obj, fmt.Sprintf("new fragment %d has %d physical rows, its digest %d", d.GetId(), fr.GetPhysicalRows(), d.GetPhysicalRows()))
		}
		if d.GetId() <= 1<<32-1 {
			if newIDs.Contains(uint32(d.GetId())) {
				c.add(CheckFragReuse, obj, fmt.Sprintf("new fragment %d is the output of two groups", d.GetId()))
			}
			newIDs.Add(uint32(d.GetId()))
		}
	}
	if !ok {
		return
	}
	// A rewrite copies exactly the surviving rows, and the map sends the
	// surviving old addresses, in order, to the new offsets.
	if oldLive != newRows {
		c.add(CheckFragReuse, obj, fmt.Sprintf("old fragments hold %d live rows, the new fragments %d", oldLive, newRows))
	}
	n, err := inspect.ChangedRows(g)
	if err != nil {
		c.add(CheckFragReuse, obj, err.Error())
	} else if len(g.GetChangedRowAddrs()) > 0 && n != oldLive {
		c.add(CheckFragReuse, obj, fmt.Sprintf("maps %d row addresses, but the old fragments hold %d live rows", n, oldLive))
	}
}

// excuseCleaned turns the missing-object violations whose every
// referencing version a concurrent cleanup removed while verify ran into
// warnings: the objects went with their versions. The latest version is
// never excused (cleanup never removes it).
func (c *checker) excuseCleaned(ctx context.Context, latest uint64) error {
	gone := map[uint64]bool{}
	isGone := func(v uint64) (bool, error) {
		if g, ok := gone[v]; ok {
			return g, nil
		}
		if v == latest {
			gone[v] = false
			return false, nil
		}
		_, err := c.b.Attributes(ctx, meta.ManifestKey(c.naming, v))
		if err != nil && !storage.IsNotFound(err) {
			return false, fmt.Errorf("recheck version %d: %w", v, err)
		}
		gone[v] = err != nil
		return gone[v], nil
	}
	drop := map[Violation]bool{}
	for x, vs := range c.missingIn {
		all := true
		for _, v := range vs {
			g, err := isGone(v)
			if err != nil {
				return err
			}
			all = all && g
		}
		if all {
			drop[x] = true
		}
	}
	if len(drop) == 0 {
		return nil
	}
	kept := c.rep.Violations[:0]
	for _, x := range c.rep.Violations {
		if drop[x] {
			c.warn(x.Check, x.Object, x.Message+"; every version referencing it was removed while verify ran (a concurrent cleanup)")
			continue
		}
		kept = append(kept, x)
	}
	c.rep.Violations = kept
	return nil
}
