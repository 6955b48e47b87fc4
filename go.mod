module github.com/nsbox/nsbox

go 1.26.8

require (
	github.com/containerd/cgroups/v3 v3.1.3
	github.com/coreos/go-systemd/v22 v22.7.0
	github.com/cyphar/filepath-securejoin v0.7.0
	github.com/godbus/dbus/v5 v5.2.2
	github.com/opencontainers/runtime-spec v1.3.0
	github.com/seccomp/libseccomp-golang v0.11.1
	github.com/spf13/cobra v1.10.2
	golang.org/x/sys v0.49.0
)

require (
	cyphar.com/go-pathrs v0.2.6 // indirect
	github.com/cilium/ebpf v0.17.3 // indirect
	github.com/containerd/log v0.1.0 // indirect
	github.com/docker/go-units v0.5.0 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/moby/sys/userns v0.2.1 // indirect
	github.com/pelletier/go-toml/v2 v2.4.3 // indirect
	github.com/sirupsen/logrus v1.9.4 // indirect
	github.com/spf13/pflag v1.0.10 // indirect
	go.etcd.io/bbolt v1.5.0 // indirect
	golang.org/x/net v0.55.0 // indirect
	google.golang.org/protobuf v1.36.11 // indirect
)
