package daemon

import (
	"fmt"
	"path"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/compactord/compactord/internal/cleanup"
	"github.com/compactord/compactord/internal/scheduler"
)

// Per-table policy, after Mimir's per-tenant overrides: the top-level
// schedule and jobs sections are the defaults of every table, and each
// entry of `overrides:` replaces some of them for the tables its match
// names. A table gets at most one override, so that what applies can be
// read off one block:
//
//   - an entry whose match is the table's name exactly wins;
//   - else the first entry, in file order, whose match is a glob
//     (path.Match: *, ?, [...]) matching the name.
//
// A key the override leaves out keeps the defaults' value. Only the keys
// of PolicyOverride may be overridden: the ones that are a property of
// a table (schedules, thresholds, retention, remap mode), not of the
// process (concurrency, memory budget).

// PolicyOverride is one entry of `overrides:`. Every leaf is a pointer:
// nil leaves the defaults' value.
type PolicyOverride struct {
	// Match is a table name, or a glob over table names (a discovered
	// table is named after its folder, with '.' between path segments).
	Match    string         `yaml:"match"`
	Schedule PolicySchedule `yaml:"schedule"`
	Jobs     PolicyJobs     `yaml:"jobs"`
}

// PolicySchedule overrides schedule.<kind>; "off" turns a kind off for
// the matched tables.
type PolicySchedule struct {
	Merge   *string `yaml:"merge"`
	Compact *string `yaml:"compact"`
	Index   *string `yaml:"index"`
	Trim    *string `yaml:"trim"`
	Cleanup *string `yaml:"cleanup"`
}

// PolicyJobs are the job settings a table may override; the keys are the
// jobs sections' own (TestPolicyKeysExist keeps them so).
type PolicyJobs struct {
	Merge   PolicyMerge   `yaml:"merge"`
	Compact PolicyCompact `yaml:"compact"`
	Index   PolicyIndex   `yaml:"index"`
	Trim    PolicyTrim    `yaml:"trim"`
	Cleanup PolicyCleanup `yaml:"cleanup"`
}

// PolicyMerge overrides jobs.merge.
type PolicyMerge struct {
	MaxGenerations *int `yaml:"max_generations"`
}

// PolicyCompact overrides jobs.compact: thresholds and remap mode.
type PolicyCompact struct {
	TargetRowsPerFragment *uint64  `yaml:"target_rows_per_fragment"`
	DeletionThreshold     *float64 `yaml:"deletion_threshold"`
	InlineRemap           *bool    `yaml:"inline_remap"`
}

// PolicyIndex overrides jobs.index's rebuild threshold.
type PolicyIndex struct {
	RebuildSegmentsOver *int `yaml:"rebuild_segments_over"`
}

// PolicyTrim overrides jobs.trim.
type PolicyTrim struct {
	ReaderGrace        *time.Duration `yaml:"reader_grace"`
	KeepShardManifests *int           `yaml:"keep_shard_manifests"`
}

// PolicyCleanup overrides jobs.cleanup's retention.
type PolicyCleanup struct {
	RetainVersions              *int           `yaml:"retain_versions"`
	OlderThan                   *time.Duration `yaml:"older_than"`
	MinAge                      *time.Duration `yaml:"min_age"`
	AllowDeletingInFlightWrites *bool          `yaml:"allow_deleting_in_flight_writes"`
}

// PolicyValue is one setting of a table's effective policy and where it
// came from: "default" (built in), "config" (the file's defaults block)
// or the override, as `overrides[N] (match "PATTERN")`.
type PolicyValue struct {
	Key    string `json:"key"`
	Value  any    `json:"value"`
	Source string `json:"source"`
}

// Policy is a table's effective policy.
type Policy struct {
	Table string `json:"table"`
	// Override names the override that applies ("" for none).
	Override string              `json:"override,omitempty"`
	Schedule scheduler.Schedules `json:"-"`
	Jobs     JobsConfig          `json:"-"`
	// Values lists every overridable setting in PolicyOverride's order.
	Values []PolicyValue `json:"values"`
}

// policyLeaf is one overridable key: its path (as in the file) and the
// field indexes leading to it in PolicyOverride.
type policyLeaf struct {
	key   string
	index []int
}

// policyLeaves walks PolicyOverride once.
var policyLeaves = func() []policyLeaf {
	var out []policyLeaf
	var walk func(t reflect.Type, prefix string, index []int)
	walk = func(t reflect.Type, prefix string, index []int) {
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			idx := append(slices.Clone(index), i)
			switch {
			case f.Type.Kind() == reflect.Pointer:
				out = append(out, policyLeaf{key: join(prefix, name), index: idx})
			case f.Type.Kind() == reflect.Struct:
				walk(f.Type, join(prefix, name), idx)
			}
		}
	}
	walk(reflect.TypeOf(PolicyOverride{}), "", nil)
	return out
}()

// PolicyKeys lists the keys an override may set, as in the file
// ("schedule.compact", "jobs.cleanup.min_age", ...).
func PolicyKeys() []string {
	out := make([]string, len(policyLeaves))
	for i, l := range policyLeaves {
		out[i] = l.key
	}
	return out
}

// configField finds the field of the configuration at a key path,
// following inline fields as the YAML decoder does.
func configField(v reflect.Value, key string) (reflect.Value, bool) {
	for seg := range strings.SplitSeq(key, ".") {
		f, ok := fieldByYAML(v, seg)
		if !ok {
			return reflect.Value{}, false
		}
		v = f
	}
	return v, true
}

func fieldByYAML(v reflect.Value, name string) (reflect.Value, bool) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if slices.Contains(strings.Split(opts, ","), "inline") && f.Type.Kind() == reflect.Struct {
			if fv, ok := fieldByYAML(v.Field(i), name); ok {
				return fv, true
			}
			continue
		}
		if tag == "" {
			tag = strings.ToLower(f.Name)
		}
		if tag == name {
			return v.Field(i), true
		}
	}
	return reflect.Value{}, false
}

// describe names an override for messages and the API.
func (c *Config) describe(i int) string {
	return fmt.Sprintf("overrides[%d] (match %q)", i, c.TableOverrides[i].Match)
}

// overrideFor is the index of the override that applies to a table, or
// -1: an exact match wins, else the first glob in file order.
func (c *Config) overrideFor(table string) int {
	glob := -1
	for i, o := range c.TableOverrides {
		if o.Match == table {
			return i
		}
		if glob < 0 && isGlob(o.Match) {
			if ok, _ := path.Match(o.Match, table); ok {
				glob = i
			}
		}
	}
	return glob
}

func isGlob(p string) bool { return strings.ContainsAny(p, `*?[\`) }

// PolicyFor is a table's effective policy: the defaults block with the
// table's override, if any, laid over it.
func (c *Config) PolicyFor(table string) Policy {
	p := Policy{Table: table}
	eff := *c // the leaves are values; the override writes only them
	ev := reflect.ValueOf(&eff).Elem()
	i := c.overrideFor(table)
	var ov reflect.Value
	if i >= 0 {
		p.Override = c.describe(i)
		ov = reflect.ValueOf(c.TableOverrides[i])
	}
	for _, l := range policyLeaves {
		dst, ok := configField(ev, l.key)
		if !ok {
			continue // TestPolicyKeysExist fails first
		}
		src := "default"
		if c.fileKeys[l.key] {
			src = "config"
		}
		if ov.IsValid() {
			if o := ov.FieldByIndex(l.index); !o.IsNil() {
				dst.Set(o.Elem())
				src = p.Override
			}
		}
		val := dst.Interface()
		if d, ok := val.(time.Duration); ok {
			val = d.String()
		}
		p.Values = append(p.Values, PolicyValue{Key: l.key, Value: val, Source: src})
	}
	p.Schedule, p.Jobs = eff.Scheduler.Schedule, eff.Jobs
	return p
}

// tableSchedule is the schedule a table's override sets, kind by kind
// (empty: the configuration's), for the scheduler's TableSpec. Kinds the
// override leaves out stay empty so that a reload changing the defaults
// reaches them.
func (c *Config) tableSchedule(table string) scheduler.Schedules {
	i := c.overrideFor(table)
	if i < 0 {
		return scheduler.Schedules{}
	}
	s := c.TableOverrides[i].Schedule
	get := func(p *string) string {
		if p == nil {
			return ""
		}
		if v := strings.TrimSpace(*p); v != "" {
			return v
		}
		return "off"
	}
	return scheduler.Schedules{Merge: get(s.Merge), Compact: get(s.Compact), Index: get(s.Index), Trim: get(s.Trim), Cleanup: get(s.Cleanup)}
}

// validateOverrides checks each override as the defaults are checked, on
// the policy it makes, and the floor rule: an override that takes min_age
// or older_than below cleanup's floor must itself set
// allow_deleting_in_flight_writes: true. The defaults' own does not
// carry over, so that widening a glob never loosens the floor for tables
// nobody looked at.
func (c *Config) validateOverrides() error {
	exact := map[string]int{}
	for i, o := range c.TableOverrides {
		key := fmt.Sprintf("overrides[%d]", i)
		if strings.TrimSpace(o.Match) == "" {
			return fmt.Errorf("%s.match: missing (a table name, or a glob such as \"logs.*\")", key)
		}
		if _, err := path.Match(o.Match, ""); err != nil {
			return fmt.Errorf("%s.match: %q is not a valid glob: %v", key, o.Match, err)
		}
		if j, dup := exact[o.Match]; dup {
			return fmt.Errorf("%s.match: %q is also overrides[%d]; a table gets one override, so merge the two", key, o.Match, j)
		}
		exact[o.Match] = i
		// The policy this override makes, whatever table it matches.
		p := c.policyOf(i)
		for _, k := range scheduler.Kinds {
			if _, err := scheduler.ParseSchedule(p.Schedule.Get(k)); err != nil {
				return fmt.Errorf("%s.schedule.%s: %v", key, k, err)
			}
		}
		if err := p.Jobs.Merge.Validate(); err != nil {
			return fmt.Errorf("%s.jobs.merge: %w", key, err)
		}
		if err := p.Jobs.Compact.Validate(); err != nil {
			return fmt.Errorf("%s.jobs.compact: %w", key, err)
		}
		if err := p.Jobs.Index.Validate(); err != nil {
			return fmt.Errorf("%s.jobs.index: %w", key, err)
		}
		if err := p.Jobs.Trim.Validate(); err != nil {
			return fmt.Errorf("%s.jobs.trim: %w", key, err)
		}
		if err := p.Jobs.Cleanup.Validate(); err != nil {
			return fmt.Errorf("%s.jobs.cleanup: %w", key, err)
		}
		cl := o.Jobs.Cleanup
		if cl.AllowDeletingInFlightWrites == nil || !*cl.AllowDeletingInFlightWrites {
			if cl.MinAge != nil && *cl.MinAge < cleanup.InFlightFloor {
				return fmt.Errorf("%s.jobs.cleanup.min_age: %s is below the floor of %s: writers' files are unreferenced until their commits land, so cleanup would delete files of appends in flight; raise it, or set allow_deleting_in_flight_writes: true in this override to accept that (the defaults' setting does not carry over to an override)",
					key, *cl.MinAge, cleanup.InFlightFloor)
			}
			if cl.OlderThan != nil && *cl.OlderThan < cleanup.InFlightFloor {
				return fmt.Errorf("%s.jobs.cleanup.older_than: %s is below the floor of %s: a LanceDB writer checks its commit for conflicts only against the versions still there, so cleanup would remove a version a transaction in flight must see; raise it, or set allow_deleting_in_flight_writes: true in this override to accept that (the defaults' setting does not carry over to an override)",
					key, *cl.OlderThan, cleanup.InFlightFloor)
			}
		}
		if err := p.Jobs.Cleanup.ValidateFloor(); err != nil {
			return fmt.Errorf("%s.jobs.cleanup: %w", key, err)
		}
	}
	return nil
}

// policyOf is the policy override i makes (for validation: the table's
// name plays no part once the override is chosen).
func (c *Config) policyOf(i int) Policy {
	one := *c
	one.TableOverrides = []PolicyOverride{c.TableOverrides[i]}
	one.TableOverrides[0].Match = "\x00policy"
	return one.PolicyFor("\x00policy")
}
