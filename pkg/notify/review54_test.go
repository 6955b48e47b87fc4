package notify

import "testing"

// review54DmaBufFdinfo is /proc/PID/fdinfo/N of a dma-buf whose name a
// process set with DMA_BUF_SET_NAME (up to 32 bytes, newlines kept:
// dma_buf_show_fdinfo prints it with "name:\t%s\n"): the kernel's generic
// lines first (fs/proc/fd.c), then the lines of the file's type.
const review54DmaBufFdinfo = "pos:\t0\nflags:\t02\nmnt_id:\t15\nino:\t4242\n" +
	"size:\t4096\ncount:\t1\nexp_name:\tsystem\nname:\t\nflags:\t02000000\nino:\t7\n"

// TestReview54ParseFdinfoFirstLinesWin: the generic "flags:" and "ino:" lines
// come first; a later line of the same prefix is the file type's (here a
// name the process chose) and must not override them. Before 681fd71..
// db5e2ea parseFdinfoCloexec stopped at the first "flags:" line; the
// shared parseFdinfo now takes the last.
func TestReview54ParseFdinfoFirstLinesWin(t *testing.T) {
	flags, ino, err := parseFdinfo([]byte(review54DmaBufFdinfo))
	if err != nil {
		t.Fatal(err)
	}
	if flags != 02 {
		t.Errorf("flags = %#o, want 02 (the kernel's line, not the forged one)", flags)
	}
	if ino != 4242 {
		t.Errorf("ino = %d, want 4242 (the kernel's line, not the forged one)", ino)
	}
	cloexec, err := parseFdinfoCloexec([]byte(review54DmaBufFdinfo))
	if err != nil || cloexec {
		t.Errorf("parseFdinfoCloexec = %v, %v; want false (O_CLOEXEC is not in the kernel's flags line 02)", cloexec, err)
	}
}

// Before Linux 5.14 the kernel prints no "ino:" line: one among the file
// type's lines is the process's, not the kernel's.
func TestReview54FdinfoWithoutKernelIno(t *testing.T) {
	old := "pos:\t0\nflags:\t02\nmnt_id:\t15\nsize:\t4096\nname:\t\nino:\t7\n"
	flags, ino, err := parseFdinfo([]byte(old))
	if err != nil || flags != 02 || ino != 0 {
		t.Fatalf("flags %#o ino %d err %v; want 02, 0 (no kernel ino line), nil", flags, ino, err)
	}
	if _, _, err := parseFdinfo([]byte("size:\t1\nflags:\t02\n")); err == nil {
		t.Fatal("a flags line after the file type's lines was taken")
	}
}
