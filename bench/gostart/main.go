// Command gostart does nothing: its run time is the Go runtime's own start
// and exit, the floor under every Go process nsbox starts (the supervisor
// and the re-executed worker). hack/bench.sh compares it with /bin/true and
// with the nsbox binary in worker mode (which runs every package init of
// the binary before it can do anything).
package main

func main() {}
