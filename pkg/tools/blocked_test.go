package tools

import (
	"errors"
	"testing"
)

func TestBlockedShell(t *testing.T) {
	bl, err := NewBlockList(DefaultBlockedCommands)
	if err != nil {
		t.Fatal(err)
	}
	blocked := []string{
		"sudo id",
		"echo hi && sudo id",
		"(sudo id)",
		"true; sudo -i",
		"ls | sudo tee /etc/x",
		"echo $(sudo id)",
		"echo `su -c id`",
		"f() { doas id; }; f",
		"/usr/bin/sudo id",
		"'sudo' id",
		`"sudo" id`,
		`s\udo id`,
		"env FOO=1 sudo id",
		"env -S 'sudo id'",
		"nice -n 5 sudo id",
		"timeout 5 sudo id",
		"xargs -n1 sudo < list",
		"exec sudo id",
		"command sudo id",
		"busybox su",
		"sh -c 'sudo id'",
		"bash -lc \"echo x; sudo id\"",
		"eval 'sudo id'",
		"rm -rf /",
		"rm -fr /",
		"rm -r -f /",
		"rm -Rf /",
		"rm --recursive --force /",
		"rm -rf /*",
		"rm -rf //",
		"rm -rf -- /",
		"cd /tmp && rm -rf / ",
		"mkfs.ext4 /dev/sda1",
		"shutdown -h now",
		"if true; then reboot; fi",
		"for i in 1; do halt; done",
		"x=$(poweroff)",
	}
	for _, c := range blocked {
		err := bl.CheckShell(c)
		var be *BlockedError
		if !errors.As(err, &be) {
			t.Errorf("CheckShell(%q) = %v, want blocked", c, err)
		}
	}
	allowed := []string{
		"rm -rf ./x",
		"rm -rf /tmp/x",
		"rm -f /",
		"rm -rf build/",
		"echo sudo",
		"ls -la && grep -r sudo .",
		"echo 'sudo id'",
		"git commit -m 'sudo fix'",
		"pseudo id",
		"sudoku",
		"command -v sudo",
		"$CMD id",
		"make test",
		"FOO=sudo env",
	}
	for _, c := range allowed {
		if err := bl.CheckShell(c); err != nil {
			t.Errorf("CheckShell(%q) = %v, want allowed", c, err)
		}
	}
	if err := bl.CheckShell("echo 'unterminated"); err == nil {
		t.Error("an unparsable command line was allowed: the guard must fail closed")
	}
}

func TestBlockedArgv(t *testing.T) {
	bl, _ := NewBlockList(DefaultBlockedCommands)
	for _, argv := range [][]string{{"sudo", "id"}, {"/bin/sh", "-c", "sudo id"}, {"rm", "-rf", "/"}, {"env", "su"}} {
		if err := bl.CheckArgv(argv); err == nil {
			t.Errorf("CheckArgv(%q) allowed", argv)
		}
	}
	for _, argv := range [][]string{{"echo", "sudo id"}, {"rm", "-rf", "./x"}, {"ls"}} {
		if err := bl.CheckArgv(argv); err != nil {
			t.Errorf("CheckArgv(%q) = %v", argv, err)
		}
	}
	// A policy's own list replaces the default.
	custom, err := NewBlockList([]string{"curl", "git push"})
	if err != nil {
		t.Fatal(err)
	}
	if custom.CheckShell("sudo id") != nil || custom.CheckShell("curl x") == nil || custom.CheckShell("git push origin") == nil || custom.CheckShell("git pull") != nil {
		t.Error("custom list not applied as written")
	}
	if _, err := NewBlockList([]string{"[bad"}); err == nil {
		t.Error("bad pattern accepted")
	}
}
