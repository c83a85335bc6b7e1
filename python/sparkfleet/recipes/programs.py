"""The Python programs a release's build steps run with the release's own interpreter (sparkfleet.recipes.steps):
each a string, its arguments on its command line. Nothing here runs on the controller."""

from __future__ import annotations

# The release's `vllm --version`, run in the smoke step's own interpreter: the console script the units exec
# (`bin/vllm serve`), checked to name the release's Python in its first two lines (uv writes a /bin/sh trampoline for a
# long path), then run as __main__. A process of its own imported vLLM's CLI again: about 9 s of CPU per build.
CLI_CHECK = """
import contextlib, io, runpy, sys
cli = {cli!r}
with open(cli) as script:
    head = script.readline() + script.readline()
if {python!r} not in head:
    sys.exit(f"{{cli}} does not run {python}: it starts {{head!r}}")
sys.argv = [cli, "--version"]
said = io.StringIO()
try:
    with contextlib.redirect_stdout(said):
        runpy.run_path(cli, run_name="__main__")
except SystemExit as stop:
    if stop.code not in (None, 0):
        sys.exit(f"vllm --version exited {{stop.code}}")
if not said.getvalue().strip():
    sys.exit("vllm --version printed nothing")
"""


# The current release's bytecode of each file the new release shares with it (one inode: uv links both releases'
# files to its cache), copied before the smoke step compiles the rest: an upgrade that changes a few packages no
# longer compiles torch's and vLLM's thousands of modules again (30 s of a fleet host's 40 s smoke test, CPU).
# Python still checks each file's recorded source mtime and size when it imports it.
REUSE_BYTECODE = """
import os, shutil, sys
old, new = sys.argv[1], sys.argv[2]
if not os.path.isdir(old) or os.path.realpath(old) == os.path.realpath(new):
    print(f"{old}: no other release to take bytecode from")
    sys.exit(0)
old, kept = os.path.realpath(old), 0
for top, _, files in os.walk(os.path.join(old, "lib")):
    if os.path.basename(top) != "__pycache__":
        continue
    package = os.path.relpath(os.path.dirname(top), old)
    for name in files:
        source = os.path.join(package, name.split(".", 1)[0] + ".py")
        target = os.path.join(new, package, "__pycache__", name)
        try:
            shared = os.path.samefile(os.path.join(old, source), os.path.join(new, source))
        except OSError:
            continue
        if shared and not os.path.lexists(target) and not os.path.islink(os.path.join(new, source)):
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copy2(os.path.join(top, name), target)
            kept += 1
print(f"took the bytecode of {kept} files {new} shares with {old}")
"""


# The release's own record (sparkfleet.release.record_reader), read in the smoke step's interpreter once it has imported
# vLLM, and written beside the lock: what the planner holds this release's plans to (its registry, its parser).
RECORD_WRITE = """
record_reader = {{"__name__": "sparkfleet_record_reader"}}
try:
    exec(compile(reader_source, "record_reader.py", "exec"), record_reader)
    record = record_reader["release_record"]()
except Exception as failed:
    # A build whose code the reader does not know yet still installs: its plans then follow the stock tables.
    print(f"no release record: {{type(failed).__name__}}: {{failed}}", file=sys.stderr)
else:
    with open({path!r}, "w") as out:
        json.dump(record, out, sort_keys=True)
"""
