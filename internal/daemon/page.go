package daemon

import (
	"bytes"
	"fmt"
	"html/template"
	"net/http"
	"sort"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/compactord/compactord/internal/marker"
	"github.com/compactord/compactord/internal/observe"
	"github.com/compactord/compactord/internal/scheduler"
)

// The status page: plain HTML with inline SVG timelines and a meta
// refresh; no JavaScript.

type pageData struct {
	Version  string
	Revision string
	Holder   string
	Members  []string
	Ready    bool
	Now      time.Time
	Uptime   time.Duration
	Tables   []tableView
	Recent   []scheduler.JobRecord
	Refresh  int
	Discover string
	// Fleet summary: tables by state, every table worst lag first, and
	// the filter (q: name substring; state) the details follow.
	States   []stateCount
	Fleet    []fleetRow
	Query    string
	State    string
	Total    int
	Shown    int
	Detailed int
}

type stateCount struct {
	State string
	N     int
}

type fleetRow struct {
	Name, State string
	Version     uint64
	Pending     uint64
	IndexLag    uint64
	Failures    int
	Halt        string
	LastSync    *time.Time
	// Marks the state does not already say (a paused table's pause
	// mark): a no-compact table is "ok" to the scheduler, yet compaction
	// never runs on it.
	Marks []marker.Mark
}

// maxDetails bounds the tables drawn in full without a filter.
const maxDetails = 20

// recentJobs bounds the "Recent jobs" table.
const recentJobs = 30

// shortID is how much of a shard's UUID the page shows; the title
// attribute carries the whole.
const shortID = 8

func lagOf(ts scheduler.TableStatus) (pending, index uint64) {
	if ts.Snapshot == nil {
		return 0, 0
	}
	for _, sh := range ts.Snapshot.Shards {
		for _, g := range sh.Lag {
			index = max(index, g)
		}
	}
	return ts.Snapshot.PendingGenerations, index
}

func failuresOf(ts scheduler.TableStatus) int {
	n := ts.SyncConsecutiveFailures
	for _, j := range ts.Jobs {
		n = max(n, j.ConsecutiveFailures)
	}
	return n
}

type tableView struct {
	scheduler.TableStatus
	Shards []shardView
	Policy Policy
	// LeaseExpired: the newest lease record this instance read has
	// expired, so nobody holds the table's lease now.
	LeaseExpired bool
	// NoCompact is the no-compact mark's reason, when the table has one.
	NoCompact *marker.Mark
	Debt      debtView
	// Plan is the next compaction's plan (nil: the table is not open).
	Plan *planView
}

// debtView is the work a table owes, from what the last sync saw: the
// page's one "Debt" section per table. Debt measured elsewhere (per-table
// gauges of small fragments, retained versions and their age, pending
// index rows) belongs here as fields, drawn in the same section.
type debtView struct {
	DeletedShare float64
	// MaxLag is the largest catch-up lag of each index, in generations.
	MaxLag []lagView
	// Retained is the SSTable bytes trim keeps, by reason.
	Retained []retainedView
	// RunningFor is the running job's age (0: none).
	RunningFor time.Duration
}

type lagView struct {
	Index string
	Lag   uint64
}

type retainedView struct {
	Reason string
	Bytes  uint64
}

func debtOf(ts scheduler.TableStatus, now time.Time) debtView {
	var d debtView
	if r := ts.Running; r != nil {
		d.RunningFor = now.Sub(r.Started).Round(time.Second)
	}
	s := ts.Snapshot
	if s == nil {
		return d
	}
	if s.PhysicalRows > 0 {
		d.DeletedShare = float64(s.DeletedRows) / float64(s.PhysicalRows)
	}
	lags := map[string]uint64{}
	kept := map[string]uint64{}
	for _, sh := range s.Shards {
		for ix, g := range sh.Lag {
			lags[ix] = max(lags[ix], g)
		}
		for r, n := range sh.Retained {
			kept[r] += n
		}
	}
	for ix, g := range lags {
		d.MaxLag = append(d.MaxLag, lagView{ix, g})
	}
	sort.Slice(d.MaxLag, func(i, j int) bool { return d.MaxLag[i].Index < d.MaxLag[j].Index })
	for _, r := range observe.RetainedReasons {
		if kept[r] > 0 {
			d.Retained = append(d.Retained, retainedView{r, kept[r]})
		}
	}
	return d
}

type shardView struct {
	scheduler.ShardInfo
	Segs  []seg
	Ticks []float64
}

// seg is one bar of a shard's timeline, in viewBox units (0..1000).
type seg struct {
	X, W  float64
	Class string
	Title string
}

const timelineWidth = 1000.0

func shardViews(shards []scheduler.ShardInfo) []shardView {
	scale := uint64(1)
	for _, s := range shards {
		scale = max(scale, s.Flushed, s.Merged)
	}
	x := func(g uint64) float64 { return float64(g) / float64(scale) * timelineWidth }
	var out []shardView
	for _, s := range shards {
		v := shardView{ShardInfo: s}
		// trimmed ≤ caught up ≤ merged ≤ flushed; clamp what a racing
		// read could show out of order.
		t := min(s.Trimmed, s.Merged)
		c := min(max(s.CaughtUp, t), s.Merged)
		m := s.Merged
		f := max(s.Flushed, m)
		add := func(from, to uint64, class, title string) {
			if to > from {
				v.Segs = append(v.Segs, seg{X: x(from), W: x(to) - x(from), Class: class,
					Title: fmt.Sprintf("generations %d–%d: %s", from+1, to, title)})
			}
		}
		add(0, t, "trimmed", "trimmed (deleted)")
		add(t, c, "caughtup", "merged and covered by every maintained index; trim deletes them")
		add(c, m, "merged", "merged into the base table; index catch-up pending")
		add(m, f, "flushed", "flushed to SSTables; not merged yet")
		if scale <= 100 {
			for g := uint64(1); g < scale; g++ {
				v.Ticks = append(v.Ticks, x(g))
			}
		}
		out = append(out, v)
	}
	return out
}

func (d *Daemon) statusPage(w http.ResponseWriter, r *http.Request) {
	now := d.clock.Now()
	data := pageData{Version: d.deps.Version, Revision: d.deps.Build.Revision, Holder: d.sched.Holder(), Members: d.sched.Members(), Ready: d.Ready(),
		Now: now, Uptime: now.Sub(d.started).Round(time.Second), Refresh: 5}
	d.mu.Lock()
	data.Discover = d.cfg.Discover.URL
	d.mu.Unlock()
	data.Query, data.State = strings.TrimSpace(r.URL.Query().Get("q")), r.URL.Query().Get("state")
	filtered := data.Query != "" || data.State != ""
	if !filtered {
		data.Recent = d.sched.Recent(recentJobs)
	}
	cfg := d.jobsCfg.Load()
	all := d.sched.Tables()
	data.Total = len(all)
	// Worst first: halted, then the most unmerged generations, the
	// largest index lag, the longest failure streak; then by name.
	rank := func(ts scheduler.TableStatus) int {
		switch ts.State {
		case "halted":
			return 0
		case "not_synced":
			return 1
		}
		return 2
	}
	sort.SliceStable(all, func(i, j int) bool {
		a, b := all[i], all[j]
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra < rb
		}
		pa, ia := lagOf(a)
		pb, ib := lagOf(b)
		if pa != pb {
			return pa > pb
		}
		if ia != ib {
			return ia > ib
		}
		if fa, fb := failuresOf(a), failuresOf(b); fa != fb {
			return fa > fb
		}
		return a.Name < b.Name
	})
	counts := map[string]int{}
	for _, ts := range all {
		counts[ts.State]++
		if data.Query != "" && !strings.Contains(strings.ToLower(ts.Name), strings.ToLower(data.Query)) {
			continue
		}
		if data.State != "" && ts.State != data.State {
			continue
		}
		p, ix := lagOf(ts)
		row := fleetRow{Name: ts.Name, State: ts.State, Pending: p, IndexLag: ix, Failures: failuresOf(ts), LastSync: ts.LastSync}
		for _, m := range ts.Marks {
			if m.Kind != marker.Pause || ts.State != "paused" {
				row.Marks = append(row.Marks, m)
			}
		}
		if filtered {
			// The recent jobs follow the filter: those of the matching
			// tables only.
			data.Recent = append(data.Recent, ts.Recent...)
		}
		if ts.Snapshot != nil {
			row.Version = ts.Snapshot.Version
		}
		if ts.Halted != nil {
			row.Halt = ts.Halted.Reason
		}
		data.Fleet = append(data.Fleet, row)
		if data.Query == "" && data.State == "" && len(data.Tables) >= maxDetails {
			continue
		}
		tv := tableView{TableStatus: ts, Policy: cfg.PolicyFor(ts.Name), Debt: debtOf(ts, now)}
		tv.LeaseExpired = ts.Lease != nil && !now.Before(ts.Lease.Expires)
		for _, m := range ts.Marks {
			if m.Kind == marker.NoCompact {
				tv.NoCompact = &m
			}
		}
		if ts.Snapshot != nil {
			tv.Shards = shardViews(ts.Snapshot.Shards)
			// The table's own compaction settings (its policy), as its
			// next compaction will plan.
			tv.Plan = d.plans.planFor(r.Context(), ts.Name, ts.Snapshot.Version, tv.Policy.Jobs.Compact.Options())
		}
		data.Tables = append(data.Tables, tv)
	}
	for _, st := range []string{"halted", "not_synced", "paused", "running", "ok", "not_owned"} {
		if counts[st] > 0 {
			data.States = append(data.States, stateCount{st, counts[st]})
		}
	}
	data.Shown, data.Detailed = len(data.Fleet), len(data.Tables)
	if filtered {
		sort.SliceStable(data.Recent, func(i, j int) bool { return data.Recent[i].Finished.After(data.Recent[j].Finished) })
		data.Recent = data.Recent[:min(len(data.Recent), recentJobs)]
	}
	var buf bytes.Buffer
	if err := pageTmpl.Execute(&buf, data); err != nil {
		d.logger.Error("status page", zap.Error(err))
		http.Error(w, "status page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(buf.Bytes())
}

var pageTmpl = template.Must(template.New("page").Funcs(template.FuncMap{
	"ts": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("15:04:05")
	},
	"tsp": func(t *time.Time) string {
		if t == nil || t.IsZero() {
			return "—"
		}
		return t.UTC().Format("15:04:05")
	},
	"secs": func(f float64) string {
		if f < 1 {
			return fmt.Sprintf("%.0fms", f*1000)
		}
		return fmt.Sprintf("%.1fs", f)
	},
	"bytes": func(n uint64) string {
		switch {
		case n >= 1<<30:
			return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
		case n >= 1<<20:
			return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
		case n >= 1<<10:
			return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
		}
		return fmt.Sprintf("%d B", n)
	},
	// eta is a progress snapshot's time left ("" when unknown): the
	// snapshot holds it as a pointer, which printf would print as one.
	"eta": func(f *float64) string {
		if f == nil {
			return ""
		}
		return fmt.Sprintf(", about %.0f s left", *f)
	},
	"short": func(id string) string {
		if r := []rune(id); len(r) > shortID {
			return string(r[:shortID]) + "…"
		}
		return id
	},
	"pct":    func(f float64) string { return fmt.Sprintf("%.0f%%", f*100) },
	"join":   strings.Join,
	"kinds":  func() []scheduler.Kind { return scheduler.Kinds },
	"states": func() []string { return []string{"ok", "running", "paused", "halted", "not_owned", "not_synced"} },
	"job":    func(m map[string]scheduler.KindStatus, k scheduler.Kind) scheduler.KindStatus { return m[string(k)] },
}).Parse(pageHTML))

const pageHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="refresh" content="{{.Refresh}}">
<title>compactord</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222;background:#fafafa}
h1{font-size:1.4em;margin:0 0 .2em} h2{font-size:1.15em;margin:0 0 .4em} h3{font-size:1em;margin:.8em 0 .3em}
.meta{color:#666;margin-bottom:1em}
.table{background:#fff;border:1px solid #ddd;border-radius:6px;padding:.8em 1em;margin-bottom:1em}
.state{display:inline-block;padding:0 .5em;border-radius:3px;font-size:.85em;color:#fff;background:#888}
.state-ok{background:#2e7d32}.state-running{background:#1565c0}.state-halted{background:#c62828}
.state-paused{background:#ef6c00}.state-marked{background:#6a1b9a}.state-not_owned{background:#757575}.state-not_synced{background:#9e9e9e}
table.grid{border-collapse:collapse;font-size:.9em} table.grid td,table.grid th{border-bottom:1px solid #eee;padding:2px 8px;text-align:left}
.shard{display:grid;grid-template-columns:6em 1fr 26em;gap:.6em;align-items:center;margin:.2em 0}
.shard-id{white-space:nowrap;overflow:hidden} .lease-expired{color:#888}
svg.tl{width:100%;height:18px;background:#f0f0f0;border:1px solid #ddd}
svg .trimmed{fill:#bdbdbd} svg .caughtup{fill:#43a047} svg .merged{fill:#1e88e5} svg .flushed{fill:#fb8c00}
svg .tick{stroke:#fff;stroke-width:1}
.legend span{display:inline-block;width:.9em;height:.9em;margin:0 .25em 0 .8em;vertical-align:middle}
.err{color:#c62828} .muted{color:#888} code{font-size:.9em}
.res-success{color:#2e7d32}.res-skipped{color:#607d8b}.res-canceled{color:#757575}.res-retry{color:#ef6c00}.res-error,.res-fatal{color:#c62828}
</style>
</head>
<body>
<h1>compactord</h1>
<div class="meta">version {{.Version}}{{if .Revision}} (revision <code class="revision">{{.Revision}}</code>){{end}} · {{if .Ready}}ready{{else}}<span class="err">not ready</span>{{end}} · up {{.Uptime}} · {{ts .Now}} UTC
{{if .Holder}} · instance <code>{{.Holder}}</code>{{end}}{{if .Members}} · live instances: {{len .Members}}{{end}}
{{if .Discover}} · discovering under <code>{{.Discover}}</code>{{end}}
· <a href="/metrics">metrics</a> · <a href="/api/v1/tables">API</a></div>
<div class="legend">Shard timelines, generation 1 on the left:<span style="background:#bdbdbd"></span>trimmed<span style="background:#43a047"></span>merged and caught up<span style="background:#1e88e5"></span>merged, index catch-up pending<span style="background:#fb8c00"></span>flushed, not merged</div>
<h2>Fleet</h2>
<div class="fleet-states">{{.Total}} tables:{{range .States}} <a class="state state-{{.State}}" href="/?state={{.State}}">{{.N}} {{.State}}</a>{{end}}</div>
<form class="filter" method="get" action="/"><input type="search" name="q" value="{{.Query}}" placeholder="table name contains" aria-label="filter tables by name">
<select name="state" aria-label="filter tables by state"><option value="">any state</option>{{$cur := .State}}{{range $s := states}}<option value="{{$s}}"{{if eq $s $cur}} selected{{end}}>{{$s}}</option>{{end}}</select>
<button type="submit">filter</button>{{if or .Query .State}} <a href="/">clear</a>{{end}}</form>
{{if .Fleet}}<table class="grid fleet"><tr><th>table</th><th>state</th><th>version</th><th>pending generations</th><th>index lag</th><th>failures in a row</th><th>synced</th></tr>
{{range .Fleet}}<tr class="fleet-row"><td><a href="#table-{{.Name}}">{{.Name}}</a></td><td><span class="state state-{{.State}}">{{.State}}</span>{{if .Halt}} ({{.Halt}}){{end}}{{range .Marks}} <span class="state state-marked" title="{{if .Reason}}{{.Reason}}{{else}}no reason given{{end}}">marked {{.Kind}}</span>{{end}}</td><td>{{.Version}}</td><td>{{.Pending}}</td><td>{{.IndexLag}}</td><td>{{.Failures}}</td><td>{{tsp .LastSync}}</td></tr>{{end}}</table>{{end}}
<p class="muted shown">{{.Shown}} of {{.Total}} tables match; {{.Detailed}} shown in full below{{if lt .Detailed .Shown}} (the worst first; filter to see others){{end}}.</p>
{{if not .Tables}}<p class="muted">No tables{{if or .Query .State}} match the filter{{else}} yet{{end}}.</p>{{end}}
{{range .Tables}}{{$t := .}}
<div class="table" id="table-{{.Name}}">
<h2>{{.Name}} <span class="state state-{{.State}}">{{.State}}</span></h2>
<div class="meta"><code>{{.URL}}</code>{{if .Lease}}{{if .LeaseExpired}} · <span class="lease lease-expired">no lease held (the last, {{.Lease.Holder}}'s epoch {{.Lease.Epoch}}, expired at {{ts .Lease.Expires}})</span>{{else}} · <span class="lease">lease {{.Lease.Holder}} (epoch {{.Lease.Epoch}}, until {{ts .Lease.Expires}})</span>{{end}}{{end}} · synced {{tsp .LastSync}}</div>
<details class="policy"><summary>Policy: {{with .Policy.Override}}<code>{{.}}</code>{{else}}defaults{{end}}</summary>
<table class="grid"><tr><th>setting</th><th>value</th><th>from</th></tr>{{range .Policy.Values}}<tr><td><code>{{.Key}}</code></td><td>{{.Value}}</td><td>{{.Source}}</td></tr>{{end}}</table></details>
{{if .Halted}}<p class="err">Quarantined ({{.Halted.Reason}}) by {{.Halted.Kind}} since {{ts .Halted.Since}}: {{.Halted.Error}}. Resume with <code>POST /api/v1/tables/{{.Name}}/resume</code>.</p>{{end}}
{{range .Marks}}<p class="mark">Marked <b>{{.Kind}}</b>{{if .Reason}}: {{.Reason}}{{end}} (since {{ts .Since}}{{if .By}}, by {{.By}}{{end}}).</p>{{end}}
{{if .SyncError}}<p class="err">Sync: {{.SyncError}}{{if .SyncConsecutiveFailures}} ({{.SyncConsecutiveFailures}} failures in a row){{end}}</p>{{end}}
{{with .Snapshot}}
<div>{{if .Format}}format <b class="format">{{.Format}}</b> · {{end}}version <b class="version">{{.Version}}</b> · {{.Fragments}} fragments · {{.PhysicalRows}} rows ({{.DeletedRows}} deleted) · {{bytes .DataBytes}} · pending generations <b>{{.PendingGenerations}}</b></div>
{{if .Indices}}<div>indices: {{range .Indices}}<code>{{.Name}}</code> ({{.Type}}, {{.Segments}} segment{{if ne .Segments 1}}s{{end}}{{if .Maintained}}, maintained{{end}}) {{end}}</div>{{end}}
{{end}}
{{if .Shards}}<h3>Shards</h3>
{{range .Shards}}<div class="shard"><code class="shard-id" title="{{.ID}}">{{short .ID}}</code>
<svg class="tl" viewBox="0 0 1000 18" preserveAspectRatio="none" role="img" aria-label="shard {{.ID}}">{{range .Segs}}<rect class="{{.Class}}" x="{{.X}}" y="0" width="{{.W}}" height="18"><title>{{.Title}}</title></rect>{{end}}{{range .Ticks}}<line class="tick" x1="{{.}}" x2="{{.}}" y1="0" y2="18"/>{{end}}</svg>
<span>flushed {{.Flushed}} · merged {{.Merged}} · caught up {{.CaughtUp}} · trimmed {{.Trimmed}} · {{.SSTables}} SSTables ({{bytes .SSTableBytes}})</span></div>
{{end}}{{end}}
{{with .Snapshot}}{{if .FRI}}<h3>Fragment-reuse index: {{len .FRI}} version{{if ne (len .FRI) 1}}s{{end}} outstanding</h3>
<table class="grid fri"><tr><th>dataset version</th><th>groups</th><th>old fragments</th><th>new fragments</th><th>removed</th></tr>
{{range .FRI}}<tr><td>{{.DatasetVersion}}</td><td>{{.Groups}}</td><td>{{.OldFragments}}</td><td>{{.NewFragments}}</td><td>{{.Removed}}</td></tr>{{end}}</table>
{{else if .MemWal}}<h3 class="muted">Fragment-reuse index: no versions outstanding</h3>{{end}}{{end}}
<h3>Debt</h3>
<div class="debt">{{with .Snapshot}}<span>{{.Fragments}} fragments</span> · <span>{{.DeletedRows}} deleted rows ({{pct $t.Debt.DeletedShare}} of {{.PhysicalRows}})</span> · <span>{{.PendingGenerations}} generations not merged</span>{{range $t.Debt.MaxLag}} · <span>index <code>{{.Index}}</code> {{.Lag}} generations behind</span>{{end}}{{range $t.Debt.Retained}} · <span>{{bytes .Bytes}} of SSTables kept ({{.Reason}})</span>{{end}} · <span>{{len .FRI}} fragment-reuse versions pending</span>{{else}}<span class="muted">not synced yet</span>{{end}}{{if .Debt.RunningFor}} · <span>job running for {{.Debt.RunningFor}}</span>{{end}}</div>
<h3>Next compaction</h3>
{{if .NoCompact}}<p class="plan-off">Compaction is off for this table: marked no-compact{{if .NoCompact.Reason}} ({{.NoCompact.Reason}}){{end}}. What it would take:</p>{{end}}
{{with .Plan}}{{if .Err}}<p class="err plan-error">Cannot plan: {{.Err}}</p>{{else}}{{if .Groups}}<p class="plan">At version {{.ReadVersion}}: {{len .Groups}} group{{if ne (len .Groups) 1}}s{{end}} (small: fewer than {{.Target}} rows; deletions: more than {{pct .Threshold}} of the rows deleted).</p>
<table class="grid plan"><tr><th>fragments (why)</th><th>live rows after</th></tr>{{range .Groups}}<tr class="plan-group"><td>{{join .Fragments ", "}}</td><td>{{.LiveRows}}</td></tr>{{end}}</table>
{{else}}<p class="plan muted">Nothing to compact at version {{.ReadVersion}}: no fragment has more than {{pct .Threshold}} of its rows deleted, and none is small (fewer than {{.Target}} rows) beside another small one.</p>{{end}}
{{if .Skips}}<p>Left out although they qualify:</p><ul class="plan-skips">{{range .Skips}}<li>fragment {{.Fragment}}: {{.Reason}}</li>{{end}}</ul>{{end}}{{end}}
{{else}}<p class="muted">No plan: the table is not open on this instance yet.</p>{{end}}
<h3>Jobs</h3>
<table class="grid"><tr><th>kind</th><th>schedule</th><th>next</th><th>last run</th><th>result</th><th>failures in a row</th><th>next attempt</th></tr>
{{$jobs := .Jobs}}{{range kinds}}{{$j := job $jobs .}}<tr><td>{{.}}</td>{{if $j.Available}}<td><code>{{$j.Schedule}}</code></td><td>{{tsp $j.Next}}</td>
<td>{{with $j.LastRun}}{{ts .Finished}} ({{secs .DurationSeconds}}){{else}}—{{end}}</td><td>{{with $j.LastRun}}<span class="res-{{.Result}}">{{.Result}}</span>{{end}}</td><td class="failures">{{$j.ConsecutiveFailures}}{{with $j.FailingSince}} since {{tsp .}}{{end}}</td><td class="next-attempt">{{tsp $j.NextAttempt}}</td>
{{else}}<td colspan="6" class="muted">not available in this build</td>{{end}}</tr>{{end}}</table>
{{if .Running}}<p>Running: {{.Running.Kind}} ({{.Running.Trigger}}) since {{ts .Running.Started}}{{with .Running.Progress}}: {{.Phase}}, {{.RowsDone}}{{if .RowsTotal}} of {{.RowsTotal}}{{end}} rows, {{.BytesDone}}{{if .BytesTotal}} of {{.BytesTotal}}{{end}} bytes{{eta .ETASeconds}}{{end}}</p>{{end}}
{{if .Pending}}<p>Pending: {{range .Pending}}{{.Kind}} ({{.Trigger}}) {{end}}</p>{{end}}
</div>
{{end}}
<h2>Recent jobs</h2>
{{if not .Recent}}<p class="muted">None yet.</p>{{else}}
<table class="grid recent"><tr><th>finished</th><th>table</th><th>kind</th><th>trigger</th><th>result</th><th>duration</th><th>version</th><th>details</th></tr>
{{range .Recent}}<tr><td>{{ts .Finished}}</td><td>{{.Table}}</td><td>{{.Kind}}</td><td>{{.Trigger}}</td><td class="res-{{.Result}}">{{.Result}}</td><td>{{secs .DurationSeconds}}</td><td>{{if .Version}}{{.Version}}{{end}}</td><td>{{.Summary}}{{if .Error}}<span class="err">{{.Error}}</span>{{end}}</td></tr>
{{end}}</table>{{end}}
</body>
</html>
`
