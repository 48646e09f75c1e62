package fts

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

func TestExploreStop(t *testing.T) {
	if os.Getenv("EXPLORE") == "" {
		t.Skip()
	}
	b, _ := os.ReadFile(os.Getenv("EXPLORE"))
	words := strings.Split(strings.TrimSpace(string(b)), "\n")
	cfg := map[string]any{"baseTokenizer": "whitespace", "language": os.Getenv("LANG_"), "lowercase": false, "stem": false, "removeStopWords": true, "asciiFolding": false, "maxTokenLength": 1000}
	got := lanceBags(t, []map[string]any{cfg}, words)[0]
	for i, w := range words {
		if len(got[i]) == 0 {
			fmt.Println(w)
		}
	}
}
