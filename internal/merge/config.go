package merge

import (
	"fmt"
	"math"
)

// Config is merge's settings: jobs.merge in the daemon's configuration and
// the flags of `compactord merge`, both built from DefaultConfig.
type Config struct {
	// MaxGenerations bounds the generations one merge commit lands per
	// shard, and with them its memory; the rest land in further commits.
	// 0: all pending in one commit.
	MaxGenerations int `yaml:"max_generations"`
}

// DefaultConfig is merge's defaults, the only place they are set.
func DefaultConfig() Config { return Config{MaxGenerations: 16} }

// Validate checks the config. A message starts with the setting's key.
func (c Config) Validate() error {
	if c.MaxGenerations < 0 {
		return fmt.Errorf("max_generations must not be negative, got %d", c.MaxGenerations)
	}
	return nil
}

// Env is the planning environment the config gives for shard ("" for
// every shard).
func (c Config) Env(shard string) Env {
	env := Env{MaxGenerations: c.MaxGenerations, Shard: shard}
	if env.MaxGenerations == 0 {
		env.MaxGenerations = math.MaxInt32 // no bound
	}
	return env
}
