//go:build !amd64 && !arm64

package notify

// auditArch 0: no filter on this architecture (Supported says so).
const auditArch = 0

var (
	foreignSocketCalls   []archCalls
	nativeForeignCalls   []uint32
	setgroupsCalls       []archCalls
	socketCalls          []uint32
	filteredForeignCalls []archCalls
)
