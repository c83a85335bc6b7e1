# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one wrapper behind every filter of this collection: sparkfleet.boundary.filters does the work."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.library import load


def library_filter(name):
    """The filter `name`: its arguments copied into plain containers, a refusal raised as AnsibleFilterError."""

    def run(*args, **kwargs):
        plain = load("sparkfleet.boundary.adapters").plain
        function = getattr(load("sparkfleet.boundary.filters"), name)
        try:
            return function(*(plain(value) for value in args), **{key: plain(value) for key, value in kwargs.items()})
        except ValueError as exc:
            raise AnsibleFilterError(f"{name}: {exc}") from exc

    # The library loads on the first call, so that listing or documenting the plugin needs none of its packages.
    run.__name__ = run.__qualname__ = name
    return run
