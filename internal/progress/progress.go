// Package progress reports the progress of long work: rows and bytes done
// out of a total, the rate, and an estimate of the time left. A job finds
// its Reporter on its context (From) and adds to it at batch boundaries
// (Add); the reporter logs at most one line per interval, from the Add that
// finds the interval over (no goroutine, no timer), and a final line with
// the totals and the duration when the work ends. Snapshot is what the
// daemon's status API shows for a running attempt.
//
// Every method is safe for concurrent use (jobs fan out) and a no-op on a
// nil *Reporter, which is what From returns when the context carries none:
// code that reports progress never checks.
package progress

import (
	"context"
	"math"
	"sync"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/compactord/compactord/internal/clock"
)

// DefaultInterval is the least time between two progress lines.
const DefaultInterval = 5 * time.Second

// Units is an amount of work: rows (or files, or records: whatever the job
// counts) and bytes. A zero field of a total means unknown.
type Units struct {
	Rows  int64
	Bytes int64
}

// Snapshot is the progress of the current phase.
type Snapshot struct {
	// Phase names the work, for example "compact" or "index catchup".
	Phase    string `json:"phase"`
	RowsDone int64  `json:"rows_done"`
	// RowsTotal and BytesTotal are 0 when unknown.
	RowsTotal  int64 `json:"rows_total"`
	BytesDone  int64 `json:"bytes_done"`
	BytesTotal int64 `json:"bytes_total"`
	// The rates are averages since StartedAt.
	RateRowsPerS  float64 `json:"rate_rows_per_s"`
	RateBytesPerS float64 `json:"rate_bytes_per_s"`
	// ETASeconds is the time left at the current rate, from rows (or
	// bytes, when the rows' total is unknown); nil when unknown.
	ETASeconds     *float64  `json:"eta_seconds"`
	StartedAt      time.Time `json:"started_at"`
	ElapsedSeconds float64   `json:"elapsed_seconds"`
}

// Options configure a Reporter.
type Options struct {
	// Clock is the time source; nil means the wall clock.
	Clock clock.Clock
	// Logger receives the progress lines; nil logs nothing (Snapshot
	// still works).
	Logger *zap.Logger
	// Interval is the least time between two lines; 0 means
	// DefaultInterval.
	Interval time.Duration
	// Level is the lines' level; the zero value is info.
	Level zapcore.Level
}

// Reporter tracks the progress of one job.
type Reporter struct {
	clock    clock.Clock
	logger   *zap.Logger
	interval time.Duration
	level    zapcore.Level

	mu       sync.Mutex
	active   bool // a phase is running
	phase    string
	started  time.Time
	ended    time.Time // when the phase ended (zero while it runs)
	done     Units
	total    Units
	lastLine time.Time // the phase's last line, or its start
	lines    int       // lines logged in the phase
}

// New returns a reporter with no phase started.
func New(o Options) *Reporter {
	if o.Clock == nil {
		o.Clock = clock.Real()
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	return &Reporter{clock: o.Clock, logger: o.Logger, interval: o.Interval, level: o.Level}
}

type ctxKey struct{}

// With returns ctx carrying r.
func With(ctx context.Context, r *Reporter) context.Context {
	return context.WithValue(ctx, ctxKey{}, r)
}

// From returns the reporter ctx carries, or nil (whose methods do
// nothing).
func From(ctx context.Context) *Reporter {
	r, _ := ctx.Value(ctxKey{}).(*Reporter)
	return r
}

// Start begins a phase of work of the given total (a zero field:
// unknown), ending the previous phase, if any, as Finish does. Done counts
// and the rate start again from zero.
func (r *Reporter) Start(phase string, total Units) {
	if r == nil {
		return
	}
	now := r.clock.Now()
	r.mu.Lock()
	final, ok := r.endLocked(now)
	r.active, r.phase, r.started, r.ended, r.lastLine, r.lines = true, phase, now, time.Time{}, now, 0
	r.done, r.total = Units{}, total
	r.mu.Unlock()
	if ok {
		r.logFinal(final)
	}
}

// Grow adds to the current phase's total, for work that learns its size as
// it goes (a zero field leaves that total as it is).
func (r *Reporter) Grow(more Units) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.startLocked()
	r.total.Rows += more.Rows
	r.total.Bytes += more.Bytes
	r.mu.Unlock()
}

// Add counts rows and bytes done, and logs a progress line when the
// interval since the phase's last line (or its start) is over. Call it per
// batch, not per row.
func (r *Reporter) Add(rows, bytes int64) {
	if r == nil {
		return
	}
	now := r.clock.Now()
	r.mu.Lock()
	r.startLocked()
	r.done.Rows += rows
	r.done.Bytes += bytes
	var s Snapshot
	line := r.logger != nil && now.Sub(r.lastLine) >= r.interval
	if line {
		r.lastLine = now
		r.lines++
		s = r.snapshotLocked(now)
	}
	r.mu.Unlock()
	if line {
		r.log("progress", s, zap.Float64("elapsed_seconds", s.ElapsedSeconds))
	}
}

// Finish ends the current phase. Its final line (the totals, the duration
// and the average rates) is logged when the phase logged a progress line
// or lasted at least the interval: short work stays quiet.
func (r *Reporter) Finish() {
	if r == nil {
		return
	}
	now := r.clock.Now()
	r.mu.Lock()
	final, ok := r.endLocked(now)
	r.mu.Unlock()
	if ok {
		r.logFinal(final)
	}
}

// Snapshot returns the progress of the current (or last) phase; ok is
// false when no phase has started.
func (r *Reporter) Snapshot() (s Snapshot, ok bool) {
	if r == nil {
		return Snapshot{}, false
	}
	now := r.clock.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started.IsZero() {
		return Snapshot{}, false
	}
	return r.snapshotLocked(now), true
}

// startLocked starts an unnamed phase for an Add or Grow without Start.
// REQUIRES: r.mu held.
func (r *Reporter) startLocked() {
	if r.active {
		return
	}
	now := r.clock.Now()
	r.active, r.phase, r.started, r.ended, r.lastLine, r.lines = true, "", now, time.Time{}, now, 0
	r.done, r.total = Units{}, Units{}
}

// endLocked ends the running phase and reports whether its final line is
// due. REQUIRES: r.mu held.
func (r *Reporter) endLocked(now time.Time) (Snapshot, bool) {
	if !r.active {
		return Snapshot{}, false
	}
	r.active, r.ended = false, now
	s := r.snapshotLocked(now)
	return s, r.logger != nil && (r.lines > 0 || now.Sub(r.started) >= r.interval)
}

// REQUIRES: r.mu held.
func (r *Reporter) snapshotLocked(now time.Time) Snapshot {
	s := Snapshot{Phase: r.phase, RowsDone: r.done.Rows, RowsTotal: r.total.Rows, BytesDone: r.done.Bytes,
		BytesTotal: r.total.Bytes, StartedAt: r.started}
	if !r.active && !r.ended.IsZero() {
		now = r.ended // a finished phase's rates stay as they ended
	}
	el := now.Sub(r.started).Seconds()
	s.ElapsedSeconds = el
	if el <= 0 {
		return s
	}
	s.RateRowsPerS = float64(s.RowsDone) / el
	s.RateBytesPerS = float64(s.BytesDone) / el
	switch {
	case s.RowsTotal > 0 && s.RateRowsPerS > 0:
		eta := float64(max(0, s.RowsTotal-s.RowsDone)) / s.RateRowsPerS
		s.ETASeconds = &eta
	case s.RowsTotal == 0 && s.BytesTotal > 0 && s.RateBytesPerS > 0:
		eta := float64(max(0, s.BytesTotal-s.BytesDone)) / s.RateBytesPerS
		s.ETASeconds = &eta
	}
	return s
}

func (r *Reporter) logFinal(s Snapshot) {
	r.log("progress done", s, zap.Float64("duration_seconds", s.ElapsedSeconds))
}

func (r *Reporter) log(msg string, s Snapshot, extra zap.Field) {
	ce := r.logger.Check(r.level, msg)
	if ce == nil {
		return
	}
	fields := []zap.Field{zap.String("phase", s.Phase),
		zap.Int64("rows_done", s.RowsDone), zap.Int64("rows_total", s.RowsTotal),
		zap.Int64("bytes_done", s.BytesDone), zap.Int64("bytes_total", s.BytesTotal),
		zap.Float64("rate_rows_per_s", round(s.RateRowsPerS)), zap.Float64("rate_bytes_per_s", round(s.RateBytesPerS)),
		extra}
	if s.ETASeconds != nil {
		fields = append(fields, zap.Float64("eta_seconds", round(*s.ETASeconds)))
	}
	ce.Write(fields...)
}

// round keeps two decimals: a rate or an ETA needs no more.
func round(f float64) float64 { return math.Round(f*100) / 100 }
