// Package democfg is the configuration of the demo workload (internal/demo)
// and the interface the daemon runs it through. The daemon's configuration
// embeds it; the workload itself, a MemWAL writer, is linked only by the
// command that wires it in (the CLI's run), not by the daemon package.
package democfg

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"
)

// BaseKeyStart separates the keys the demo appends to the base table from
// the MemWAL's key space (Config.KeySpace stays below it).
const BaseKeyStart = 1_000_000

// Workload is a running demo workload.
type Workload interface {
	// Run writes until ctx is done.
	Run(ctx context.Context) error
}

// Starter builds a workload from its configuration.
type Starter func(cfg Config, logger *zap.Logger) (Workload, error)

// Config of the demo workload.
type Config struct {
	Enabled bool `yaml:"enabled"`
	// URL is the demo's database directory (a bare path is relative to
	// the working directory): table <name> is <url>/<name>.lance, which
	// LanceDB opens as table <name> of the database <url>. The daemon
	// watches each table.
	URL    string   `yaml:"url"`
	Tables []string `yaml:"tables"`
	// Shards is the number of MemWAL buckets of each table (1: unsharded).
	Shards int `yaml:"shards"`
	// KeySpace: MemWAL records use keys in [0, KeySpace), so upserts
	// replace earlier rows and deletes hit live keys.
	KeySpace int64 `yaml:"key_space"`
	// Every WriteInterval, BatchSize records per table go to the shards'
	// WALs, a DeleteFraction of them deletes.
	WriteInterval  time.Duration `yaml:"write_interval"`
	BatchSize      int           `yaml:"batch_size"`
	DeleteFraction float64       `yaml:"delete_fraction"`
	// FlushInterval: each writer flushes its MemTable into a generation.
	FlushInterval time.Duration `yaml:"flush_interval"`
	// Every BaseInterval, BaseRows rows are appended to each base table as
	// a new fragment, and the oldest demo-appended fragment beyond the
	// newest two is deleted.
	BaseInterval time.Duration `yaml:"base_interval"`
	BaseRows     int           `yaml:"base_rows"`
	Seed         uint64        `yaml:"seed"`
}

// DefaultConfig: off; when on, one table at a modest rate (100 records/s).
func DefaultConfig() Config {
	return Config{
		URL: "var/compactord-demo", Tables: []string{"demo"}, Shards: 2, KeySpace: 5000,
		WriteInterval: 200 * time.Millisecond, BatchSize: 20, DeleteFraction: 0.1,
		FlushInterval: 5 * time.Second, BaseInterval: 7 * time.Second, BaseRows: 200, Seed: 1,
	}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if !c.Enabled {
		return nil
	}
	switch {
	case c.URL == "":
		return errors.New("demo.url: missing")
	case len(c.Tables) == 0:
		return errors.New("demo.tables: give at least one table")
	case c.Shards < 1 || c.Shards > 1024:
		return fmt.Errorf("demo.shards must be in [1, 1024], got %d", c.Shards)
	case c.KeySpace < 1 || c.KeySpace >= BaseKeyStart:
		return fmt.Errorf("demo.key_space must be in [1, %d), got %d", BaseKeyStart, c.KeySpace)
	case c.WriteInterval <= 0 || c.FlushInterval <= 0 || c.BaseInterval <= 0:
		return errors.New("demo: write_interval, flush_interval and base_interval must be positive")
	case c.BatchSize < 1 || c.BaseRows < 1:
		return errors.New("demo: batch_size and base_rows must be at least 1")
	case c.DeleteFraction < 0 || c.DeleteFraction > 1:
		return fmt.Errorf("demo.delete_fraction must be in [0, 1], got %v", c.DeleteFraction)
	}
	seen := map[string]bool{}
	for _, n := range c.Tables {
		if n == "" || strings.ContainsAny(n, "/\\ ") || strings.HasPrefix(n, ".") {
			return fmt.Errorf("demo.tables: %q is not a table name", n)
		}
		if seen[n] {
			return fmt.Errorf("demo.tables: %q twice", n)
		}
		seen[n] = true
	}
	return nil
}

// TableURL is the URL of demo table name.
func (c Config) TableURL(name string) string {
	return strings.TrimSuffix(c.URL, "/") + "/" + name + ".lance"
}
