package cbpf

import (
	"reflect"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestAssembleResolvesLabels(t *testing.T) {
	var a Asm
	a.Stmt(LdAbs, 0)
	a.Jump(JEq, 1, "one", "")  // 1
	a.Jump(JGe, 9, "", "none") // 2
	a.JA("end")                // 3
	a.Label("one")
	a.Stmt(Ret, 1) // 4
	a.Label("none")
	a.Stmt(Ret, 0) // 5
	a.Label("end")
	prog, err := a.Assemble()
	if err != nil {
		t.Fatal(err)
	}
	want := []unix.SockFilter{
		{Code: LdAbs},
		{Code: JEq, Jt: 2, K: 1},
		{Code: JGe, Jf: 2, K: 9},
		{Code: unix.BPF_JMP | unix.BPF_JA, K: 2}, // to the end: the instruction after the program
		{Code: Ret, K: 1},
		{Code: Ret, K: 0},
	}
	if !reflect.DeepEqual(prog, want) {
		t.Fatalf("got %v\nwant %v", prog, want)
	}
}

func TestAssembleRefusesBadJumps(t *testing.T) {
	for name, build := range map[string]func(a *Asm){
		"unknown label": func(a *Asm) { a.Jump(JEq, 0, "nowhere", "") },
		"backward":      func(a *Asm) { a.Label("top"); a.Stmt(LdAbs, 0); a.Jump(JEq, 0, "top", "") },
		"to itself":     func(a *Asm) { a.Label("self"); a.JA("self") },
		"backward JA":   func(a *Asm) { a.Label("top"); a.Stmt(LdAbs, 0); a.JA("top") },
		"too far": func(a *Asm) {
			a.Jump(JEq, 0, "", "far")
			for i := 0; i < 256; i++ {
				a.Stmt(LdAbs, 0)
			}
			a.Label("far")
			a.Stmt(Ret, 0)
		},
	} {
		var a Asm
		build(&a)
		if _, err := a.Assemble(); err == nil || !strings.Contains(err.Error(), "bad jump") {
			t.Errorf("%s: Assemble = %v, want a bad jump error", name, err)
		}
	}
}

func TestAssembleFarthestJump(t *testing.T) {
	var a Asm
	a.Jump(JEq, 0, "far", "")
	for i := 0; i < 255; i++ {
		a.Stmt(LdAbs, 0)
	}
	a.Label("far")
	a.Stmt(Ret, 0)
	prog, err := a.Assemble()
	if err != nil {
		t.Fatal(err)
	}
	if prog[0].Jt != 255 {
		t.Fatalf("jt = %d, want 255", prog[0].Jt)
	}
}
