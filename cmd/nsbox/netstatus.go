package main

import (
	"strings"

	"github.com/nsbox/nsbox/pkg/netfilter"
	"github.com/nsbox/nsbox/pkg/policy"
	"github.com/nsbox/nsbox/pkg/sandbox"
)

// networkStatus says whether a filtered network can run here and what the
// profile's network is.
type networkStatus struct {
	policy.NetworkSettings
	// Filtered is the mechanism of the filtered network, "" when it
	// cannot run here (Error says why).
	Filtered string `json:"filtered_mechanism"`
	Error    string `json:"filtered_error,omitempty"`
	Resolver string `json:"resolver"`
}

func netStatus(h policy.Host, profile string) (networkStatus, error) {
	ns, err := policy.Network(h, policy.Request{Profile: profile})
	if err != nil {
		return networkStatus{}, err
	}
	st := networkStatus{NetworkSettings: ns, Resolver: netfilter.ResolverAddr.String()}
	if mech, err := sandbox.SocketGateMechanism(); err != nil {
		st.Error = err.Error()
	} else {
		st.Filtered = mech
	}
	return st, nil
}

func (s networkStatus) lines() []string {
	out := []string{"network (profile " + s.Profile + "): " + s.Mode}
	if s.Filter != nil {
		allow := s.Filter.Allow
		if s.Filter.CheckSNI {
			// The ports differ from what the patterns say: shown.
			allow = allowDescribed(s.Filter)
		}
		out[0] += "; allow: " + list(allow)
		if len(s.Filter.Deny) > 0 {
			out[0] += "; deny: " + list(s.Filter.Deny)
		}
		if len(s.Filter.Hosts) > 0 {
			out[0] += "; pinned: " + list(s.Filter.Hosts)
		}
	}
	if s.Error != "" {
		out = append(out, "filtered network: unavailable ("+s.Error+")")
	} else {
		out = append(out, "filtered network: "+s.Filtered+" traps connect; DNS answered by nsbox at "+s.Resolver+" inside")
	}
	return out
}

func list(l []string) string {
	if len(l) == 0 {
		return "(nothing)"
	}
	return strings.Join(l, ", ")
}

// allowDescribed is the allow list with the ports each pattern covers as
// the session applies them (under --check-sni a pattern without a port
// allows 443 only), or as written when it does not parse.
func allowDescribed(f *sandbox.NetFilter) []string {
	al, err := netfilter.ParseAllowlist(f.Allow, nil)
	if err != nil {
		return f.Allow
	}
	return al.Describe(f.CheckSNI)
}
