package vector

import "math"

func float32frombits(b uint32) float32 { return math.Float32frombits(b) }
