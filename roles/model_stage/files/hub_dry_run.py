"""What `hf download REPO --revision COMMIT` would write into the cache: the bytes of the files it does not hold yet.

Prints one JSON object: known (false when this huggingface_hub has no dry run or a size is not given), bytes, files.
"""

from __future__ import annotations

import json
import sys

from huggingface_hub import snapshot_download

try:
    infos = snapshot_download(sys.argv[1], revision=sys.argv[2], dry_run=True)
except TypeError:
    print(json.dumps({"known": False, "why": "this huggingface_hub cannot dry-run a download"}))
    sys.exit(0)
sizes = [info.file_size for info in infos if info.will_download]
print(json.dumps({"known": all(s is not None for s in sizes), "bytes": sum(s or 0 for s in sizes), "files": len(sizes)}))
