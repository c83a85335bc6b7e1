# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The attributes every module that only reads the host shares."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    description: Only reads the host.
    support: full
  diff_mode:
    description: Nothing changes, so there is no diff.
    support: none
"""
