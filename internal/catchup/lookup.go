package catchup

import pb "github.com/compactord/compactord/gen/compactordv1"

// IndexCaughtUp returns the generation index provably covers on shard, and
// whether a position is recorded at all. known=false means unknown, which the
// trimmer must treat as NOT caught up: an absent entry never stands for
// "caught up": trim would retire SSTables an index still needs.
func IndexCaughtUp(d *pb.MemWalIndexDetails, index, shard string) (gen uint64, known bool) {
	sg, ok := d.GetIndexCatchup()[index]
	if !ok || sg == nil {
		return 0, false
	}
	gen, known = sg.GetGenerations()[shard]
	return gen, known
}
