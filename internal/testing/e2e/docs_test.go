package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// repoPathRE finds repository paths named in prose: a top-level directory
// of the repository followed by at least one path element. The lookbehind
// class keeps "rust/lance/src/..." or "a/internal/x" (paths of other
// repositories) out.
var repoPathRE = regexp.MustCompile(`(?:^|[^A-Za-z0-9_./-])((?:internal|docs|configs|deploy|scripts|cmd|lancewal)/[A-Za-z0-9_./*-]*[A-Za-z0-9_*/])`)

// notPaths are matches of repoPathRE that name something else.
var notPaths = map[string]string{
	"deploy/compactord": "kubectl's name of the Deployment",
}

// docPaths returns the repository paths a Markdown text names, in order,
// without duplicates. A Go identifier suffix ("internal/fri.Chain") is
// dropped: it names a package, whose directory must exist.
func docPaths(text string) []string {
	var out []string
	for _, m := range repoPathRE.FindAllStringSubmatch(text, -1) {
		p := strings.TrimSuffix(m[1], "/")
		if i := strings.LastIndex(p, "/"); i >= 0 {
			if j := strings.Index(p[i:], "."); j > 0 {
				rest := p[i+j+1:]
				if rest != "" && rest[0] >= 'A' && rest[0] <= 'Z' {
					p = p[:i+j]
				}
			}
		}
		if _, ok := notPaths[p]; !ok && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

func TestDocPathsParse(t *testing.T) {
	text := "see `internal/fri.Chain`, internal/testing/e2e/, [x](docs/format.md#y), " +
		"configs/*.yaml and rust/lance/src/io/commit.rs; internal/fri again; kubectl port-forward deploy/compactord."
	want := []string{"internal/fri", "internal/testing/e2e", "docs/format.md", "configs/*.yaml"}
	if got := docPaths(text); !slices.Equal(got, want) {
		t.Fatalf("docPaths = %q, want %q", got, want)
	}
}

// TestDocsNameExistingPaths checks that every repository path README.md and
// docs/*.md name exists, so a move or a deletion updates the docs with it.
func TestDocsNameExistingPaths(t *testing.T) {
	root := moduleRoot(t)
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, filepath.Join(root, "README.md"))
	if len(docs) < 2 {
		t.Fatalf("found no docs under %s", root)
	}
	checked := 0
	for _, doc := range docs {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, doc)
		for _, p := range docPaths(string(text)) {
			checked++
			matches, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(p)))
			if err != nil || len(matches) == 0 {
				t.Errorf("%s names %s, which does not exist", rel, p)
			}
		}
	}
	if checked == 0 {
		t.Fatal("the docs name no repository path: the pattern is broken")
	}
}
