package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/compactord/compactord/internal/lance/table"
	"github.com/compactord/compactord/internal/storage"
	ptable "github.com/compactord/compactord/internal/table"
)

// Table formats `table create` makes. A URL whose path ends in ".lance"
// defaults to Lance (LanceDB's layout), any other to compactord's private
// format; --format chooses explicitly.
const (
	formatLance   = "lance"
	formatPrivate = "private"
)

func createFormat(rawURL, format, fileVersion string) (string, error) {
	switch format {
	case "":
		format = formatPrivate
		if strings.HasSuffix(strings.TrimRight(rawURL, "/"), ".lance") {
			format = formatLance
		}
	case formatLance, formatPrivate:
	default:
		return "", fmt.Errorf("--format %q: want lance or private", format)
	}
	if fileVersion != "" && format != formatLance {
		return "", fmt.Errorf("--file-version is for Lance tables (--format lance or a URL ending in .lance)")
	}
	return format, nil
}

// lanceTableCreate runs `table create` when the table is to be a Lance
// dataset: version 1, an Overwrite with the schema and no rows.
func lanceTableCreate(ctx context.Context, e *env, rawURL, schema, pk, format, fileVersion string) (handled bool, err error) {
	if format, err = createFormat(rawURL, format, fileVersion); err != nil || format != formatLance {
		return err != nil, err
	}
	s, err := ptable.ParseSchema(schema, strings.Split(pk, ","))
	if err != nil {
		return true, err
	}
	fields, err := table.LanceFields(s)
	if err != nil {
		return true, err
	}
	u, err := normalizeURL(rawURL)
	if err != nil {
		return true, err
	}
	b, err := storage.Open(ctx, u)
	if err != nil {
		return true, err
	}
	defer b.Close()
	mf, err := table.Create(ctx, b, fields, fileVersion, time.Now())
	if err != nil {
		return true, fmt.Errorf("table create %s: %w", rawURL, err)
	}
	return true, printJSON(e.stdout, map[string]any{"version": mf.Manifest.GetVersion(), "operation": "overwrite",
		"format": formatLance, "file_version": mf.Manifest.GetDataFormat().GetVersion()})
}
