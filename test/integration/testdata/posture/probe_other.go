//go:build linux && !amd64

package main

import (
	"runtime"
	"syscall"
)

var goarch = runtime.GOARCH

// abis: the other syscall ABIs are only probed on x86_64.
var abis []string

func abiCall(string) (int64, syscall.Errno) { return -1, syscall.ENOSYS }

func addArchProbes(map[string]probeFn) {}
