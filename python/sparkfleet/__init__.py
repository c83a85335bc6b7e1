"""sparkfleet: plan tuned, supervised vLLM serving on NVIDIA DGX Spark (GB10) and CPU hosts."""

from .errors import InfeasibleError, PlanError
from .models import HostFacts, Intent, ModelProfile, ServePlan
from .planner import plan

__all__ = ["HostFacts", "InfeasibleError", "Intent", "ModelProfile", "PlanError", "ServePlan", "plan"]
__version__ = "0.1.0"
