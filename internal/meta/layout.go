package meta

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Top-level directories of a Lance dataset.
const (
	VersionsDir     = "_versions/"
	TransactionsDir = "_transactions/"
	DataDir         = "data/"
	DeletionsDir    = "_deletions/"
	IndicesDir      = "_indices/"
	TagsDir         = "_refs/tags/"
	BranchesDir     = "_refs/branches/"
	MemWalDir       = "_mem_wal/"
	// HintKey names the optional latest-version hint; readers must not
	// trust it as the head, only as a place to start looking.
	HintKey = VersionsDir + "latest_version_hint.json"
)

// Naming is how a dataset names its manifests. Lance has two schemes; LanceDB
// 0.39 creates tables with V2, and older tables may still use V1.
type Naming int

const (
	// NamingV2: "_versions/{u64::MAX - v:020}.manifest", so a lexical listing
	// returns the newest version first.
	NamingV2 Naming = iota
	// NamingV1: "_versions/{v}.manifest".
	NamingV1
)

func (n Naming) String() string {
	if n == NamingV1 {
		return "v1"
	}
	return "v2"
}

// ManifestKey is the key of version v's manifest.
func ManifestKey(n Naming, v uint64) string {
	if n == NamingV1 {
		return VersionsDir + strconv.FormatUint(v, 10) + ".manifest"
	}
	return fmt.Sprintf("%s%020d.manifest", VersionsDir, math.MaxUint64-v)
}

// ParseManifestKey returns the version and naming of a manifest key. Detached
// manifests ("d…"), the hint and temporary files are not versions.
func ParseManifestKey(key string) (v uint64, n Naming, ok bool) {
	name, found := strings.CutPrefix(key, VersionsDir)
	if !found || strings.Contains(name, "/") {
		return 0, 0, false
	}
	digits, found := strings.CutSuffix(name, ".manifest")
	if !found || digits == "" || digits[0] < '0' || digits[0] > '9' {
		return 0, 0, false
	}
	x, err := strconv.ParseUint(digits, 10, 64)
	if err != nil {
		return 0, 0, false
	}
	if len(digits) == 20 {
		// Every V2 name has exactly 20 digits; a V1 name has 20 digits
		// only for versions no table reaches (above 10^19).
		if x == math.MaxUint64 {
			return 0, 0, false // version 0 is never stored
		}
		return math.MaxUint64 - x, NamingV2, true
	}
	if x == 0 {
		return 0, 0, false
	}
	return x, NamingV1, true
}

// TransactionName is a transaction file's name relative to _transactions/,
// as the manifest's transaction_file field records it.
func TransactionName(readVersion uint64, uuid string) string {
	return strconv.FormatUint(readVersion, 10) + "-" + uuid + ".txn"
}

// TransactionKey is the key of a transaction file.
func TransactionKey(name string) string { return TransactionsDir + name }

// DataKey is the key of a data file given its DataFile.path.
func DataKey(path string) string { return DataDir + path }

// IndexDir is the directory of one index segment.
func IndexDir(uuid string) string { return IndicesDir + uuid + "/" }

// TagKey is the key of a tag's file.
func TagKey(name string) string { return TagsDir + name + ".json" }

// RowAddr is a row address: fragment id in the high 32 bits, the physical
// offset (deleted rows included) in the low 32.
func RowAddr(fragment uint32, offset uint32) uint64 { return uint64(fragment)<<32 | uint64(offset) }

// SplitRowAddr is the inverse of RowAddr.
func SplitRowAddr(addr uint64) (fragment uint32, offset uint32) {
	return uint32(addr >> 32), uint32(addr)
}
