//go:build !amd64 && !arm64

package notify

import "golang.org/x/sys/unix"

// auditArch 0: no filter on this architecture (Supported says so).
const auditArch = 0

var (
	foreignSocketCalls   []archCalls
	nativeForeignCalls   []uint32
	setgroupsCalls       []archCalls
	socketCalls          []uint32
	filteredForeignCalls []archCalls
	ioUringSetupCalls    []archCalls
	ioctlCalls           []archCalls
)

var legacyMetaCalls []legacyMetaCall

func readLegacyMetaCall(*SockCall, int32, [6]uint64) (*metaCall, bool, unix.Errno) {
	return nil, false, 0
}
