package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// ConfigError is a configuration problem: the file, the line when known,
// and one sentence. The run command exits 2 on it.
type ConfigError struct {
	File string
	Line int
	Msg  string
}

func (e *ConfigError) Error() string {
	switch {
	case e.File != "" && e.Line > 0:
		return fmt.Sprintf("config %s:%d: %s", e.File, e.Line, e.Msg)
	case e.File != "":
		return fmt.Sprintf("config %s: %s", e.File, e.Msg)
	}
	return "config: " + e.Msg
}

// Load reads a configuration file on top of the defaults, applies the
// overrides and validates the result.
func Load(file string, o Overrides) (Config, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return Config{}, &ConfigError{File: file, Msg: fmt.Sprintf("cannot read: %v", errors.Unwrap(err))}
	}
	return Parse(data, file, o)
}

// Parse decodes YAML strictly: an unknown key, a value of the wrong type
// or a malformed duration is an error naming the key and its line.
func Parse(data []byte, file string, o Overrides) (Config, error) {
	cfg := DefaultConfig()
	lines := map[string]int{}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return Config{}, yamlError(file, err)
	}
	if len(root.Content) > 0 {
		// Check the keys and scalar types against the struct first: the
		// decoder's own messages name Go types, not the keys a user wrote.
		if err := checkNode(root.Content[0], reflect.TypeOf(cfg), "", lines); err != nil {
			err.File = file
			return Config{}, err
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
			return Config{}, yamlError(file, err)
		}
	}
	cfg.fileKeys = make(map[string]bool, len(lines))
	for k := range lines {
		cfg.fileKeys[k] = true
	}
	o.Apply(&cfg)
	if err := cfg.Validate(); err != nil {
		return Config{}, &ConfigError{File: file, Line: lineFor(err.Error(), lines), Msg: err.Error()}
	}
	return cfg, nil
}

var yamlLine = regexp.MustCompile(`line (\d+): `)

func yamlError(file string, err error) *ConfigError {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	msg = strings.ReplaceAll(strings.TrimPrefix(msg, "unmarshal errors:\n"), "\n", "; ")
	msg = strings.TrimSpace(msg)
	line := 0
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = strings.Replace(msg, m[0], "", 1)
	}
	return &ConfigError{File: file, Line: line, Msg: msg}
}

// lineFor finds the line of the longest key path that starts msg.
func lineFor(msg string, lines map[string]int) int {
	best, line := -1, 0
	for p, l := range lines {
		if strings.HasPrefix(msg, p) && len(p) > best {
			rest := msg[len(p):]
			if rest == "" || strings.ContainsAny(rest[:1], ": .[") {
				best, line = len(p), l
			}
		}
	}
	return line
}

var durationType = reflect.TypeOf(time.Duration(0))

// yamlFields maps the YAML keys of a struct to their field types, following
// inline fields.
func yamlFields(t reflect.Type, out map[string]reflect.Type) {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if slices.Contains(strings.Split(opts, ","), "inline") {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				yamlFields(ft, out)
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f.Type
	}
}

func join(p, k string) string {
	if p == "" {
		return k
	}
	return p + "." + k
}

// checkNode walks n against type t, recording each key path's line.
func checkNode(n *yaml.Node, t reflect.Type, p string, lines map[string]int) *ConfigError {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Tag == "!!null" {
		return nil
	}
	bad := func(format string, args ...any) *ConfigError {
		return &ConfigError{Line: n.Line, Msg: fmt.Sprintf(format, args...)}
	}
	what := p
	if what == "" {
		what = "the top level"
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return bad("%s must be a mapping of keys to values", what)
		}
		fields := map[string]reflect.Type{}
		yamlFields(t, fields)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Value == "<<" {
				continue // a merge key; the decoder checks what it brings
			}
			ft, ok := fields[k.Value]
			if !ok {
				known := make([]string, 0, len(fields))
				for name := range fields {
					known = append(known, name)
				}
				sort.Strings(known)
				return &ConfigError{Line: k.Line, Msg: fmt.Sprintf("unknown key %q in %s (known keys: %s)",
					k.Value, what, strings.Join(known, ", "))}
			}
			kp := join(p, k.Value)
			lines[kp] = k.Line
			if err := checkNode(v, ft, kp, lines); err != nil {
				return err
			}
		}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return nil
		}
		if n.Kind != yaml.SequenceNode {
			return bad("%s must be a list", what)
		}
		for i, item := range n.Content {
			ip := fmt.Sprintf("%s[%d]", p, i)
			lines[ip] = item.Line
			if err := checkNode(item, t.Elem(), ip, lines); err != nil {
				return err
			}
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return bad("%s must be a mapping", what)
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			kp := join(p, n.Content[i].Value)
			lines[kp] = n.Content[i].Line
			if err := checkNode(n.Content[i+1], t.Elem(), kp, lines); err != nil {
				return err
			}
		}
	default:
		if n.Kind != yaml.ScalarNode {
			return bad("%s must be a single value", what)
		}
		switch {
		case t == durationType:
			if _, err := time.ParseDuration(n.Value); err != nil {
				return bad("%s: %q is not a duration (write it like 30s, 5m or 1h30m; zero is 0s)", what, n.Value)
			}
		case t.Kind() == reflect.Bool:
			if _, err := strconv.ParseBool(n.Value); err != nil {
				return bad("%s: %q is not true or false", what, n.Value)
			}
		case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
			if _, err := strconv.ParseInt(n.Value, 0, 64); err != nil {
				return bad("%s: %q is not an integer", what, n.Value)
			}
		case t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64:
			if _, err := strconv.ParseUint(n.Value, 0, 64); err != nil {
				return bad("%s: %q is not a non-negative integer", what, n.Value)
			}
		case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
			if _, err := strconv.ParseFloat(n.Value, 64); err != nil {
				return bad("%s: %q is not a number", what, n.Value)
			}
		}
	}
	return nil
}
