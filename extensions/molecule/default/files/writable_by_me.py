#!/usr/bin/python3
"""Which of PATHS (walked whole), or their ancestors, can the user running this write? A JSON list.

Run as the service user against everything a root step executes or installs from: any entry means the
untrusted service could swap what root runs next (a file it can write, or a directory in which it can
rename entries). Usage: writable_by_me.py PATH...
"""

import json
import os
import sys

found = []
for root in sys.argv[1:]:
    parent = os.path.dirname(os.path.abspath(root))
    while True:
        if os.access(parent, os.W_OK):
            found.append(parent)
        if parent == "/":
            break
        parent = os.path.dirname(parent)
    for directory, dirs, files in os.walk(root):
        for name in [directory] + [os.path.join(directory, f) for f in files + dirs]:
            # A link is judged by what it points at only if it stays inside a checked tree.
            if not os.path.islink(name) and os.access(name, os.W_OK):
                found.append(name)
print(json.dumps(sorted(set(found))))
