#!/bin/busybox sh
# /init of the throw-away test VM (hack/run-in-vm.sh). Runs as PID 1 on a
# pure cgroup v2 kernel (cgroup_no_v1=all), runs /test.bin and reports its
# exit code on the second serial port as "NSBOX_VM_EXIT=<code>".
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs -o mode=1777 tmpfs /tmp
mount -t cgroup2 none /sys/fs/cgroup
# Give the root's children every controller, as systemd does on a v2 host.
for c in $(cat /sys/fs/cgroup/cgroup.controllers); do
	echo "+$c" >/sys/fs/cgroup/cgroup.subtree_control || echo "init: cannot enable $c"
done
echo "NSBOX_VM_BOOTED uptime=$(cut -d' ' -f1 /proc/uptime)s kernel=$(uname -r) controllers=$(cat /sys/fs/cgroup/cgroup.subtree_control)"
cd /tmp
export NSBOX_VM=1 HOME=/tmp TMPDIR=/tmp
# shellcheck disable=SC2046 # the args file holds one flag per word
/test.bin $(cat /test.args)
rc=$?
echo "NSBOX_VM_DONE rc=$rc uptime=$(cut -d' ' -f1 /proc/uptime)s"
echo "NSBOX_VM_EXIT=$rc" >/dev/ttyS1
sync
poweroff -f
