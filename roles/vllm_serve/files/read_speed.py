"""How fast the model directory reads from its storage: the doctor's read of the largest weight file.

    python3 read_speed.py MODEL_DIR [MAX_BYTES]

Reads up to MAX_BYTES (default 1 GiB) of the largest *.safetensors file in MODEL_DIR and prints one JSON object:
file, bytes, seconds, mb_s and method. The read bypasses the page cache (O_DIRECT) so a running instance's
mapped pages do not make the disk look fast; where the filesystem refuses O_DIRECT (tmpfs, some overlays) the
file's cached pages are dropped first (posix_fadvise) and method says "buffered", which pages a running
instance maps can still flatter. Reading changes nothing on the host.
"""

from __future__ import annotations

import glob
import json
import mmap
import os
import sys
import time

CHUNK = 16 * 1024 * 1024


def largest_weight_file(model_dir: str) -> str | None:
    files = glob.glob(os.path.join(model_dir, "*.safetensors"))
    return max(files, key=os.path.getsize) if files else None


def read_direct(path: str, limit: int) -> tuple[int, float]:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    buffer = mmap.mmap(-1, CHUNK)  # page-aligned, as O_DIRECT needs
    done = 0
    try:
        start = time.monotonic()
        while done < limit:
            got = os.readv(fd, [buffer])
            if got <= 0:
                break
            done += got
        return done, time.monotonic() - start
    finally:
        os.close(fd)
        buffer.close()


def read_buffered(path: str, limit: int) -> tuple[int, float]:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        done = 0
        start = time.monotonic()
        while done < limit:
            got = len(os.read(fd, CHUNK))
            if not got:
                break
            done += got
        return done, time.monotonic() - start
    finally:
        os.close(fd)


def main() -> None:
    model_dir = sys.argv[1]
    limit = int(sys.argv[2]) if len(sys.argv) > 2 else 1024**3
    path = largest_weight_file(model_dir)
    if path is None:
        print(json.dumps({"error": "no safetensors file in " + model_dir}))
        return
    try:
        done, seconds = read_direct(path, limit)
        method = "direct"
    except OSError:
        done, seconds = read_buffered(path, limit)
        method = "buffered"
    rate = done / seconds / 1e6 if seconds > 0 else 0.0
    print(json.dumps({"file": path, "bytes": done, "seconds": round(seconds, 3), "mb_s": round(rate, 1), "method": method}))


if __name__ == "__main__":
    main()
