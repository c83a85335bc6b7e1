# -*- coding: utf-8 -*-
# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: preload
type: aggregate
short_description: Load the sparkfleet library once per run, before Ansible forks a worker for each task
version_added: 0.2.0
author: sparkfleet contributors (@sparkfleet)
description:
  - Ansible runs each task in a process forked from C(ansible-playbook). A filter or lookup of this collection
    imports the planner (pydantic and the sparkfleet library, about 0.7 s) in that worker, and the import dies with
    it, so every planning task pays it again.
  - This callback imports the library in C(ansible-playbook) itself when the playbook starts. Every worker then
    inherits it, and a planning task costs what its own work costs.
  - It changes no output and no result. If the controller lacks the collection's Python packages it does nothing,
    and the first planning task says what to install.
  - Enable it in the fleet's C(ansible.cfg) with C(callbacks_enabled = sparkfleet.vllm.preload).
extends_documentation_fragment:
  - sparkfleet.vllm.library
"""

from ansible.errors import AnsibleError
from ansible.plugins.callback import CallbackBase
from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.library import load

# The modules every controller-side plugin of the collection loads (plugin_utils.library.load's callers).
LIBRARY_MODULES = (
    "sparkfleet.boundary.adapters",
    "sparkfleet.boundary.filters",
    "sparkfleet.hub",
    "sparkfleet.hubpins",
    "sparkfleet.planning.planner",
    "sparkfleet.recipes",
    "sparkfleet.recipes.side",
    "sparkfleet.release.footprint",
    "sparkfleet.resolver",
    "sparkfleet.hostconfig.webui",
)


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "sparkfleet.vllm.preload"
    CALLBACK_NEEDS_ENABLED = True

    def v2_playbook_on_start(self, playbook):
        try:
            for name in LIBRARY_MODULES:
                load(name)
        except (AnsibleError, ImportError) as exc:
            # The plugin that needs the library raises the same error with its task's name; here it only slows.
            self._display.vvv(f"sparkfleet.vllm.preload: the library was not loaded ahead ({exc})")
