package sandbox

import "encoding/json"

// toolResultShape is the tool result object (pkg/tools.Result), in its
// field order, for setReason.
type toolResultShape struct {
	Success bool            `json:"success"`
	Output  json.RawMessage `json:"output"`
	Error   *string         `json:"error"`
	Reason  string          `json:"reason,omitempty"`
}

// setReason puts the reason the supervisor learnt (an OOM kill or the pids
// limit, from the cgroup's counters, which the worker cannot see) into a
// tool's result, so that every caller of CallTool reads the same object as
// nsbox tools call and MCP print. A result that is not such an object is
// returned as it is.
func setReason(payload json.RawMessage, r Reason) json.RawMessage {
	var res toolResultShape
	if r == "" || json.Unmarshal(payload, &res) != nil {
		return payload
	}
	res.Reason = string(r)
	b, err := json.Marshal(res)
	if err != nil {
		return payload
	}
	return b
}
