package daemon

import (
	"context"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/scheduler"
	"github.com/compactord/compactord/internal/storage"
)

// discoverLoop scans the discovery prefix every Discover.Interval (and on
// reload) and hands the merged table list to the scheduler.
func (d *Daemon) discoverLoop(ctx context.Context) {
	var b storage.Bucket
	var bURL string
	defer func() {
		if b != nil {
			_ = b.Close()
		}
	}()
	for {
		cfg := d.Config().Discover
		if cfg.URL != "" && cfg.URL != bURL {
			if b != nil {
				_ = b.Close()
				b = nil
			}
			nb, err := storage.Open(ctx, cfg.URL)
			if err != nil {
				d.noteDiscover(nil, err)
			} else {
				b, bURL = storage.WithMetrics(nb, d.storeMetrics), cfg.URL
			}
		}
		if b != nil && cfg.URL != "" {
			start := d.clock.Now()
			specs, err := Discover(ctx, b, cfg.URL)
			if ctx.Err() != nil {
				return
			}
			d.noteDiscover(specs, err)
			if err == nil {
				d.logger.Debug("discovery scan", zap.Int("tables", len(specs)), zap.Float64("took_seconds", d.clock.Now().Sub(start).Seconds()))
			}
		}
		iv := cfg.Interval
		if iv <= 0 {
			iv = time.Minute
		}
		t := d.clock.NewTimer(iv)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		case <-d.discoverKick:
			t.Stop()
		}
	}
}

func (d *Daemon) noteDiscover(specs []scheduler.TableSpec, err error) {
	if err != nil {
		d.logger.Warn("discovery scan failed; keeping the tables found before", zap.Error(err))
		d.mu.Lock()
		d.discoverErr = err.Error()
		d.mu.Unlock()
		d.discovering.Store(false)
		return
	}
	d.mu.Lock()
	changed := !slices.Equal(specs, d.discovered)
	d.discovered, d.discoverErr = specs, ""
	d.mu.Unlock()
	if changed {
		if err := d.sched.SetTables(d.tableSpecs()); err != nil {
			d.logger.Error("discovery: cannot apply the tables", zap.Error(err))
		}
	}
	d.discovering.Store(false)
}

// Discover lists every key under the bucket and returns a table for each
// folder holding `_versions/`: a Lance dataset (a LanceDB database
// directory holds one `<name>.lance` folder per table; the table is named
// <name>). The listing is flat (the storage layer has no delimiter listing), so a scan costs one pass over every key; keep
// discover.interval long on large buckets. Folders whose path has a
// segment starting with '_' are table internals and never tables.
func Discover(ctx context.Context, b storage.Bucket, baseURL string) ([]scheduler.TableSpec, error) {
	prefixes := map[string]bool{}
	err := b.List(ctx, "", func(a storage.Attrs) error {
		i := strings.Index(a.Key, meta.VersionsDir)
		if i < 0 || (i > 0 && a.Key[i-1] != '/') {
			return nil
		}
		p := a.Key[:i]
		for _, seg := range strings.Split(strings.TrimSuffix(p, "/"), "/") {
			if strings.HasPrefix(seg, "_") {
				return nil
			}
		}
		prefixes[p] = true
		return nil
	})
	if err != nil {
		return nil, err
	}
	var out []scheduler.TableSpec
	for p := range prefixes {
		u, err := joinURL(baseURL, p)
		if err != nil {
			return nil, err
		}
		name := NameFromURL(u)
		if p != "" {
			// A Lance dataset is named without its .lance suffix, as
			// LanceDB names the tables of a database directory.
			name = sanitizeName(strings.ReplaceAll(strings.TrimSuffix(strings.TrimSuffix(p, "/"), ".lance"), "/", "."))
		}
		out = append(out, scheduler.TableSpec{Name: name, URL: u})
	}
	slices.SortFunc(out, func(a, b scheduler.TableSpec) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// joinURL appends a key prefix to a bucket URL, keeping its query.
func joinURL(base, prefix string) (string, error) {
	if prefix == "" {
		return base, nil
	}
	u, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	u.Path = path.Join("/", u.Path, prefix)
	u.RawPath = ""
	return u.String(), nil
}
