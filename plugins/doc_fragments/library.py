# Copyright: sparkfleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What every controller-side plugin of the collection needs: the library's packages."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options: {}
requirements:
  - the Python packages of the collection's requirements.txt on the controller (pydantic, PyYAML, uv, huggingface_hub);
    the sparkfleet library itself ships in the collection
"""
