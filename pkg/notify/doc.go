// Package notify is nsbox's seccomp user-notification layer: a small second
// filter that hands connect, sendto (with an address), sendmsg, sendmmsg
// and shutdown to the supervisor (SECCOMP_RET_USER_NOTIF,
// seccomp_unotify(2)), and the supervisor's side that answers them. It
// also hands over setgroups, which is let run as made (see Program).
//
// The worker installs the filter (Install) as a named setup step right
// before the main filter; the supervisor takes the listener fd from the
// worker with pidfd_getfd(2) and runs a Server over it for the session's
// life. A Server dispatches by the socket's own family, read from the
// socket the call names (SO_DOMAIN), never by the address the call passes:
// the address lies in memory the sandbox can rewrite after it was read.
//
// The one rule the package is built on: the supervisor never answers a
// notification with SECCOMP_USER_NOTIF_FLAG_CONTINUE for a socket call.
// The kernel would read the arguments again (the address, the msghdr) and
// look the fd number up again, and another thread of the target can change
// all three between the check and that second read (seccomp_unotify(2),
// "Caveats": a supervisor must not use CONTINUE to make security
// decisions). Every allowed call is performed by the supervisor itself on
// the very socket it checked (pidfd_getfd), with the copy of the arguments
// it checked, and only the result goes back.
//
// Handlers plug in per address family (Options.Unix, Options.Inet): the unix
// socket gate (UnixGate) is one; the filtered network is another. A Server
// also answers the file-metadata calls (chmod, chown, utimensat and their kin) of
// a Landlock sandbox, whose own command filter hands them over (Options.Meta,
// MetaGate: meta.go), by the same rule: the supervisor makes each allowed
// call itself, on the file it checked. This package imports only
// golang.org/x/sys/unix.
package notify
