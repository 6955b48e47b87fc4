#!/usr/bin/env python3
"""Run a model's tool calls in nsbox sandboxes and print the tool messages.

Usage: run_tool_calls.py [--nsbox PATH] [--workspace DIR] [REPLY.json]

REPLY is what the model answered (a file, or stdin), in any of these shapes:
  - an OpenAI chat completion:    {"choices": [{"message": {"tool_calls": [...]}}]}
  - an Ollama /api/chat response: {"message": {"tool_calls": [...]}}
  - the assistant message itself: {"role": "assistant", "tool_calls": [...]}

Each tool call runs with `nsbox tools call NAME ARGS` (a fresh sandbox per
call; the workspace directory is the state they share). The output is a JSON
array of tool messages, in order, to append to the conversation before the
next request to the model:
  OpenAI: {"role": "tool", "tool_call_id": ID, "content": RESULT}
  Ollama: {"role": "tool", "tool_name": NAME, "content": RESULT}
RESULT is the tool's result object {success, output, error} as JSON text. A
tool that fails is not an error here: the model reads why and goes on.

Exit status: 0 when every call ran, 2 for a reply this script cannot read,
125 when nsbox itself could not run a call.
"""
import argparse
import json
import re
import subprocess
import sys

NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def tool_calls(reply):
    """Returns the assistant message's tool calls."""
    if "choices" in reply:
        reply = reply["choices"][0]["message"]
    elif "message" in reply:
        reply = reply["message"]
    return reply.get("tool_calls") or []


def run_call(nsbox, workspace, name, args):
    """Runs one call; returns its result object as JSON text."""
    if not NAME.match(name or ""):
        return json.dumps({"success": False, "output": "", "error": f"invalid tool name {name!r}"})
    cmd = [nsbox, "tools", "call"]
    if workspace:
        cmd += ["--workspace", workspace]
    # "--": a name can never be taken for a flag.
    cmd += ["--", name, args]
    p = subprocess.run(cmd, capture_output=True, text=True)
    # 0: the tool succeeded, 1: it failed (the result says why); both print
    # the result object. Anything else is nsbox's own failure.
    if p.returncode not in (0, 1):
        sys.stderr.write(f"nsbox tools call {name}: exit {p.returncode}: {p.stderr}")
        sys.exit(125)
    return json.dumps(json.loads(p.stdout), separators=(",", ":"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nsbox", default="nsbox", help="the nsbox binary")
    ap.add_argument("--workspace", default="", help="the workspace the tools are confined to (default: the current directory)")
    ap.add_argument("reply", nargs="?", help="the model's reply (default: stdin)")
    opts = ap.parse_args()
    try:
        with (open(opts.reply) if opts.reply else sys.stdin) as f:
            calls = tool_calls(json.load(f))
    except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
        sys.stderr.write(f"cannot read the model's reply: {e}\n")
        sys.exit(2)

    messages = []
    for call in calls:
        fn = call.get("function", {})
        name = fn.get("name", "")
        args = fn.get("arguments", {})
        # OpenAI sends the arguments as a JSON string, Ollama as an object.
        if not isinstance(args, str):
            args = json.dumps(args)
        content = run_call(opts.nsbox, opts.workspace, name, args)
        if "id" in call:
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": content})
        else:
            messages.append({"role": "tool", "tool_name": name, "content": content})
    json.dump(messages, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
