package benchsuite

import (
	"slices"
	"time"
)

// median of xs (the mean of the middle two for an even count); 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// quantile of xs by the nearest-rank method (q in [0, 1]).
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func seconds(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = d.Seconds()
	}
	return out
}

// ratios returns num[i]/den[i] for each trial: a ratio is taken within a
// trial, whose runs were interleaved, so machine load shared by both sides
// cancels out before the median is taken.
func ratios(num, den []time.Duration) []float64 {
	out := make([]float64, 0, len(num))
	for i := range min(len(num), len(den)) {
		if den[i] > 0 {
			out = append(out, num[i].Seconds()/den[i].Seconds())
		}
	}
	return out
}

// rotate returns xs rotated left by k: trial k runs the same steps starting
// from a different one, so no side always runs first (or right after the
// heaviest step).
func rotate[T any](xs []T, k int) []T {
	if len(xs) == 0 {
		return xs
	}
	k %= len(xs)
	return append(slices.Clone(xs[k:]), xs[:k]...)
}
