package vector

import "testing"

// BenchmarkBuildGenerationCopy: a generation copy of 10 000 128-d
// vectors (the HNSW graph build dominates).
func BenchmarkBuildGenerationCopy(b *testing.B) {
	v := randomVectors(10_000, 128, 3)
	for b.Loop() {
		if _, _, err := BuildGenerationCopy(v, "l2"); err != nil {
			b.Fatal(err)
		}
	}
}
