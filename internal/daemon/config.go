// Package daemon wires `compactord run`: it loads the configuration, builds
// one metrics registry and the scheduler with the real jobs, serves the
// HTTP endpoints and the status page, discovers tables, runs the demo
// workload when asked, and handles reload and shutdown. The decisions live
// in internal/scheduler; this package only connects things.
package daemon

import (
	"fmt"
	"net"
	"net/url"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/compactord/compactord/internal/cleanup"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/compact"
	"github.com/compactord/compactord/internal/demo/democfg"
	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/merge"
	"github.com/compactord/compactord/internal/scheduler"
	"github.com/compactord/compactord/internal/trim"
)

// Config is the whole daemon configuration (configs/compactord.yaml
// documents every key). The scheduler's keys (workers, schedule, timeouts,
// poll_interval, ...) sit at the top level.
type Config struct {
	Scheduler scheduler.Config `yaml:",inline"`
	Log       LogConfig        `yaml:"log"`
	HTTP      HTTPConfig       `yaml:"http"`
	// Tables are watched by URL. Discover adds the tables found under a
	// prefix; both may be used.
	Tables   []TableConfig  `yaml:"tables"`
	Discover DiscoverConfig `yaml:"discover"`
	Commit   commit.Config  `yaml:"commit"`
	Jobs     JobsConfig     `yaml:"jobs"`
	Demo     democfg.Config `yaml:"demo"`
	// GCPercent is the Go garbage collector's target (GOGC) for the
	// daemon. An idle daemon's heap is mostly metric series, and the
	// default of 100 lets it grow to twice its live size; a lower target
	// trades a little CPU for memory. The GOGC environment variable wins.
	GCPercent int `yaml:"gc_percent"`
	// TableOverrides replace some of the schedule and jobs settings for
	// the tables they match (policy.go); the top-level sections are every
	// table's defaults.
	TableOverrides []PolicyOverride `yaml:"overrides"`

	// fileKeys are the key paths the file set (Parse), so that a table's
	// policy can say whether a value is built in or configured.
	fileKeys map[string]bool
}

// LogConfig configures logging.
type LogConfig struct {
	// Level is debug, info, warn or error.
	Level string `yaml:"level"`
	// Format is json (the default) or console.
	Format string `yaml:"format"`
}

// HTTPConfig configures the HTTP server.
type HTTPConfig struct {
	// Listen is host:port. The default binds to loopback only.
	Listen string `yaml:"listen"`
	// AdminToken, when set, is the bearer token the admin API (every POST)
	// requires. Prefer AdminTokenFile, which keeps it out of the config.
	AdminToken     string `yaml:"admin_token"`
	AdminTokenFile string `yaml:"admin_token_file"`
}

// TableConfig names one table.
type TableConfig struct {
	URL string `yaml:"url"`
	// Name defaults to the last segment of the URL path.
	Name string `yaml:"name"`
}

// DiscoverConfig finds tables under a prefix: every folder holding a
// `_versions/` folder is a table.
type DiscoverConfig struct {
	URL string `yaml:"url"`
	// Interval between scans. A scan lists every key under the prefix, so
	// keep it long for large buckets.
	Interval time.Duration `yaml:"interval"`
}

// JobsConfig holds each job's own settings. Each job package owns its
// Config: the YAML keys, the defaults and the validation; the command
// line registers its flags from the same Config.
type JobsConfig struct {
	Merge   merge.Config   `yaml:"merge"`
	Compact compact.Config `yaml:"compact"`
	Index   index.Config   `yaml:"index"`
	Trim    trim.Config    `yaml:"trim"`
	Cleanup cleanup.Config `yaml:"cleanup"`
}

// DefaultConfig assembles the defaults: each component's come from its
// package (scheduler, commit, the jobs, demo), so they are set once; only
// the daemon's own (log, HTTP, discovery, GC target) are set here.
func DefaultConfig() Config {
	return Config{
		Scheduler: scheduler.DefaultConfig(),
		Log:       LogConfig{Level: "info", Format: "json"},
		HTTP:      HTTPConfig{Listen: "127.0.0.1:9464"},
		Discover:  DiscoverConfig{Interval: 5 * time.Minute},
		Commit:    commit.DefaultConfig(),
		Jobs: JobsConfig{
			Merge:   merge.DefaultConfig(),
			Compact: compact.DefaultConfig(),
			Index:   index.DefaultConfig(),
			Trim:    trim.DefaultConfig(),
			Cleanup: cleanup.DefaultConfig(),
		},
		Demo:      democfg.DefaultConfig(),
		GCPercent: 50,
	}
}

// Validate checks the configuration. Every message starts with the key
// path it is about, so that Load can point at the line.
func (c *Config) Validate() error {
	if err := c.Scheduler.Validate(); err != nil {
		return err
	}
	if err := c.ValidateLog(); err != nil {
		return err
	}
	if c.GCPercent < 10 {
		return fmt.Errorf("gc_percent must be at least 10, got %d", c.GCPercent)
	}
	if err := validateListen(c.HTTP.Listen); err != nil {
		return fmt.Errorf("http.listen: %v", err)
	}
	if c.HTTP.AdminToken != "" && c.HTTP.AdminTokenFile != "" {
		return fmt.Errorf("http.admin_token_file: set either admin_token or admin_token_file, not both")
	}
	names := map[string]int{}
	urls := map[string]int{}
	for i := range c.Tables {
		t := &c.Tables[i]
		key := fmt.Sprintf("tables[%d]", i)
		if t.URL == "" {
			return fmt.Errorf("%s.url: missing", key)
		}
		u, err := NormalizeURL(t.URL)
		if err != nil {
			return fmt.Errorf("%s.url: %v", key, err)
		}
		t.URL = u
		if t.Name == "" {
			t.Name = NameFromURL(u)
		}
		if err := ValidateTableName(t.Name); err != nil {
			return fmt.Errorf("%s.name: %v", key, err)
		}
		if j, dup := urls[t.URL]; dup {
			return fmt.Errorf("%s.url: duplicate table %s (also tables[%d])", key, t.URL, j)
		}
		if j, dup := names[t.Name]; dup {
			return fmt.Errorf("%s.name: duplicate table name %q (also tables[%d]); set name: to tell them apart", key, t.Name, j)
		}
		urls[t.URL], names[t.Name] = i, i
	}
	if c.Discover.URL != "" {
		u, err := NormalizeURL(c.Discover.URL)
		if err != nil {
			return fmt.Errorf("discover.url: %v", err)
		}
		c.Discover.URL = u
		if c.Discover.Interval <= 0 {
			return fmt.Errorf("discover.interval must be positive, got %s", c.Discover.Interval)
		}
	}
	if c.Scheduler.Lease.MembersURL != "" {
		u, err := NormalizeURL(c.Scheduler.Lease.MembersURL)
		if err != nil {
			return fmt.Errorf("lease.members_url: %v", err)
		}
		c.Scheduler.Lease.MembersURL = u
	}
	if err := c.Commit.Validate(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if err := c.Jobs.Merge.Validate(); err != nil {
		return fmt.Errorf("jobs.merge: %w", err)
	}
	if err := c.Jobs.Index.Validate(); err != nil {
		return fmt.Errorf("jobs.index: %w", err)
	}
	if err := c.Jobs.Trim.Validate(); err != nil {
		return fmt.Errorf("jobs.trim: %w", err)
	}
	if err := c.Jobs.Cleanup.Validate(); err != nil {
		return fmt.Errorf("jobs.cleanup: %w", err)
	}
	if err := c.Jobs.Cleanup.ValidateFloor(); err != nil {
		return fmt.Errorf("jobs.cleanup: %w", err)
	}
	if err := c.Jobs.Compact.Validate(); err != nil {
		return fmt.Errorf("jobs.compact: %w", err)
	}
	if c.Demo.Enabled {
		u, err := NormalizeURL(c.Demo.URL)
		if err != nil {
			return fmt.Errorf("demo.url: %v", err)
		}
		c.Demo.URL = u
	}
	if err := c.Demo.Validate(); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	return c.validateOverrides()
}

// ValidateLog checks the log section (the one-shot commands' --log-level
// and --log-format use it too).
func (c *Config) ValidateLog() error {
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("log.level: %q is not one of debug, info, warn, error", c.Log.Level)
	}
	switch c.Log.Format {
	case "json", "console":
	default:
		return fmt.Errorf("log.format: %q is not one of json, console", c.Log.Format)
	}
	return nil
}

// validateListen checks a listen address as far as can be done without
// binding it: host:port, with a port from 0 to 65535 (or a service name
// the system knows).
func validateListen(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port: %v", addr, err)
	}
	if port == "" {
		return fmt.Errorf("%q has no port (write host:port; :0 picks a free one)", addr)
	}
	if n, err := strconv.ParseInt(port, 10, 64); err == nil {
		if n < 0 || n > 65535 {
			return fmt.Errorf("%q: port %d is out of range (0 to 65535)", addr, n)
		}
		return nil
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return fmt.Errorf("%q: port %q is neither a number from 0 to 65535 nor a known service", addr, port)
	}
	return nil
}

// NormalizeURL checks a table URL and turns a bare path (absolute or
// relative to the working directory) into a file:// URL.
func NormalizeURL(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return "", fmt.Errorf("empty URL")
	}
	if !strings.Contains(raw, "://") {
		abs, err := filepath.Abs(raw)
		if err != nil {
			return "", err
		}
		return "file://" + filepath.ToSlash(abs), nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("bad URL %q: %v", raw, err)
	}
	switch u.Scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return "", fmt.Errorf("bad URL %q: file URLs need an absolute path (file:///dir) or a bare path", raw)
		}
		if !strings.HasPrefix(u.Path, "/") {
			return "", fmt.Errorf("bad URL %q: file URLs need an absolute path (file:///dir) or a bare path", raw)
		}
	case "mem":
	case "s3", "gs", "azblob":
		if u.Host == "" {
			return "", fmt.Errorf("bad URL %q: no bucket name", raw)
		}
	default:
		return "", fmt.Errorf("bad URL %q: unsupported scheme %q (want file, mem, s3, gs or azblob)", raw, u.Scheme)
	}
	return raw, nil
}

// NameFromURL is the default table name: the last path segment (without
// a Lance dataset's .lance suffix), else the host, made safe for metric
// labels and URL paths.
func NameFromURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return sanitizeName(raw)
	}
	name := strings.TrimSuffix(path.Base(strings.TrimRight(u.Path, "/")), ".lance")
	if name == "." || name == "/" || name == "" {
		name = u.Host
	}
	return sanitizeName(name)
}

func sanitizeName(s string) string {
	var b strings.Builder
	for _, c := range s {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' {
			b.WriteRune(c)
		} else {
			b.WriteByte('_')
		}
	}
	out := strings.TrimLeft(b.String(), ".")
	if out == "" {
		return "table"
	}
	if len(out) > 128 {
		out = out[:128]
	}
	return out
}

// ValidateTableName: a table name is one URL path segment and a label
// value.
func ValidateTableName(s string) error {
	if s == "" || len(s) > 128 || s[0] == '.' {
		return fmt.Errorf("table name %q: want 1 to 128 characters, not starting with '.'", s)
	}
	if sanitizeName(s) != s {
		return fmt.Errorf("table name %q: only letters, digits, '-', '_' and '.' are allowed", s)
	}
	return nil
}

// Overrides are command-line flags that win over the file. Zero fields
// leave the file's value.
type Overrides struct {
	Listen         string
	LogLevel       string
	LogFormat      string
	Tables         []string
	Discover       string
	Workers        int
	AdminTokenFile string
	LeaseHolder    string
	Demo           *bool
}

// Apply writes the overrides into c (before Validate).
func (o Overrides) Apply(c *Config) {
	if o.Listen != "" {
		c.HTTP.Listen = o.Listen
	}
	if o.LogLevel != "" {
		c.Log.Level = o.LogLevel
	}
	if o.LogFormat != "" {
		c.Log.Format = o.LogFormat
	}
	for _, t := range o.Tables {
		c.Tables = append(c.Tables, TableConfig{URL: t})
	}
	if o.Discover != "" {
		c.Discover.URL = o.Discover
	}
	if o.Workers != 0 {
		c.Scheduler.Workers = o.Workers
	}
	if o.AdminTokenFile != "" {
		c.HTTP.AdminToken, c.HTTP.AdminTokenFile = "", o.AdminTokenFile
	}
	if o.LeaseHolder != "" {
		c.Scheduler.Lease.Holder = o.LeaseHolder
	}
	if o.Demo != nil {
		c.Demo.Enabled = *o.Demo
	}
}
