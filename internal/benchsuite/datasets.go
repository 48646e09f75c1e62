package benchsuite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
)

// dataset returns the table described by name and args, generating it
// with `benchsuite gen ARGS...` in a child process unless a previous run
// left it (its info file is written last, so a partial set is regenerated).
func (s *Suite) dataset(ctx context.Context, name string, args ...string) (*TableInfo, error) {
	dir := filepath.Join(s.cfg.Work, "data", name)
	infoFile := dir + ".json"
	if data, err := os.ReadFile(infoFile); err == nil {
		var info TableInfo
		if err := json.Unmarshal(data, &info); err == nil && info.URL == "file://"+dir {
			return &info, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, err
	}
	s.logf("generating data set %s", name)
	argv := append([]string{s.cfg.Self, "gen", "--dir", dir}, args...)
	r, err := runCmd(ctx, nil, argv...)
	if err != nil {
		return nil, fmt.Errorf("generate %s: %w", name, err)
	}
	var info TableInfo
	if err := json.Unmarshal(r.Stdout, &info); err != nil {
		return nil, fmt.Errorf("generate %s: bad output: %w", name, err)
	}
	if err := os.WriteFile(infoFile, r.Stdout, 0o644); err != nil {
		return nil, err
	}
	s.logf("generated %s: %d rows, %.0f MiB in %.0fs", name, info.Rows, mib(info.Bytes), r.Wall.Seconds())
	return &info, nil
}

func (s *Suite) compactSet(ctx context.Context, fragments int, deleted bool) (*TableInfo, error) {
	rpf := s.cfg.CompactRows / fragments
	name := fmt.Sprintf("compact-%dx%d", fragments, rpf)
	base, err := s.dataset(ctx, name, "--kind", "compact", "--fragments", strconv.Itoa(fragments),
		"--rows-per-fragment", strconv.Itoa(rpf), "--parallelism", strconv.Itoa(s.cfg.Threads))
	if err != nil || !deleted {
		return base, err
	}
	// The deleted variant shares the data files (hard links) and adds one
	// Delete commit.
	return s.dataset(ctx, name+"-del10", "--kind", "delete", "--from", filepath.Join(s.cfg.Work, "data", name),
		"--rows-per-fragment", strconv.Itoa(rpf))
}

// bigMergeSet is the compaction table with RSSMergeUpserts upserts
// flushed: a merge over 1 GiB of input.
func (s *Suite) bigMergeSet(ctx context.Context) (*TableInfo, error) {
	n := s.cfg.CompactFragments
	rpf := s.cfg.CompactRows / n
	name := fmt.Sprintf("compact-%dx%d", n, rpf)
	if _, err := s.compactSet(ctx, n, false); err != nil {
		return nil, err
	}
	return s.dataset(ctx, fmt.Sprintf("%s-up%d", name, s.cfg.RSSMergeUpserts), "--kind", "upserts",
		"--from", filepath.Join(s.cfg.Work, "data", name), "--upserts", strconv.Itoa(s.cfg.RSSMergeUpserts))
}

func (s *Suite) mergeSet(ctx context.Context) (*TableInfo, error) {
	c := s.cfg
	name := fmt.Sprintf("merge-%dx%d-up%d", c.MergeBase/c.MergeFragmentRows, c.MergeFragmentRows, c.MergeUpserts)
	return s.dataset(ctx, name, "--kind", "merge", "--base-rows", strconv.Itoa(c.MergeBase),
		"--rows-per-fragment", strconv.Itoa(c.MergeFragmentRows), "--upserts", strconv.Itoa(c.MergeUpserts),
		"--parallelism", strconv.Itoa(c.Threads))
}

// GenArgs is what `benchsuite gen` does.
type GenArgs struct {
	Kind            string // compact, delete, upserts or merge
	Dir             string
	From            string // delete: the table to clone
	Fragments       int
	RowsPerFragment int
	BaseRows        int
	Upserts         int
	Parallelism     int
}

// Generate runs one generation step (the child side of dataset).
func Generate(ctx context.Context, a GenArgs) (*TableInfo, error) {
	var err error
	if a.Dir, err = filepath.Abs(a.Dir); err != nil {
		return nil, err
	}
	if a.From != "" {
		if a.From, err = filepath.Abs(a.From); err != nil {
			return nil, err
		}
	}
	switch a.Kind {
	case "compact":
		return GenCompact(ctx, GenSpec{Dir: a.Dir, Fragments: a.Fragments, RowsPerFragment: a.RowsPerFragment, Parallelism: a.Parallelism, Seed: 1})
	case "delete":
		if a.From == "" {
			return nil, errors.New("gen delete: --from is required")
		}
		if err := cloneTree(ctx, a.From, a.Dir); err != nil {
			return nil, err
		}
		return DeleteEveryTenth(ctx, a.Dir, a.RowsPerFragment)
	case "upserts":
		if a.From == "" {
			return nil, errors.New("gen upserts: --from is required")
		}
		return GenUpserts(ctx, a.From, a.Dir, a.Upserts)
	case "merge":
		return GenMerge(ctx, MergeSpec{Dir: a.Dir, BaseRows: a.BaseRows, RowsPerFragment: a.RowsPerFragment, Upserts: a.Upserts, Parallelism: a.Parallelism, Seed: 1})
	}
	return nil, fmt.Errorf("gen: unknown kind %q (compact, delete, upserts, merge)", a.Kind)
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }
