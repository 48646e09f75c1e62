package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"reflect"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.uber.org/zap"

	"github.com/compactord/compactord/internal/buildinfo"
	"github.com/compactord/compactord/internal/clock"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/demo/democfg"
	"github.com/compactord/compactord/internal/lease"
	"github.com/compactord/compactord/internal/scheduler"
	"github.com/compactord/compactord/internal/storage"
)

// Deps are the daemon's collaborators.
type Deps struct {
	Logger *zap.Logger
	// Level, when set, is changed by a reload.
	Level *zap.AtomicLevel
	// Registry receives every metric; nil means a new one with the process
	// and Go runtime collectors.
	Registry *prometheus.Registry
	Clock    clock.Clock
	// Reload reads the configuration again (on SIGHUP); nil disables
	// reloading.
	Reload func() (Config, error)
	// Build is reported by compactord_build_info, the API and the status
	// page; Version, when set, overrides Build.Version (tests).
	Build   buildinfo.Info
	Version string
	// Jobs replaces the real job set (tests inject faulty jobs); nil wires
	// the real ones (jobs.go).
	Jobs map[scheduler.Kind]scheduler.JobFunc
	// WrapBucket, when set, wraps every table's bucket as it is opened
	// (tests inject storage faults); nil uses the bucket as opened.
	WrapBucket func(name string, b storage.Bucket) storage.Bucket
	// Demo builds the demo workload when demo.enabled (the CLI's run wires
	// internal/demo's); nil: this daemon has no demo writer, and an
	// enabled demo only adds its tables.
	Demo democfg.Starter
}

// Daemon is `compactord run`.
type Daemon struct {
	deps   Deps
	logger *zap.Logger
	reg    *prometheus.Registry
	clock  clock.Clock

	mu          sync.Mutex
	cfg         Config
	discovered  []scheduler.TableSpec
	discoverErr string
	jobsCfg     atomic.Pointer[Config] // the jobs' table policies (defaults and overrides); a reload swaps it
	token       atomic.Pointer[string]

	storeMetrics  *storage.Metrics
	commitMetrics *commit.Metrics
	conflicts     *conflictMetrics
	sched         *scheduler.Scheduler
	members       storage.Bucket

	addr         atomic.Pointer[string]
	discovering  atomic.Bool // discovery configured and its first scan not done
	draining     atomic.Bool
	started      time.Time
	discoverKick chan struct{}
	demo         atomic.Pointer[democfg.Workload]

	// plans are the status page's next-compaction plans.
	plans planCache

	reloadMu      sync.Mutex // one reload at a time (SIGHUP and POST /-/reload)
	reloadOK      prometheus.Gauge
	reloadSuccess prometheus.Gauge
}

// New builds the daemon from a validated configuration; it starts nothing
// (it opens the membership bucket, which does no I/O). Call Run.
func New(cfg Config, deps Deps) (*Daemon, error) {
	if err := cfg.Validate(); err != nil {
		return nil, &ConfigError{Msg: err.Error()}
	}
	if deps.Logger == nil {
		deps.Logger = zap.NewNop()
	}
	if deps.Clock == nil {
		deps.Clock = clock.Real()
	}
	own := buildinfo.Get("")
	if deps.Version != "" {
		deps.Build.Version = deps.Version
	}
	if deps.Build.Version == "" {
		deps.Build.Version = own.Version
	}
	if deps.Build.Revision == "" {
		deps.Build.Revision, deps.Build.Modified = own.Revision, own.Modified
	}
	if deps.Build.GoVersion == "" {
		deps.Build.GoVersion = own.GoVersion
	}
	deps.Version = deps.Build.Version
	reg := deps.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewGoCollector())
	}
	d := &Daemon{deps: deps, logger: deps.Logger.With(zap.String("component", "daemon")), reg: reg, clock: deps.Clock,
		cfg: cfg, discoverKick: make(chan struct{}, 1), started: deps.Clock.Now()}
	tok, err := loadToken(cfg.HTTP)
	if err != nil {
		return nil, err
	}
	d.token.Store(&tok)
	jc := cfg
	d.jobsCfg.Store(&jc)
	d.reloadOK = promauto.With(reg).NewGauge(prometheus.GaugeOpts{Name: "compactord_config_last_reload_successful",
		Help: "1 when the last configuration reload (SIGHUP or POST /-/reload) succeeded, or none was tried since start; 0 after a failed one (the running configuration stays)."})
	d.reloadSuccess = promauto.With(reg).NewGauge(prometheus.GaugeOpts{Name: "compactord_config_last_reload_success_timestamp_seconds",
		Help: "Unix time of the last successful configuration load: start-up or reload."})
	d.reloadOK.Set(1)
	d.reloadSuccess.Set(float64(d.started.UnixMilli()) / 1e3)
	d.storeMetrics = storage.NewMetrics(reg)
	d.commitMetrics = commit.NewMetrics(reg)
	d.conflicts = newConflictMetrics(reg)
	promauto.With(reg).NewGaugeVec(prometheus.GaugeOpts{Name: "compactord_build_info",
		Help: "Always 1; the labels say which build runs: version, the VCS revision (unknown when the build recorded none) and the Go version."},
		[]string{"version", "revision", "goversion"}).WithLabelValues(deps.Build.Version, deps.Build.Revision, deps.Build.GoVersion).Set(1)

	jobs := deps.Jobs
	if jobs == nil {
		jobs = jobSet(func(table string) JobsConfig { return d.jobsCfg.Load().PolicyFor(table).Jobs }, reg)
	}
	sd := scheduler.Deps{Logger: deps.Logger, Registerer: reg, Clock: deps.Clock, Open: d.open, Jobs: jobs}
	if lc := cfg.Scheduler.Lease; lc.Enabled {
		holder := lc.Holder
		if holder == "" {
			holder = lease.DefaultHolder()
		}
		if sd.Leases, err = lease.NewManager(holder, lc.TTL, deps.Clock); err != nil {
			return nil, err
		}
		murl := lc.MembersURL
		if murl == "" {
			murl = cfg.Discover.URL
		}
		if murl != "" {
			b, err := storage.Open(context.Background(), murl)
			if err != nil {
				return nil, &ConfigError{Msg: fmt.Sprintf("lease.members_url: %v", err)}
			}
			d.members = storage.WithMetrics(b, d.storeMetrics)
			if sd.Members, err = lease.NewMembers(d.members, holder, lc.TTL, deps.Clock); err != nil {
				_ = b.Close()
				return nil, err
			}
		}
	}
	if d.sched, err = scheduler.New(cfg.Scheduler, sd); err != nil {
		d.Close()
		return nil, &ConfigError{Msg: err.Error()}
	}
	if missing := missingKinds(jobs); len(missing) > 0 {
		d.logger.Warn("this build has no job for some kinds; they are never scheduled", zap.Strings("kinds", missing))
	}
	return d, nil
}

func missingKinds(jobs map[scheduler.Kind]scheduler.JobFunc) []string {
	var out []string
	for _, k := range scheduler.Kinds {
		if jobs[k] == nil {
			out = append(out, string(k))
		}
	}
	return out
}

// CheckConfig runs the checks New makes on a configuration beyond
// Validate (which Load and Parse already ran), without starting or opening
// anything: `compactord check config` gives the messages start-up gives.
func CheckConfig(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return &ConfigError{Msg: err.Error()}
	}
	_, err := loadToken(cfg.HTTP)
	return err
}

func loadToken(h HTTPConfig) (string, error) {
	if h.AdminTokenFile == "" {
		return h.AdminToken, nil
	}
	data, err := os.ReadFile(h.AdminTokenFile)
	if err != nil {
		return "", &ConfigError{Msg: fmt.Sprintf("http.admin_token_file: cannot read %s: %v", h.AdminTokenFile, errors.Unwrap(err))}
	}
	tok := strings.TrimSpace(string(data))
	if tok == "" {
		return "", &ConfigError{Msg: fmt.Sprintf("http.admin_token_file: %s is empty", h.AdminTokenFile)}
	}
	return tok, nil
}

// Close releases what New opened, for a daemon that is never run.
func (d *Daemon) Close() {
	if d.members != nil {
		_ = d.members.Close()
	}
}

// Scheduler exposes the scheduler (tests, and the HTTP handlers).
// Demo is the running demo workload (nil when the demo is off or has not
// started).
func (d *Daemon) Demo() democfg.Workload {
	if w := d.demo.Load(); w != nil {
		return *w
	}
	return nil
}

func (d *Daemon) Scheduler() *scheduler.Scheduler { return d.sched }

// Registry is the daemon's metrics registry.
func (d *Daemon) Registry() *prometheus.Registry { return d.reg }

// Ready: the first sync of every table and the first discovery scan are
// done, and no shutdown has started.
func (d *Daemon) Ready() bool {
	return d.sched.Ready() && !d.discovering.Load() && !d.draining.Load()
}

// Config returns the running configuration.
func (d *Daemon) Config() Config {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cfg
}

// open opens a table for the scheduler: the bucket is instrumented with the
// shared object-store metrics and the committer with the shared commit
// metrics (jobs.go). A location holding no table yet gets a handle
// too (the jobs find nothing to do until one is created); one holding a
// table of another format is refused.
func (d *Daemon) open(ctx context.Context, spec scheduler.TableSpec) (*scheduler.TableHandle, error) {
	d.mu.Lock()
	cc := d.cfg.Commit
	d.mu.Unlock()
	return d.openTable(ctx, spec, cc)
}

// tableSpecs merges the configured tables, the demo table and the
// discovered ones, each with the schedules of its policy. A configured
// table wins over a discovered one with the same URL or name.
func (d *Daemon) tableSpecs() []scheduler.TableSpec {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []scheduler.TableSpec
	names, urls := map[string]bool{}, map[string]bool{}
	add := func(sp scheduler.TableSpec, origin string) {
		if urls[sp.URL] {
			return
		}
		if names[sp.Name] {
			d.logger.Warn("two tables would share a name; skipping the second (set name: in the config)",
				zap.String("name", sp.Name), zap.String("url", sp.URL), zap.String("origin", origin))
			return
		}
		names[sp.Name], urls[sp.URL] = true, true
		sp.Schedule = d.cfg.tableSchedule(sp.Name)
		out = append(out, sp)
	}
	for _, t := range d.cfg.Tables {
		add(scheduler.TableSpec{Name: t.Name, URL: t.URL}, "tables")
	}
	if d.cfg.Demo.Enabled {
		for _, name := range d.cfg.Demo.Tables {
			add(scheduler.TableSpec{Name: name, URL: d.cfg.Demo.TableURL(name)}, "demo")
		}
	}
	for _, sp := range d.discovered {
		add(sp, "discover")
	}
	return out
}

// Run serves HTTP, schedules jobs, discovers tables and runs the demo
// until ctx is done, then drains (no new jobs, in-flight jobs
// finish or are canceled within the grace period) and returns nil. It
// returns an error when the listener cannot be bound or a job fails
// fatally.
func (d *Daemon) Run(ctx context.Context) error {
	defer d.Close()
	cfg := d.Config()
	if os.Getenv("GOGC") == "" {
		defer debug.SetGCPercent(debug.SetGCPercent(cfg.GCPercent))
	}
	ln, err := net.Listen("tcp", cfg.HTTP.Listen)
	if err != nil {
		return fmt.Errorf("http.listen %s: %w", cfg.HTTP.Listen, err)
	}
	addr := ln.Addr().String()
	d.addr.Store(&addr)
	srv := &http.Server{Handler: d.Handler(), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: zap.NewStdLog(d.logger.With(zap.String("component", "http")))}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()

	if !isLoopback(addr) && *d.token.Load() == "" {
		d.logger.Warn("the admin API is reachable beyond loopback without a bearer token; set http.admin_token_file")
	}

	if cfg.Discover.URL != "" {
		// Not ready until the first scan: set before the scheduler can
		// report its first sync.
		d.discovering.Store(true)
	}
	specs := d.tableSpecs()
	if err := d.sched.SetTables(specs); err != nil {
		return err
	}
	// tables counts what the scheduler runs now (configured and demo);
	// discovery adds its tables after its first scan.
	d.logger.Info("compactord running", zap.String("version", d.deps.Version), zap.String("revision", d.deps.Build.Revision), zap.String("listen", addr),
		zap.String("holder", d.sched.Holder()), zap.Int("tables", len(specs)), zap.Int("configured_tables", len(cfg.Tables)),
		zap.Bool("demo", cfg.Demo.Enabled), zap.String("discover", cfg.Discover.URL))
	schedDone := make(chan error, 1)
	schedCtx, stopSched := context.WithCancel(context.WithoutCancel(ctx))
	defer stopSched()
	go func() { schedDone <- d.sched.Run(schedCtx) }()

	bgCtx, stopBg := context.WithCancel(ctx)
	var bg sync.WaitGroup
	if cfg.Discover.URL != "" {
		bg.Go(func() { d.discoverLoop(bgCtx) })
	}
	if cfg.Demo.Enabled {
		// The demo writes as an outside service would: it opens its tables
		// itself (the daemon watches them as it watches any table).
		var w democfg.Workload
		err := errors.New("this daemon was built without the demo writer")
		if d.deps.Demo != nil {
			w, err = d.deps.Demo(cfg.Demo, d.deps.Logger)
		}
		if err != nil {
			d.logger.Error("demo workload", zap.Error(err))
		} else {
			d.demo.Store(&w)
			bg.Go(func() { _ = w.Run(bgCtx) })
		}
	}

	var fatal error
	schedStopped := false
	select {
	case <-ctx.Done():
		d.logger.Info("shutdown requested: draining", zap.NamedError("cause", context.Cause(ctx)))
	case err := <-schedDone:
		schedStopped = true
		fatal = err
	case err := <-serveErr:
		fatal = fmt.Errorf("http server: %w", err)
	}
	d.draining.Store(true)
	stopBg()
	bg.Wait()
	stopSched()
	if !schedStopped {
		if err := <-schedDone; err != nil && fatal == nil {
			fatal = err
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	if fatal != nil {
		d.logger.Error("compactord stopped by an error", zap.Error(fatal))
		return fatal
	}
	d.logger.Info("compactord stopped cleanly")
	return nil
}

func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ReloadResult is what a reload applied.
type ReloadResult struct {
	// Tables is the tables the scheduler runs after it: configured, demo
	// and discovered (a discovery config lists none of its own).
	Tables int `json:"tables"`
	// NeedRestart names the changed settings the reload could not apply.
	NeedRestart []string `json:"need_restart,omitempty"`
}

// Reload reads the configuration again and applies what can change
// without a restart: tables, discovery, schedules, limits, the retry
// policy, job settings, the admin token and the log level. On error the
// running configuration stays.
func (d *Daemon) Reload() error {
	_, err := d.ReloadReport()
	return err
}

// ReloadReport is Reload, saying what it applied and what needs a
// restart.
func (d *Daemon) ReloadReport() (ReloadResult, error) {
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	res, err := d.reload()
	if err != nil {
		d.reloadOK.Set(0)
		return res, err
	}
	d.reloadOK.Set(1)
	d.reloadSuccess.Set(float64(d.clock.Now().UnixMilli()) / 1e3)
	return res, nil
}

func (d *Daemon) reload() (ReloadResult, error) {
	var res ReloadResult
	if d.deps.Reload == nil {
		return res, errors.New("reload: no configuration source")
	}
	cfg, err := d.deps.Reload()
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		d.logger.Error("reload failed; keeping the running configuration", zap.Error(err))
		return res, err
	}
	tok, err := loadToken(cfg.HTTP)
	if err != nil {
		d.logger.Error("reload failed; keeping the running configuration", zap.Error(err))
		return res, err
	}
	if err := d.sched.Reconfigure(cfg.Scheduler); err != nil {
		d.logger.Error("reload failed; keeping the running configuration", zap.Error(err))
		return res, err
	}
	d.mu.Lock()
	old := d.cfg
	d.cfg = cfg
	if cfg.Discover.URL == "" {
		d.discovered = nil
	}
	d.mu.Unlock()
	d.token.Store(&tok)
	jc := cfg
	d.jobsCfg.Store(&jc)
	if d.deps.Level != nil {
		_ = d.deps.Level.UnmarshalText([]byte(cfg.Log.Level))
	}
	var restart []string
	if old.HTTP.Listen != cfg.HTTP.Listen {
		restart = append(restart, "http.listen")
	}
	if old.Log.Format != cfg.Log.Format {
		restart = append(restart, "log.format")
	}
	if old.Scheduler.Lease != cfg.Scheduler.Lease {
		restart = append(restart, "lease")
	}
	if old.Commit != cfg.Commit {
		restart = append(restart, "commit (tables opened from now on use the new settings)")
	}
	if !equalDemo(old.Demo, cfg.Demo) {
		restart = append(restart, "demo")
	}
	if (old.Discover.URL == "") != (cfg.Discover.URL == "") {
		restart = append(restart, "discover (turning discovery on or off)")
	}
	specs := d.tableSpecs()
	if err := d.sched.SetTables(specs); err != nil {
		d.logger.Error("reload: tables", zap.Error(err))
		return res, err
	}
	select {
	case d.discoverKick <- struct{}{}:
	default:
	}
	// The tables the scheduler runs, not only the configured ones: with
	// discovery the file lists none.
	res = ReloadResult{Tables: len(specs), NeedRestart: restart}
	fields := []zap.Field{zap.Int("tables", res.Tables), zap.Int("configured_tables", len(cfg.Tables))}
	if len(restart) > 0 {
		fields = append(fields, zap.Strings("need_restart", restart))
	}
	d.logger.Info("configuration reloaded", fields...)
	return res, nil
}

func equalDemo(a, b democfg.Config) bool { return reflect.DeepEqual(a, b) }
