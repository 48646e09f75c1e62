// Package trim retires the MemWAL files of a Lance dataset (_mem_wal/) that
// nothing needs any more: flushed generations whose rows the base table
// holds, WAL entries a flush covers, and old shard manifests.
//
// A generation N of shard s (a "{rand8}_gen_{N}/" directory named in the
// shard manifest's sstables) is deleted only when all hold:
//   - N <= compacted_sstables[s] in the MemWAL index of the latest version
//     (its rows are merged into the base table), else "not_merged";
//   - every maintained index that exists in the latest version has
//     index_catchup[index][s] >= N; an absent entry is not caught up
//     ("index_lag");
//   - the same two hold in every pinned version: tagged versions
//     ("tagged"), versions that stopped being the latest less than the
//     reader grace ago, and the version named by a live compactord
//     in-flight marker ("pinned_version"). A pinned version without a
//     MemWAL index reads no generation.
//
// A generation that is not merged is never touched. A generation directory
// the shard manifest does not name ("unreferenced_dir"), a shard directory
// without a shard manifest, and a named generation whose directory is gone
// are reported and never deleted: trim does not delete on a guess.
//
// WAL entries: an entry above the newest shard manifest's
// replay_after_wal_entry_position is kept ("above_replay_cursor"). Of the
// covered entries the newest is kept ("newest_covered": deleting every
// covered entry would free the tail a writer finds when it claims the
// shard), and so is every fence sentinel ("fence_sentinel"): a stale writer
// of epoch e writes its next entry exactly where the claimer of epoch e+1
// put its sentinel, so deleting any sentinel, not only the newest epoch's,
// would let that writer's put succeed into a position no replay reads. A
// small entry that cannot be decoded is kept ("unreadable").
//
// Shard manifests: the newest KeepShardManifests versions are kept, and
// every version at or above the one version_hint.json names; without a
// readable hint none is deleted.
//
// Trim never writes a shard manifest. A LanceDB writer owns that chain: it
// publishes version v+1 with put-if-absent, so a manifest trim published at
// the writer's next version would collide with it and fence the writer
// out (or, written with a stale epoch, be adopted as the writer's own
// state). The retired generations stay listed in sstables; readers skip
// every generation at or below compacted_sstables without opening it.
package trim

import (
	"fmt"
	"sort"
)

// Generation reasons.
const (
	ReasonNotMerged       = "not_merged"
	ReasonIndexLag        = "index_lag"
	ReasonPinnedVersion   = "pinned_version"
	ReasonTagged          = "tagged"
	ReasonUnreferencedDir = "unreferenced_dir"
	ReasonMissingDir      = "missing_dir"
	ReasonNoShardManifest = "no_shard_manifest"
	ReasonRetire          = "merged_and_caught_up"
)

// WAL and shard manifest reasons.
const (
	ReasonAboveCursor   = "above_replay_cursor"
	ReasonNewestCovered = "newest_covered"
	ReasonFence         = "fence_sentinel"
	ReasonUnreadable    = "unreadable"
	ReasonCovered       = "covered_by_flush"
	ReasonNewestShard   = "newest_shard_manifests"
	ReasonAtOrAboveHint = "at_or_above_hint"
	ReasonNoHint        = "no_readable_hint"
	ReasonOldShard      = "old_shard_manifest"
)

// View is the MemWAL state one table version records.
type View struct {
	Version uint64 `json:"version"`
	// HasMemWal: the version has a __lance_mem_wal index.
	HasMemWal bool `json:"has_mem_wal"`
	// Compacted: shard → highest merged generation.
	Compacted map[string]uint64 `json:"compacted"`
	// Catchup: index → shard → caught-up generation.
	Catchup map[string]map[string]uint64 `json:"index_catchup"`
	// Maintained are the maintained indexes that exist in this version.
	Maintained []string `json:"maintained_indexes"`
}

// Pin is a version that may still be read with its LSM view.
type Pin struct {
	View
	Tagged bool   `json:"tagged"`
	Why    string `json:"why"`
}

// Dir is a generation directory found under a shard.
type Dir struct {
	Name  string   `json:"name"`
	Bytes int64    `json:"bytes"`
	Keys  []string `json:"-"`
}

// WALEntry is one WAL object.
type WALEntry struct {
	Position uint64 `json:"position"`
	Key      string `json:"key"`
	Bytes    int64  `json:"bytes"`
	// Sentinel: decoded and found to be a fence sentinel. Unreadable: small
	// enough to be one, but not decodable.
	Sentinel   bool `json:"sentinel"`
	Unreadable bool `json:"unreadable"`
}

// ShardGen is one sstables entry of the newest shard manifest.
type ShardGen struct {
	Generation uint64
	Path       string
}

// Shard is the state of one _mem_wal/{shard}/ directory.
type Shard struct {
	ID string
	// HasManifest: a shard manifest was found (then the fields below come
	// from the newest one).
	HasManifest      bool
	ManifestVersion  uint64
	ReplayAfter      uint64
	WriterEpoch      uint64
	Generations      []ShardGen
	ManifestVersions []uint64
	ManifestKeys     map[uint64]string
	// HintVersion is version_hint.json's version; 0 if unreadable.
	HintVersion uint64
	Dirs        []Dir
	WAL         []WALEntry
}

// State is everything Decide needs.
type State struct {
	Latest View
	Pins   []Pin
	Shards []Shard
}

// GenDecision is the verdict on one generation (or unnamed directory).
type GenDecision struct {
	Shard      string `json:"shard"`
	Generation uint64 `json:"generation"`
	Dir        string `json:"dir"`
	Bytes      int64  `json:"bytes"`
	Delete     bool   `json:"delete"`
	Reason     string `json:"reason"`
	Detail     string `json:"detail,omitempty"`
	Index      string `json:"index,omitempty"`
	Version    uint64 `json:"version,omitempty"`
	keys       []string
}

// WALDecision is the verdict on one WAL entry.
type WALDecision struct {
	Shard    string `json:"shard"`
	Position uint64 `json:"position"`
	Key      string `json:"key"`
	Bytes    int64  `json:"bytes"`
	Delete   bool   `json:"delete"`
	Reason   string `json:"reason"`
}

// ManifestDecision is the verdict on one shard manifest version.
type ManifestDecision struct {
	Shard   string `json:"shard"`
	Version uint64 `json:"version"`
	Key     string `json:"key"`
	Delete  bool   `json:"delete"`
	Reason  string `json:"reason"`
}

// Plan is a trim's plan.
type Plan struct {
	Latest         View               `json:"latest"`
	Pins           []Pin              `json:"pinned_versions"`
	Generations    []GenDecision      `json:"generations"`
	WAL            []WALDecision      `json:"wal_entries"`
	ShardManifests []ManifestDecision `json:"shard_manifests"`
	// Problems are what trim found and refused to act on.
	Problems []string `json:"problems"`
	// Retained generation bytes by reason; bytes the plan deletes.
	Retained map[string]int64 `json:"retained_bytes"`
	Bytes    int64            `json:"bytes_trimmed"`
}

// Decide is the pure rule (see the package doc).
func Decide(st State, keepShardManifests int) Plan {
	p := Plan{Latest: st.Latest, Pins: st.Pins, Generations: []GenDecision{}, WAL: []WALDecision{},
		ShardManifests: []ManifestDecision{}, Problems: []string{}, Retained: map[string]int64{}}
	if p.Pins == nil {
		p.Pins = []Pin{}
	}
	for _, r := range []string{ReasonNotMerged, ReasonIndexLag, ReasonPinnedVersion, ReasonTagged, ReasonUnreferencedDir, ReasonNoShardManifest} {
		p.Retained[r] = 0
	}
	shards := append([]Shard(nil), st.Shards...)
	sort.Slice(shards, func(i, j int) bool { return shards[i].ID < shards[j].ID })
	for _, sh := range shards {
		decideShard(&p, st, sh, keepShardManifests)
	}
	for _, g := range p.Generations {
		if g.Delete {
			p.Bytes += g.Bytes
		} else {
			p.Retained[g.Reason] += g.Bytes
		}
	}
	for _, w := range p.WAL {
		if w.Delete {
			p.Bytes += w.Bytes
		}
	}
	return p
}

func decideShard(p *Plan, st State, sh Shard, keep int) {
	dirs := map[string]Dir{}
	for _, d := range sh.Dirs {
		dirs[d.Name] = d
	}
	if !sh.HasManifest {
		p.Problems = append(p.Problems, fmt.Sprintf("shard %s has no shard manifest: nothing in it is touched", sh.ID))
		for _, d := range sh.Dirs {
			g, _ := parseGen(d.Name)
			p.Generations = append(p.Generations, GenDecision{Shard: sh.ID, Generation: g, Dir: d.Name, Bytes: d.Bytes, Reason: ReasonNoShardManifest})
		}
		for _, w := range sh.WAL {
			p.WAL = append(p.WAL, WALDecision{Shard: sh.ID, Position: w.Position, Key: w.Key, Bytes: w.Bytes, Reason: ReasonNoShardManifest})
		}
		return
	}
	named := map[string]bool{}
	gens := append([]ShardGen(nil), sh.Generations...)
	sort.Slice(gens, func(i, j int) bool { return gens[i].Generation < gens[j].Generation })
	for _, g := range gens {
		name := trimSlash(g.Path)
		named[name] = true
		d := GenDecision{Shard: sh.ID, Generation: g.Generation, Dir: name}
		dir, exists := dirs[name]
		d.Bytes, d.keys = dir.Bytes, dir.Keys
		d.Reason, d.Detail, d.Index, d.Version = judgeGen(st, sh.ID, g.Generation)
		if d.Reason == ReasonRetire {
			if !exists {
				d.Reason, d.Detail = ReasonMissingDir, "merged and caught up, but its directory is gone already"
			} else if pn, ok := parseGen(name); !ok || pn != g.Generation {
				d.Reason, d.Detail = ReasonUnreferencedDir, fmt.Sprintf("the manifest names generation %d at %q, whose name says otherwise", g.Generation, name)
				p.Problems = append(p.Problems, fmt.Sprintf("shard %s: %s", sh.ID, d.Detail))
			} else {
				d.Delete = true
			}
		} else if !exists {
			p.Problems = append(p.Problems, fmt.Sprintf("shard %s: generation %d (%s) is named by the shard manifest but its directory is missing", sh.ID, g.Generation, name))
		}
		p.Generations = append(p.Generations, d)
	}
	for _, dir := range sh.Dirs {
		if named[dir.Name] {
			continue
		}
		g, _ := parseGen(dir.Name)
		p.Generations = append(p.Generations, GenDecision{Shard: sh.ID, Generation: g, Dir: dir.Name, Bytes: dir.Bytes,
			Reason: ReasonUnreferencedDir, Detail: "not named by the newest shard manifest (a flush in progress, or left by a crash)"})
		p.Problems = append(p.Problems, fmt.Sprintf("shard %s: directory %s is not named by shard manifest %d; kept", sh.ID, dir.Name, sh.ManifestVersion))
	}
	// WAL entries.
	var newestCovered uint64
	for _, w := range sh.WAL {
		if w.Position <= sh.ReplayAfter && w.Position > newestCovered {
			newestCovered = w.Position
		}
	}
	wal := append([]WALEntry(nil), sh.WAL...)
	sort.Slice(wal, func(i, j int) bool { return wal[i].Position < wal[j].Position })
	for _, w := range wal {
		d := WALDecision{Shard: sh.ID, Position: w.Position, Key: w.Key, Bytes: w.Bytes}
		switch {
		case w.Position > sh.ReplayAfter:
			d.Reason = ReasonAboveCursor
		case w.Position == newestCovered:
			d.Reason = ReasonNewestCovered
		case w.Sentinel:
			d.Reason = ReasonFence
		case w.Unreadable:
			d.Reason = ReasonUnreadable
		default:
			d.Reason, d.Delete = ReasonCovered, true
		}
		p.WAL = append(p.WAL, d)
	}
	// Shard manifests.
	vs := append([]uint64(nil), sh.ManifestVersions...)
	sort.Slice(vs, func(i, j int) bool { return vs[i] > vs[j] })
	for i, v := range vs {
		d := ManifestDecision{Shard: sh.ID, Version: v, Key: sh.ManifestKeys[v]}
		switch {
		case i < keep:
			d.Reason = ReasonNewestShard
		case sh.HintVersion == 0:
			d.Reason = ReasonNoHint
		case v >= sh.HintVersion:
			d.Reason = ReasonAtOrAboveHint
		default:
			d.Reason, d.Delete = ReasonOldShard, true
		}
		p.ShardManifests = append(p.ShardManifests, d)
	}
}

// judgeGen applies the merge, catch-up and pin rules to generation g of
// shard s. It returns ReasonRetire when all pass.
func judgeGen(st State, s string, g uint64) (reason, detail, index string, version uint64) {
	if r, d, ix := judgeView(st.Latest, s, g); r != "" {
		return r, d + fmt.Sprintf(" (latest version %d)", st.Latest.Version), ix, st.Latest.Version
	}
	pins := append([]Pin(nil), st.Pins...)
	sort.Slice(pins, func(i, j int) bool { return pins[i].Version < pins[j].Version })
	for _, pn := range pins {
		if !pn.HasMemWal {
			continue
		}
		if r, d, ix := judgeView(pn.View, s, g); r != "" {
			reason := ReasonPinnedVersion
			if pn.Tagged {
				reason = ReasonTagged
			}
			return reason, fmt.Sprintf("version %d (%s) may still be read: %s", pn.Version, pn.Why, d), ix, pn.Version
		}
	}
	return ReasonRetire, "", "", 0
}

func judgeView(v View, s string, g uint64) (reason, detail, index string) {
	if !v.HasMemWal {
		return ReasonNotMerged, "the version has no MemWAL index", ""
	}
	c, ok := v.Compacted[s]
	if !ok || g > c {
		return ReasonNotMerged, fmt.Sprintf("generation %d > compacted %d", g, c), ""
	}
	names := append([]string(nil), v.Maintained...)
	sort.Strings(names)
	for _, n := range names {
		pos, known := v.Catchup[n][s]
		if !known {
			return ReasonIndexLag, fmt.Sprintf("index %q has no catch-up entry for the shard (absent means not caught up)", n), n
		}
		if g > pos {
			return ReasonIndexLag, fmt.Sprintf("index %q caught up to %d < generation %d", n, pos, g), n
		}
	}
	return "", "", ""
}

func trimSlash(s string) string {
	for len(s) > 0 && s[0] == '/' {
		s = s[1:]
	}
	for len(s) > 0 && s[len(s)-1] == '/' {
		s = s[:len(s)-1]
	}
	return s
}
