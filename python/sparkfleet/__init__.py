"""sparkfleet: plan tuned, supervised vLLM serving on NVIDIA DGX Spark (GB10) and CPU hosts."""

from .errors import InfeasibleError, PlanError
from .models import HostFacts, Intent, ModelProfile, ServePlan
from .planning.planner import plan
from .version import __version__

__all__ = ["HostFacts", "InfeasibleError", "Intent", "ModelProfile", "PlanError", "ServePlan", "__version__", "plan"]
