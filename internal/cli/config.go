package cli

import (
	"errors"
	"strings"
)

// flagError turns a job package's Validate error, which starts with the
// setting's YAML key and "must" (deletion_threshold must be ...), into one about the
// flag the command registered for it (--deletion-threshold must be ...).
// A key's flag is the key with dashes unless renames says otherwise.
func flagError(err error, renames map[string]string) error {
	msg := err.Error()
	key, rest, ok := strings.Cut(msg, " ")
	if !ok || key == "" || strings.Trim(key, "abcdefghijklmnopqrstuvwxyz_") != "" || !strings.HasPrefix(rest, "must ") {
		return err
	}
	flag, ok := renames[key]
	if !ok {
		flag = strings.ReplaceAll(key, "_", "-")
	}
	return errors.New("--" + flag + " " + rest)
}
