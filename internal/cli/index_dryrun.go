package cli

import (
	"context"
	"fmt"
	"slices"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/fri"
	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/table"
)

// The dry runs of `index catchup` and `index remap`: the same planning on
// the latest version as the commands do, printed, with nothing written.

// catchupPlanLine is one index a catch-up would extend or rebuild.
type catchupPlanLine struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// Fragments are those of the read version no segment covers.
	Fragments []uint32 `json:"fragments"`
	// Rows are the live rows the new segment would index (every live row
	// of the version for a rebuild).
	Rows     int64 `json:"rows"`
	Rebuild  bool  `json:"rebuild"`
	Segments int   `json:"segments"`
}

func catchupDryRun(ctx context.Context, e *env, h *table.Handle, o index.Options) error {
	read, _, err := h.ReadForWrite(ctx)
	if err != nil {
		return err
	}
	if o.FRI, err = fri.Load(ctx, h.Bucket, read); err != nil {
		return err
	}
	jobs, skipped, err := index.Plan(read, o)
	if err != nil {
		return err
	}
	m := read.Manifest
	out := map[string]any{"operation": "index_catchup", "dry_run": true, "read_version": m.GetVersion(),
		"indices": []catchupPlanLine{}, "credit": []commit.Advance{}}
	var lines []catchupPlanLine
	for _, j := range jobs {
		if j.Kind == index.KindInverted {
			if why := index.InvertedRefusal(ctx, h.Bucket, o.FRI, j); why != "" {
				skipped = append(skipped, index.Skip{Name: j.Name, Reason: why})
				continue
			}
		}
		l := catchupPlanLine{Name: j.Name, Kind: j.Kind, Fragments: j.Missing.ToArray(), Rebuild: j.Rebuild, Segments: len(j.Segments)}
		if j.Rebuild {
			all := j.Missing.Clone()
			for _, f := range m.GetFragments() {
				all.Add(uint32(f.GetId()))
			}
			l.Rows = index.LiveRows(m, all)
		} else {
			l.Rows = index.LiveRows(m, j.Missing)
		}
		lines = append(lines, l)
	}
	if skipped == nil {
		skipped = []index.Skip{}
	}
	out["skipped"] = skipped
	if len(lines) > 0 {
		out["indices"] = lines
	} else {
		// No index lags: the command would still record the catch-up
		// positions a maintained index has earned (a record-only commit).
		due, err := commit.CreditDue(read)
		if err != nil {
			return fmt.Errorf("index catch-up: %w", err)
		}
		due = slices.DeleteFunc(due, func(a commit.Advance) bool {
			return o.Indices != nil && !slices.Contains(o.Indices, a.Index)
		})
		if len(due) > 0 {
			out["credit"] = due
		}
	}
	out["would_commit"] = len(lines) > 0 || len(out["credit"].([]commit.Advance)) > 0
	return printJSON(e.stdout, out)
}

// remapPlanLine is one index a remap would rewrite.
type remapPlanLine struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// Segments are the uuids of the segments whose data may hold
	// addresses the fragment-reuse index remaps.
	Segments []string `json:"segments"`
}

func remapDryRun(ctx context.Context, e *env, h *table.Handle, o index.RemapJobOptions) error {
	read, _, err := h.ReadForWrite(ctx)
	if err != nil {
		return err
	}
	ix, err := fri.Load(ctx, h.Bucket, read)
	if err != nil {
		return err
	}
	out := map[string]any{"operation": "index_remap", "dry_run": true, "read_version": read.Manifest.GetVersion(),
		"fri_versions": 0, "indices": []remapPlanLine{}, "skipped": []index.Skip{}, "fri_trim_now": []uint64{}, "would_commit": false}
	if ix == nil {
		return printJSON(e.stdout, out)
	}
	out["fri_versions"] = len(ix.Versions)
	var names []string
	for _, m := range read.Indices {
		if !meta.IsSystemIndex(m) && !slices.Contains(names, m.GetName()) {
			names = append(names, m.GetName())
		}
	}
	for _, n := range o.Indices {
		if !slices.Contains(names, n) {
			return fmt.Errorf("no index %q in version %d (indexes: %v)", n, read.Manifest.GetVersion(), names)
		}
	}
	if o.Indices != nil {
		names = slices.Clone(o.Indices)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	var lines []remapPlanLine
	var skipped []index.Skip
	for _, name := range names {
		var l remapPlanLine
		var need []*pb.IndexMetadata
		for _, s := range meta.FindIndex(read.Indices, name) {
			if ix.NeedsRemap(s) {
				l.Name, l.Kind = name, meta.IndexKind(s)
				l.Segments = append(l.Segments, meta.UUIDString(s.GetUuid()))
				need = append(need, s)
			}
		}
		if need == nil {
			continue
		}
		why, err := index.RemapRefusal(ctx, h.Bucket, read.Manifest, need)
		if err != nil {
			return err
		}
		if why != "" {
			skipped = append(skipped, index.Skip{Name: name, Reason: why})
			continue
		}
		lines = append(lines, l)
	}
	if lines != nil {
		out["indices"] = lines
	}
	if skipped != nil {
		out["skipped"] = skipped
	}
	// What no index needs already; the remaps above free more.
	trimNow := ix.Trimmable(read.Indices)
	if !o.NoTrim && trimNow != nil {
		out["fri_trim_now"] = trimNow
	}
	out["would_commit"] = len(lines) > 0 || (!o.NoTrim && len(trimNow) > 0)
	return printJSON(e.stdout, out)
}
