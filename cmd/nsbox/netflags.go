package main

import (
	"github.com/nsbox/nsbox/pkg/policy"
	"github.com/spf13/pflag"
)

// netFlags are the flags of the filtered network.
type netFlags struct {
	allowHost, denyHost, addHost []string
	checkSNI                     bool
}

func init() {
	flagKeys["network.allow"] = "--allow-host"
	flagKeys["network.deny"] = "--deny-host"
	flagKeys["network.hosts"] = "--add-host"
	flagKeys["network.check_sni"] = "--check-sni"
}

func (f *policyFlags) registerNetwork(fl *pflag.FlagSet) {
	fl.StringArrayVar(&f.allowHost, "allow-host", nil, "filtered network: allow connections to `PATTERN` (NAME, *.SUFFIX, NAME:PORT; without a port 80 and 443, with --check-sni 443 only; repeatable; implies --net filtered)")
	fl.StringArrayVar(&f.denyHost, "deny-host", nil, "filtered network: refuse `PATTERN` even when allowed (without a port: every port; repeatable)")
	fl.BoolVar(&f.checkSNI, "check-sni", false, "filtered network: relay TLS on port 443 and refuse a connection whose server name (SNI) is not the allowed name it was opened for (domain fronting), or that uses Encrypted Client Hello (browsers' GREASE ECH too); a pattern without a port then allows 443 only (NAME:80 allows plain HTTP, unchecked)")
	fl.StringArrayVar(&f.addHost, "add-host", nil, "filtered network: connect an allowed name to this address, `NAME:IP` (as Docker's flag; repeatable)")
}

// networkLayer puts the network flags into the command-line layer.
func (f *policyFlags) networkLayer(c *policy.Config) {
	c.Network.Allow = f.allowHost
	c.Network.Deny = f.denyHost
	c.Network.Hosts = f.addHost
	if f.changed("check-sni") {
		c.Network.CheckSNI = &f.checkSNI
	}
}
