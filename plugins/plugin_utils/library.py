# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The sparkfleet library for this collection's controller plugins.

The collection carries the library's source (python/sparkfleet, the same source the `sparkfleet` CLI
package is built from), so a fleet repo that installs the collection needs only the third-party packages
of requirements.txt. The plugins always run the copy shipped with them: a `sparkfleet` of another version
installed in the controller's Python cannot skew the plans.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import importlib.util
import json
import sys
from pathlib import Path

from ansible.errors import AnsibleError

try:
    from packaging.requirements import InvalidRequirement, Requirement
except ImportError:  # ansible-core depends on packaging; a broken install still gets a clear message
    Requirement = None

COLLECTION_ROOT = Path(__file__).resolve().parents[2]
LIBRARY_PACKAGE = COLLECTION_ROOT / "python" / "sparkfleet"
REQUIREMENTS = COLLECTION_ROOT / "requirements.txt"


def install_command():
    """The one documented step: the collection's controller requirements into the Python running Ansible."""
    return f"{sys.executable} -m pip install -r {REQUIREMENTS}"


def unmet_requirements(lines):
    """The requirement lines the running Python does not satisfy, each with what it has instead."""
    unmet = []
    for line in lines:
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        if Requirement is None:
            return [f"{text} (cannot check: the 'packaging' package is missing)"]
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            unmet.append(f"{text} (not a valid requirement)")
            continue
        try:
            installed = importlib.metadata.version(requirement.name)
        except importlib.metadata.PackageNotFoundError:
            unmet.append(f"{text} (not installed)")
            continue
        if not requirement.specifier.contains(installed, prereleases=True):
            unmet.append(f"{text} (found {installed})")
    return unmet


def collection_version():
    """The installed collection's version (MANIFEST.json), or the checkout's (galaxy.yml)."""
    manifest = COLLECTION_ROOT / "MANIFEST.json"
    if manifest.is_file():
        return json.loads(manifest.read_text(encoding="utf-8"))["collection_info"]["version"]
    for line in (COLLECTION_ROOT / "galaxy.yml").read_text(encoding="utf-8").splitlines():
        if line.startswith("version:"):
            return line.split(":", 1)[1].strip().strip("'\"")
    raise AnsibleError(f"sparkfleet.vllm: no MANIFEST.json or galaxy.yml version under {COLLECTION_ROOT}")


def _package():
    loaded = sys.modules.get("sparkfleet")
    if loaded is None:
        if not (LIBRARY_PACKAGE / "__init__.py").is_file():
            raise AnsibleError(
                f"sparkfleet.vllm at {COLLECTION_ROOT} has no library ({LIBRARY_PACKAGE} is missing): "
                "reinstall the collection from its built tarball (ansible-galaxy collection install --force)"
            )
        spec = importlib.util.spec_from_file_location(
            "sparkfleet", LIBRARY_PACKAGE / "__init__.py", submodule_search_locations=[str(LIBRARY_PACKAGE)]
        )
        loaded = importlib.util.module_from_spec(spec)
        sys.modules["sparkfleet"] = loaded
        try:
            spec.loader.exec_module(loaded)
        except BaseException:
            del sys.modules["sparkfleet"]
            raise
    return loaded


@functools.cache
def _ready():
    unmet = unmet_requirements(REQUIREMENTS.read_text(encoding="utf-8").splitlines())
    if unmet:
        raise AnsibleError(
            f"the sparkfleet.vllm collection needs Python packages on the controller ({'; '.join(unmet)}): "
            f"run '{install_command()}'"
        )
    package = _package()
    wanted = collection_version()
    if getattr(package, "__version__", None) != wanted or not Path(package.__file__).resolve().is_relative_to(
        LIBRARY_PACKAGE
    ):
        raise AnsibleError(
            f"the sparkfleet library loaded from {package.__file__} is version {getattr(package, '__version__', '?')}, "
            f"the sparkfleet.vllm collection is {wanted}: the plugins need the library shipped in the collection "
            f"({LIBRARY_PACKAGE}); do not import another sparkfleet into the Python that runs Ansible"
        )


def load(name):
    """A module of the shipped library (``load("sparkfleet.planning.planner")``), or an error that says how to fix the controller."""
    _ready()
    return importlib.import_module(name)
